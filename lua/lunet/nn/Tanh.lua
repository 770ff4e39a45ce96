-- nn.Tanh()
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local Tanh = Module:extend('nn.Tanh')

function Tanh:forward(x) return F.tanh(x) end

return Tanh
