-- nn.BCEWithLogitsLoss([{weight, pos_weight, reduction = 'mean'}]): binary
-- cross entropy of sigmoid(input) against target in [0, 1], computed stably
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local BCEWithLogitsLoss = Module:extend('nn.BCEWithLogitsLoss')

local OPTS = { weight = 'tensor', pos_weight = 'tensor', reduction = 'string' }

function BCEWithLogitsLoss:__init(opts)
  opts = options.check('nn.BCEWithLogitsLoss', opts, OPTS) or {}
  options.one_of('nn.BCEWithLogitsLoss', 'reduction', opts.reduction, options.REDUCTIONS)
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
