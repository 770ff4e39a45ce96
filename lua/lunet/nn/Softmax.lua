-- nn.Softmax([dim = -1])
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local Softmax = Module:extend('nn.Softmax')

function Softmax:__init(a) self.dim = a or -1 end

function Softmax:forward(x) return F.softmax(x, self.dim) end

function Softmax:extra_repr() return 'dim ' .. self.dim end

return Softmax
