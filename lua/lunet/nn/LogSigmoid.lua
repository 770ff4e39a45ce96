-- nn.LogSigmoid(): log(sigmoid(x)), computed as -softplus(-x) (stable for large |x|)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local LogSigmoid = Module:extend('nn.LogSigmoid')

function LogSigmoid:__init(...)
  if select('#', ...) > 0 then options.fail('nn.LogSigmoid', 'takes no arguments') end
end

function LogSigmoid:forward(x) return F.logsigmoid(x) end

return LogSigmoid
