-- nn.HingeEmbeddingLoss([{margin = 1, reduction = 'mean'}]): input where the
-- target is 1, max(0, margin - input) where it is -1 (for learning whether two
-- inputs are similar, the input a distance between them)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local HingeEmbeddingLoss = Module:extend('nn.HingeEmbeddingLoss')
local NAME, L = 'nn.HingeEmbeddingLoss', F._internal.margin_more

function HingeEmbeddingLoss:__init(opts) self.opts = L.hinge_opts(NAME, opts) end

function HingeEmbeddingLoss:forward(x, target) return L.hinge_embedding_loss(NAME, x, target, self.opts) end

function HingeEmbeddingLoss:extra_repr()
  local s = 'margin ' .. self.opts.margin
  if self.opts.reduction ~= 'mean' then s = s .. ", reduction '" .. self.opts.reduction .. "'" end
  return s
end

return HingeEmbeddingLoss
