-- nn.TripletMarginLoss([{margin = 1, p = 2, eps = 1e-6, swap = false, reduction = 'mean'}]):
-- max(d(anchor, positive) - d(anchor, negative) + margin, 0), d the pairwise
-- distance (nn.PairwiseDistance); swap: d(anchor, negative) is replaced by
-- d(positive, negative) where that is smaller
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local TripletMarginLoss = Module:extend('nn.TripletMarginLoss')
local NAME, D = 'nn.TripletMarginLoss', F._internal.distance

function TripletMarginLoss:__init(opts) self.opts = D.triplet_opts(NAME, opts) end

function TripletMarginLoss:forward(anchor, positive, negative)
  return D.triplet_margin_loss(NAME, anchor, positive, negative, self.opts)
end

function TripletMarginLoss:extra_repr()
  local o = self.opts
  local s = ('margin %s, p %s'):format(o.margin, o.p)
  if o.swap then s = s .. ', swap' end
  if o.reduction ~= 'mean' then s = s .. ", reduction '" .. o.reduction .. "'" end
  return s
end

return TripletMarginLoss
