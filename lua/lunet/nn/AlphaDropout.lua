-- nn.AlphaDropout([p = 0.5[, inplace = false]]) or nn.AlphaDropout{p, inplace}: SELU's
-- dropout: in training each element is set with probability p to SELU's
-- negative saturation, then all go through the affine map that keeps mean 0
-- and variance 1 (PyTorch's formula); identity in eval
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local NAME = 'nn.AlphaDropout'
local AlphaDropout = Module:extend(NAME)

local OPTS, POSITIONAL = { p = 'number', inplace = 'boolean' }, { 'p', 'inplace' }

function AlphaDropout:__init(...)
  local o = options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {}
  local a = o.p
  if a ~= nil and not (a >= 0 and a <= 1) then   -- (NaN too)
    options.fail(NAME, 'p must be a number in [0, 1], got ' .. tostring(a))
  end
  self.p = a or 0.5
  self.inplace = o.inplace == true
end

function AlphaDropout:forward(x) return F.alpha_dropout(x, self.p, self.training, self.inplace) end

function AlphaDropout:extra_repr() return 'p ' .. self.p .. (self.inplace and ', inplace' or '') end

return AlphaDropout
