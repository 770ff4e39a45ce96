-- nn.ELU([alpha = 1]): x if x > 0 else alpha * (exp(x) - 1)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local ELU = Module:extend('nn.ELU')

function ELU:__init(a) self.alpha = a or 1 end

function ELU:forward(x) return F.elu(x, self.alpha) end

function ELU:extra_repr() return 'alpha ' .. self.alpha end

return ELU
