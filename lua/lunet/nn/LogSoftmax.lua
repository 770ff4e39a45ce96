-- nn.LogSoftmax([dim = -1])
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local LogSoftmax = Module:extend('nn.LogSoftmax')

function LogSoftmax:__init(a) self.dim = a or -1 end

function LogSoftmax:forward(x) return F.log_softmax(x, self.dim) end

function LogSoftmax:extra_repr() return 'dim ' .. self.dim end

return LogSoftmax
