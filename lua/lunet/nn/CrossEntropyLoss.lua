-- nn.CrossEntropyLoss([{weight, reduction = 'mean', ignore_index = -100,
-- label_smoothing = 0}]): loss(logits (N, C), target (N) class ids 1..C)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local CrossEntropyLoss = Module:extend('nn.CrossEntropyLoss')

local OPTS = { weight = 'tensor', reduction = 'string', ignore_index = 'number', label_smoothing = 'number' }

function CrossEntropyLoss:__init(opts)
  opts = options.check('nn.CrossEntropyLoss', opts, OPTS) or {}
  options.one_of('nn.CrossEntropyLoss', 'reduction', opts.reduction, options.REDUCTIONS)
  local eps = opts.label_smoothing
  if eps ~= nil and not (eps >= 0 and eps <= 1) then
    options.fail('nn.CrossEntropyLoss', 'label_smoothing must be in [0, 1], got ' .. tostring(eps))
  end
  self.opts = { weight = opts.weight, reduction = opts.reduction or 'mean',
    ignore_index = opts.ignore_index or -100, label_smoothing = opts.label_smoothing or 0 }
  if opts.weight then self:register_buffer('weight', opts.weight) end
end

function CrossEntropyLoss:forward(x, target)
  self.opts.weight = self.weight
  return F.cross_entropy(x, target, self.opts)
end

function CrossEntropyLoss:extra_repr()
  local o = self.opts
  local r = {}
  if o.reduction ~= 'mean' then r[#r + 1] = "reduction '" .. o.reduction .. "'" end
  if o.label_smoothing ~= 0 then r[#r + 1] = 'label_smoothing ' .. o.label_smoothing end
  if o.ignore_index ~= -100 then r[#r + 1] = 'ignore_index ' .. o.ignore_index end
  if self.weight then r[#r + 1] = 'weighted' end
  if #r > 0 then return table.concat(r, ', ') end
end

return CrossEntropyLoss
