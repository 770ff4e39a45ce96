-- nn.ReLU(): max(x, 0). nn.ReLU(true) / nn.ReLU{inplace = true} are accepted for
-- PyTorch's and Torch7's sake: lunet computes out of place (the same values)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local ReLU = Module:extend('nn.ReLU')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function ReLU:__init(...) options.check('nn.ReLU', options.positional('nn.ReLU', POSITIONAL, ...), OPTS) end

function ReLU:forward(x) return F.relu(x) end

return ReLU
