-- nn.Softplus([beta = 1[, threshold = 20]]) or nn.Softplus{beta, threshold}:
-- log(1 + exp(beta x)) / beta, and x where beta x > threshold
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Softplus = Module:extend('nn.Softplus')

local OPTS, POSITIONAL = { beta = 'number', threshold = 'number' }, { 'beta', 'threshold' }

function Softplus:__init(...)
  local o = options.check('nn.Softplus', options.positional('nn.Softplus', POSITIONAL, ...), OPTS) or {}
  self.beta, self.threshold = o.beta or 1, o.threshold or 20
end

function Softplus:forward(x) return F.softplus(x, self.beta, self.threshold) end

function Softplus:extra_repr() return ('beta %s, threshold %s'):format(self.beta, self.threshold) end

return Softplus
