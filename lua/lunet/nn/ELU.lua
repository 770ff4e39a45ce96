-- nn.ELU([alpha = 1]) or nn.ELU{alpha = 1}: x if x > 0 else alpha * (exp(x) - 1)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local ELU = Module:extend('nn.ELU')

local OPTS, POSITIONAL = { alpha = 'number', inplace = 'boolean' }, { 'alpha', 'inplace' }

function ELU:__init(...)
  self.alpha = (options.check('nn.ELU', options.positional('nn.ELU', POSITIONAL, ...), OPTS) or {}).alpha or 1
end

function ELU:forward(x) return F.elu(x, self.alpha) end

function ELU:extra_repr() return 'alpha ' .. self.alpha end

return ELU
