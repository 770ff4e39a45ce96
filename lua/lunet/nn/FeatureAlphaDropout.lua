-- nn.FeatureAlphaDropout([p = 0.5[, inplace = false]]) or nn.FeatureAlphaDropout{p, inplace}: AlphaDropout
-- of whole channels of an (N, C, ...) input (at least 2-d); identity in eval
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local NAME = 'nn.FeatureAlphaDropout'
local FeatureAlphaDropout = Module:extend(NAME)

local OPTS, POSITIONAL = { p = 'number', inplace = 'boolean' }, { 'p', 'inplace' }

function FeatureAlphaDropout:__init(...)
  local o = options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {}
  local a = o.p
  if a ~= nil and not (a >= 0 and a <= 1) then   -- (NaN too)
    options.fail(NAME, 'p must be a number in [0, 1], got ' .. tostring(a))
  end
  self.p = a or 0.5
  self.inplace = o.inplace == true
end

function FeatureAlphaDropout:forward(x) return F.feature_alpha_dropout(x, self.p, self.training, self.inplace) end

function FeatureAlphaDropout:extra_repr() return 'p ' .. self.p .. (self.inplace and ', inplace' or '') end

return FeatureAlphaDropout
