-- nn.MultiLabelSoftMarginLoss([{weight, reduction = 'mean'}]): for input
-- (N, C) logits and target (N, C) of 0s and 1s, the binary cross entropy of
-- each class (weight per class), averaged over the classes: one value per sample
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local MultiLabelSoftMarginLoss = Module:extend('nn.MultiLabelSoftMarginLoss')
local NAME, L = 'nn.MultiLabelSoftMarginLoss', F._internal.more_loss

function MultiLabelSoftMarginLoss:__init(opts)
  local o = L.weight_opts(NAME, opts)
  self.opts = { reduction = o.reduction }
  if o.weight then self:register_buffer('weight', o.weight) end   -- (moves with :to())
end

function MultiLabelSoftMarginLoss:forward(x, target)
  self.opts.weight = self.weight
  return L.multilabel_soft_margin_loss(NAME, x, target, self.opts)
end

function MultiLabelSoftMarginLoss:extra_repr()
  if self.opts.reduction ~= 'mean' then return "reduction '" .. self.opts.reduction .. "'" end
end

return MultiLabelSoftMarginLoss
