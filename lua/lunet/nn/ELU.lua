-- nn.ELU([alpha = 1[, inplace = false]]) or nn.ELU{alpha, inplace}: x if x > 0
-- else alpha * (exp(x) - 1); inplace overwrites the input and returns it
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local ELU = Module:extend('nn.ELU')

local OPTS, POSITIONAL = { alpha = 'number', inplace = 'boolean' }, { 'alpha', 'inplace' }

function ELU:__init(...)
  local o = options.check('nn.ELU', options.positional('nn.ELU', POSITIONAL, ...), OPTS) or {}
  self.alpha, self.inplace = o.alpha or 1, o.inplace == true
end

function ELU:forward(x) return F.elu(x, self.alpha, self.inplace) end

function ELU:extra_repr() return 'alpha ' .. self.alpha .. (self.inplace and ', inplace' or '') end

return ELU
