-- nn.ReLU(): max(x, 0)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local ReLU = Module:extend('nn.ReLU')

function ReLU:forward(x) return F.relu(x) end

return ReLU
