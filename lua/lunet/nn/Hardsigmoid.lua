-- nn.Hardsigmoid(): relu6(x + 3) / 6. nn.Hardsigmoid(true) / nn.Hardsigmoid{inplace = true} are accepted for
-- PyTorch's sake: lunet computes out of place (the same values)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Hardsigmoid = Module:extend('nn.Hardsigmoid')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function Hardsigmoid:__init(...) options.check('nn.Hardsigmoid', options.positional('nn.Hardsigmoid', POSITIONAL, ...), OPTS) end

function Hardsigmoid:forward(x) return F.hardsigmoid(x) end

return Hardsigmoid
