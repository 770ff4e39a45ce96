-- nn.CosineEmbeddingLoss([{margin = 0, reduction = 'mean'}]): for inputs
-- (N, D) and a target (N) of 1 or -1 (or (D) and a 0-d target): 1 - cos(x1, x2)
-- where the target is 1, max(cos(x1, x2) - margin, 0) where it is -1
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local CosineEmbeddingLoss = Module:extend('nn.CosineEmbeddingLoss')
local NAME, D = 'nn.CosineEmbeddingLoss', F._internal.distance

function CosineEmbeddingLoss:__init(opts) self.opts = D.margin_opts(NAME, opts) end

function CosineEmbeddingLoss:forward(x1, x2, target)
  return D.cosine_embedding_loss(NAME, x1, x2, target, self.opts)
end

function CosineEmbeddingLoss:extra_repr()
  local s = 'margin ' .. self.opts.margin
  if self.opts.reduction ~= 'mean' then s = s .. ", reduction '" .. self.opts.reduction .. "'" end
  return s
end

return CosineEmbeddingLoss
