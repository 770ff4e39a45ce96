-- nn.Mish(): x * tanh(softplus(x)). nn.Mish(true) / nn.Mish{inplace = true} are
-- accepted for PyTorch's sake: lunet computes out of place (the same values)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Mish = Module:extend('nn.Mish')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function Mish:__init(...) options.check('nn.Mish', options.positional('nn.Mish', POSITIONAL, ...), OPTS) end

function Mish:forward(x) return F.mish(x) end

return Mish
