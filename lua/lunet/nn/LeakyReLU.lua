-- nn.LeakyReLU([negative_slope = 0.01]): x if x > 0 else slope * x
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local LeakyReLU = Module:extend('nn.LeakyReLU')

function LeakyReLU:__init(a) self.negative_slope = a or 0.01 end

function LeakyReLU:forward(x) return F.leaky_relu(x, self.negative_slope) end

function LeakyReLU:extra_repr() return 'slope ' .. self.negative_slope end

return LeakyReLU
