-- nn.Hardswish(): x * relu6(x + 3) / 6. nn.Hardswish(true) / nn.Hardswish{inplace = true}
-- overwrite the input and return it, as PyTorch's inplace
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Hardswish = Module:extend('nn.Hardswish')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function Hardswish:__init(...)
  self.inplace = (options.check('nn.Hardswish', options.positional('nn.Hardswish', POSITIONAL, ...), OPTS) or {}).inplace == true
end

function Hardswish:forward(x) return F.hardswish(x, self.inplace) end

function Hardswish:extra_repr() return self.inplace and 'inplace' or nil end

return Hardswish
