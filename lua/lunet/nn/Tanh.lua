-- nn.Tanh()
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Tanh = Module:extend('nn.Tanh')

function Tanh:__init(...)
  if select('#', ...) > 0 then options.fail('nn.Tanh', 'takes no arguments') end
end

function Tanh:forward(x) return F.tanh(x) end

return Tanh
