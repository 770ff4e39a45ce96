-- nn.Sigmoid(): 1 / (1 + exp(-x))
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Sigmoid = Module:extend('nn.Sigmoid')

function Sigmoid:__init(...)
  if select('#', ...) > 0 then options.fail('nn.Sigmoid', 'takes no arguments') end
end

function Sigmoid:forward(x) return F.sigmoid(x) end

return Sigmoid
