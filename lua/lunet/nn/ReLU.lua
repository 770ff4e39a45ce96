-- nn.ReLU([inplace = false]) or nn.ReLU{inplace}: max(x, 0); inplace
-- overwrites the input and returns it (PyTorch's and Torch7's nn.ReLU(true))
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local ReLU = Module:extend('nn.ReLU')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function ReLU:__init(...)
  self.inplace = (options.check('nn.ReLU', options.positional('nn.ReLU', POSITIONAL, ...), OPTS) or {}).inplace == true
end

function ReLU:forward(x) return F.relu(x, self.inplace) end

function ReLU:extra_repr() return self.inplace and 'inplace' or nil end

return ReLU
