-- nn.ReLU6(): min(max(x, 0), 6). nn.ReLU6(true) / nn.ReLU6{inplace = true} are accepted for
-- PyTorch's sake: lunet computes out of place (the same values)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local ReLU6 = Module:extend('nn.ReLU6')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function ReLU6:__init(...) options.check('nn.ReLU6', options.positional('nn.ReLU6', POSITIONAL, ...), OPTS) end

function ReLU6:forward(x) return F.relu6(x) end

return ReLU6
