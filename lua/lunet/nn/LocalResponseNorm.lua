-- nn.LocalResponseNorm(size[, {alpha = 1e-4, beta = 0.75, k = 1}]), or torch's
-- positional nn.LocalResponseNorm(size, alpha, beta, k): each value of
-- (N, C, *) input divided by (k + alpha * the mean square over the size
-- channels around it)^beta, as torch's
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local LocalResponseNorm = Module:extend('nn.LocalResponseNorm')

local OPTS, POSITIONAL = { alpha = 'number', beta = 'number', k = 'number' }, { 'alpha', 'beta', 'k' }

-- size, alpha, beta, k checked (errors naming name) and set on self; the
-- constructor nn.CrossMapLRN2d shares
function LocalResponseNorm._setup(self, name, size, ...)
  if type(size) ~= 'number' or size % 1 ~= 0 or size < 1 or size >= 2 ^ 31 then
    options.fail(name, 'size must be an integer >= 1, got ' .. tostring(size))
  end
  local o = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
  self.size, self.alpha, self.beta, self.k = size, o.alpha or 1e-4, o.beta or 0.75, o.k or 1
end

function LocalResponseNorm:__init(size, ...)
  LocalResponseNorm._setup(self, 'nn.LocalResponseNorm', size, ...)
  self.opts = { alpha = self.alpha, beta = self.beta, k = self.k }
end

function LocalResponseNorm:forward(x) return F.local_response_norm(x, self.size, self.opts) end

function LocalResponseNorm:extra_repr()
  return ('%d, alpha %g, beta %g, k %g'):format(self.size, self.alpha, self.beta, self.k)
end

return LocalResponseNorm
