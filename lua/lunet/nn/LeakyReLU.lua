-- nn.LeakyReLU([negative_slope = 0.01[, inplace = false]]) or nn.LeakyReLU{negative_slope, inplace}:
-- x if x > 0 else slope * x; inplace overwrites the input and returns it
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local LeakyReLU = Module:extend('nn.LeakyReLU')

local OPTS, POSITIONAL = { negative_slope = 'number', inplace = 'boolean' }, { 'negative_slope', 'inplace' }

function LeakyReLU:__init(...)
  local o = options.check('nn.LeakyReLU', options.positional('nn.LeakyReLU', POSITIONAL, ...), OPTS) or {}
  self.negative_slope, self.inplace = o.negative_slope or 0.01, o.inplace == true
end

function LeakyReLU:forward(x) return F.leaky_relu(x, self.negative_slope, self.inplace) end

function LeakyReLU:extra_repr() return 'slope ' .. self.negative_slope .. (self.inplace and ', inplace' or '') end

return LeakyReLU
