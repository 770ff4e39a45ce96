-- nn.SELU([inplace = false]) or nn.SELU{inplace}: scale (x if x > 0 else
-- alpha (exp(x) - 1)), PyTorch's alpha and scale; inplace overwrites the input and returns it
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local SELU = Module:extend('nn.SELU')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function SELU:__init(...)
  self.inplace = (options.check('nn.SELU', options.positional('nn.SELU', POSITIONAL, ...), OPTS) or {}).inplace == true
end

function SELU:forward(x) return F.selu(x, self.inplace) end

function SELU:extra_repr() return self.inplace and 'inplace' or nil end

return SELU
