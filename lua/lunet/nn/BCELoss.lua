-- nn.BCELoss([{weight, reduction = 'mean'}]): binary cross entropy of
-- probabilities (input in [0, 1]) against target: -weight (t log(x) +
-- (1 - t) log(1 - x)), each log clamped to >= -100. On logits,
-- nn.BCEWithLogitsLoss is the stable form.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local BCELoss = Module:extend('nn.BCELoss')

local OPTS = { weight = 'tensor', reduction = 'string' }

function BCELoss:__init(opts)
  opts = options.check('nn.BCELoss', opts, OPTS) or {}
  options.one_of('nn.BCELoss', 'reduction', opts.reduction, options.REDUCTIONS)
  self.opts = { reduction = opts.reduction or 'mean' }
  if opts.weight then self:register_buffer('weight', opts.weight) end
end

function BCELoss:forward(x, target)
  self.opts.weight = self.weight
  return F.binary_cross_entropy(x, target, self.opts)
end

function BCELoss:extra_repr()
  if self.opts.reduction ~= 'mean' then return "reduction '" .. self.opts.reduction .. "'" end
end

return BCELoss
