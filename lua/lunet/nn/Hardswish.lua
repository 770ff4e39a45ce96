-- nn.Hardswish(): x * relu6(x + 3) / 6. nn.Hardswish(true) / nn.Hardswish{inplace = true} are accepted for
-- PyTorch's sake: lunet computes out of place (the same values)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Hardswish = Module:extend('nn.Hardswish')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function Hardswish:__init(...) options.check('nn.Hardswish', options.positional('nn.Hardswish', POSITIONAL, ...), OPTS) end

function Hardswish:forward(x) return F.hardswish(x) end

return Hardswish
