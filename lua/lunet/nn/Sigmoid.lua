-- nn.Sigmoid(): 1 / (1 + exp(-x))
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local Sigmoid = Module:extend('nn.Sigmoid')

function Sigmoid:forward(x) return F.sigmoid(x) end

return Sigmoid
