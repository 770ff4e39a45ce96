-- nn.Mish(): x * tanh(softplus(x)). nn.Mish(true) / nn.Mish{inplace = true}
-- overwrite the input and return it, as PyTorch's inplace
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Mish = Module:extend('nn.Mish')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function Mish:__init(...)
  self.inplace = (options.check('nn.Mish', options.positional('nn.Mish', POSITIONAL, ...), OPTS) or {}).inplace == true
end

function Mish:forward(x) return F.mish(x, self.inplace) end

function Mish:extra_repr() return self.inplace and 'inplace' or nil end

return Mish
