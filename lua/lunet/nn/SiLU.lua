-- nn.SiLU(): x * sigmoid(x). nn.SiLU(true) / nn.SiLU{inplace = true} are accepted for
-- PyTorch's sake: lunet computes out of place (the same values)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local SiLU = Module:extend('nn.SiLU')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function SiLU:__init(...) options.check('nn.SiLU', options.positional('nn.SiLU', POSITIONAL, ...), OPTS) end

function SiLU:forward(x) return F.silu(x) end

return SiLU
