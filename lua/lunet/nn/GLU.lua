-- nn.GLU([dim = -1]) or nn.GLU{dim = -1}: a * sigmoid(b), a and b the halves
-- of the input along dim (1-based; its size must be even)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local GLU = Module:extend('nn.GLU')

local OPTS, POSITIONAL = { dim = 'number' }, { 'dim' }

function GLU:__init(...)
  self.dim = (options.check('nn.GLU', options.positional('nn.GLU', POSITIONAL, ...), OPTS) or {}).dim or -1
end

function GLU:forward(x) return F.glu(x, self.dim) end

function GLU:extra_repr() return 'dim ' .. self.dim end

return GLU
