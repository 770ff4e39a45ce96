-- nn.BCEWithLogitsLoss([{weight, pos_weight, reduction = 'mean'}]): binary
-- cross entropy of sigmoid(input) against target in [0, 1], computed stably
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local BCEWithLogitsLoss = Module:extend('nn.BCEWithLogitsLoss')

function BCEWithLogitsLoss:__init(opts)
  if opts ~= nil and type(opts) ~= 'table' then error('nn.BCEWithLogitsLoss: options must be a table, got ' .. type(opts), 3) end
  opts = opts or {}
  self.opts = { reduction = opts.reduction or 'mean' }
  if opts.weight then self:register_buffer('weight', opts.weight) end
  if opts.pos_weight then self:register_buffer('pos_weight', opts.pos_weight) end
end

function BCEWithLogitsLoss:forward(x, target)
  self.opts.weight, self.opts.pos_weight = self.weight, self.pos_weight
  return F.binary_cross_entropy_with_logits(x, target, self.opts)
end

function BCEWithLogitsLoss:extra_repr()
  if self.opts.reduction ~= 'mean' then return "reduction '" .. self.opts.reduction .. "'" end
end

return BCEWithLogitsLoss
