-- nn.MarginRankingLoss([{margin = 0, reduction = 'mean'}]):
-- max(-target (x1 - x2) + margin, 0), target 1 where x1 should rank higher,
-- -1 where x2 should; x1, x2 and target have the same number of dims
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local MarginRankingLoss = Module:extend('nn.MarginRankingLoss')
local NAME, D = 'nn.MarginRankingLoss', F._internal.distance

function MarginRankingLoss:__init(opts) self.opts = D.margin_opts(NAME, opts) end

function MarginRankingLoss:forward(x1, x2, target)
  return D.margin_ranking_loss(NAME, x1, x2, target, self.opts)
end

function MarginRankingLoss:extra_repr()
  local s = 'margin ' .. self.opts.margin
  if self.opts.reduction ~= 'mean' then s = s .. ", reduction '" .. self.opts.reduction .. "'" end
  return s
end

return MarginRankingLoss
