-- nn.Softmax([dim = -1]) or nn.Softmax{dim = -1}
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Softmax = Module:extend('nn.Softmax')

local OPTS, POSITIONAL = { dim = 'number' }, { 'dim' }

function Softmax:__init(...)
  self.dim = (options.check('nn.Softmax', options.positional('nn.Softmax', POSITIONAL, ...), OPTS) or {}).dim or -1
end

function Softmax:forward(x) return F.softmax(x, self.dim) end

function Softmax:extra_repr() return 'dim ' .. self.dim end

return Softmax
