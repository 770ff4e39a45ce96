-- nn.TripletMarginWithDistanceLoss([{distance_function, margin = 1, swap = false,
-- reduction = 'mean'}]): max(d(anchor, positive) - d(anchor, negative) + margin, 0),
-- d the distance_function (any function or callable of two tensors returning
-- one distance per sample; nn.PairwiseDistance's by default); swap: d(anchor,
-- negative) is replaced by d(positive, negative) where that is smaller
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local TripletMarginWithDistanceLoss = Module:extend('nn.TripletMarginWithDistanceLoss')
local NAME, L = 'nn.TripletMarginWithDistanceLoss', F._internal.margin_more

function TripletMarginWithDistanceLoss:__init(opts) self.opts = L.tmd_opts(NAME, opts) end

function TripletMarginWithDistanceLoss:forward(anchor, positive, negative)
  return L.triplet_margin_with_distance_loss(NAME, anchor, positive, negative, self.opts)
end

function TripletMarginWithDistanceLoss:extra_repr()
  local o = self.opts
  local s = 'margin ' .. o.margin
  if o.distance_function then s = s .. ', custom distance' end
  if o.swap then s = s .. ', swap' end
  if o.reduction ~= 'mean' then s = s .. ", reduction '" .. o.reduction .. "'" end
  return s
end

return TripletMarginWithDistanceLoss
