-- nn.Softsign(): x / (1 + |x|)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Softsign = Module:extend('nn.Softsign')

function Softsign:__init(...)
  if select('#', ...) > 0 then options.fail('nn.Softsign', 'takes no arguments') end
end

function Softsign:forward(x) return F.softsign(x) end

return Softsign
