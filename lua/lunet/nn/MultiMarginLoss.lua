-- nn.MultiMarginLoss([{p = 1, margin = 1, weight, reduction = 'mean'}]): for
-- input (N, C) and target (N) labels in 1..C (int64), the multi-class hinge
-- loss: the sum over the other classes j of max(0, margin - x[y] + x[j])^p
-- (times weight[y]), divided by C
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local MultiMarginLoss = Module:extend('nn.MultiMarginLoss')
local NAME, L = 'nn.MultiMarginLoss', F._internal.more_loss

function MultiMarginLoss:__init(opts)
  local o = L.multi_margin_opts(NAME, opts)
  self.opts = { p = o.p, margin = o.margin, reduction = o.reduction }
  if o.weight then self:register_buffer('weight', o.weight) end   -- (moves with :to())
end

function MultiMarginLoss:forward(x, target)
  self.opts.weight = self.weight
  return L.multi_margin_loss(NAME, x, target, self.opts)
end

function MultiMarginLoss:extra_repr()
  local s = ('p %s, margin %s'):format(self.opts.p, self.opts.margin)
  if self.opts.reduction ~= 'mean' then s = s .. ", reduction '" .. self.opts.reduction .. "'" end
  return s
end

return MultiMarginLoss
