-- nn.Hardsigmoid(): relu6(x + 3) / 6. nn.Hardsigmoid(true) / nn.Hardsigmoid{inplace = true}
-- overwrite the input and return it, as PyTorch's inplace
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Hardsigmoid = Module:extend('nn.Hardsigmoid')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function Hardsigmoid:__init(...)
  self.inplace = (options.check('nn.Hardsigmoid', options.positional('nn.Hardsigmoid', POSITIONAL, ...), OPTS) or {}).inplace == true
end

function Hardsigmoid:forward(x) return F.hardsigmoid(x, self.inplace) end

function Hardsigmoid:extra_repr() return self.inplace and 'inplace' or nil end

return Hardsigmoid
