-- nn.LogSoftmax([dim = -1]) or nn.LogSoftmax{dim = -1}
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local LogSoftmax = Module:extend('nn.LogSoftmax')

local OPTS, POSITIONAL = { dim = 'number' }, { 'dim' }

function LogSoftmax:__init(...)
  self.dim = (options.check('nn.LogSoftmax', options.positional('nn.LogSoftmax', POSITIONAL, ...), OPTS) or {}).dim or -1
end

function LogSoftmax:forward(x) return F.log_softmax(x, self.dim) end

function LogSoftmax:extra_repr() return 'dim ' .. self.dim end

return LogSoftmax
