-- nn.GELU([approximate = 'none' | 'tanh'])
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local GELU = Module:extend('nn.GELU')

function GELU:__init(a) self.approximate = a or 'none' end

function GELU:forward(x) return F.gelu(x, self.approximate) end

function GELU:extra_repr() if self.approximate ~= 'none' then return "approximate '" .. self.approximate .. "'" end end

return GELU
