-- nn.ReLU6(): min(max(x, 0), 6). nn.ReLU6(true) / nn.ReLU6{inplace = true}
-- overwrite the input and return it, as PyTorch's inplace
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local ReLU6 = Module:extend('nn.ReLU6')

local OPTS, POSITIONAL = { inplace = 'boolean' }, { 'inplace' }

function ReLU6:__init(...)
  self.inplace = (options.check('nn.ReLU6', options.positional('nn.ReLU6', POSITIONAL, ...), OPTS) or {}).inplace == true
end

function ReLU6:forward(x) return F.relu6(x, self.inplace) end

function ReLU6:extra_repr() return self.inplace and 'inplace' or nil end

return ReLU6
