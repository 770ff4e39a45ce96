-- nn.Softmin([dim = -1]) or nn.Softmin{dim = -1}: softmax(-x) along dim (1-based)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Softmin = Module:extend('nn.Softmin')

local OPTS, POSITIONAL = { dim = 'number' }, { 'dim' }

function Softmin:__init(...)
  self.dim = (options.check('nn.Softmin', options.positional('nn.Softmin', POSITIONAL, ...), OPTS) or {}).dim or -1
end

function Softmin:forward(x) return F.softmin(x, self.dim) end

function Softmin:extra_repr() return 'dim ' .. self.dim end

return Softmin
