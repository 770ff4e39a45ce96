-- nn.PairwiseDistance([p = 2[, eps = 1e-6[, keepdim = false]]]) or
-- nn.PairwiseDistance{p, eps, keepdim}: the p-norm of x1 - x2 + eps along the
-- last dim (PyTorch 1.13's; eps keeps the gradient finite where x1 == x2)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local PairwiseDistance = Module:extend('nn.PairwiseDistance')
local NAME, D = 'nn.PairwiseDistance', F._internal.distance
local OPTS, POSITIONAL = { p = 'number', eps = 'number', keepdim = 'boolean' }, { 'p', 'eps', 'keepdim' }

function PairwiseDistance:__init(...)
  local o = D.pd_opts(NAME, options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {})
  self.p, self.eps, self.keepdim = o.p, o.eps, o.keepdim
end

function PairwiseDistance:forward(x1, x2)
  return D.pairwise_distance(NAME, x1, x2, self.p, self.eps, self.keepdim)
end

function PairwiseDistance:extra_repr()
  return ('p %s, eps %s'):format(self.p, self.eps) .. (self.keepdim and ', keepdim' or '')
end

return PairwiseDistance
