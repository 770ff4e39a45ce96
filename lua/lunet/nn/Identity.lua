-- nn.Identity(): returns its input
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local Identity = Module:extend('nn.Identity')

function Identity:forward(x) return x end

return Identity
