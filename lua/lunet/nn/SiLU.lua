-- nn.SiLU(): x * sigmoid(x). nn.SiLU(true) / nn.SiLU{inplace = true}
-- overwrite the input and return it, as PyTorch's inplace
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local SiLU = Module:extend('nn.SiLU')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function SiLU:__init(...)
  self.inplace = (options.check('nn.SiLU', options.positional('nn.SiLU', POSITIONAL, ...), OPTS) or {}).inplace == true
end

function SiLU:forward(x) return F.silu(x, self.inplace) end

function SiLU:extra_repr() return self.inplace and 'inplace' or nil end

return SiLU
