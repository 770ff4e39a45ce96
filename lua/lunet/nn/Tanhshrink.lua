-- nn.Tanhshrink(): x - tanh(x)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Tanhshrink = Module:extend('nn.Tanhshrink')

function Tanhshrink:__init(...)
  if select('#', ...) > 0 then options.fail('nn.Tanhshrink', 'takes no arguments') end
end

function Tanhshrink:forward(x) return F.tanhshrink(x) end

return Tanhshrink
