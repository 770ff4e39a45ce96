-- nn.CosineSimilarity([dim = 2[, eps = 1e-8]]) or nn.CosineSimilarity{dim, eps}:
-- the cosine of x1 and x2 along dim (1-based), each norm clamped to >= eps
-- (PyTorch 1.13's: each squared norm clamped to >= eps^2); x1 and x2 broadcast
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local CosineSimilarity = Module:extend('nn.CosineSimilarity')
local NAME, D = 'nn.CosineSimilarity', F._internal.distance

function CosineSimilarity:__init(...)
  local o = D.cos_opts(NAME, ...)
  self.dim, self.eps = o.dim, o.eps
end

function CosineSimilarity:forward(x1, x2) return D.cosine_similarity(NAME, x1, x2, self.dim, self.eps) end

function CosineSimilarity:extra_repr() return ('dim %s, eps %s'):format(self.dim, self.eps) end

return CosineSimilarity
