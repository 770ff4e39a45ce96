-- nn.Dropout([p = 0.5]): in training zeroes elements with probability p
-- (lunet's seeded RNG) and scales the rest by 1/(1-p); identity in eval
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local Dropout = Module:extend('nn.Dropout')

function Dropout:__init(a)
  if a ~= nil and (type(a) ~= 'number' or a < 0 or a > 1) then
    error('nn.Dropout: p must be a number in [0, 1], got ' .. tostring(a), 3)
  end
  self.p = a or 0.5
end

function Dropout:forward(x) return F.dropout(x, self.p, self.training) end

function Dropout:extra_repr() return 'p ' .. self.p end

return Dropout
