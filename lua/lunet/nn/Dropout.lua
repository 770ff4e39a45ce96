-- nn.Dropout([p = 0.5]) or nn.Dropout{p = 0.5}: in training zeroes elements with probability p
-- (lunet's seeded RNG) and scales the rest by 1/(1-p); identity in eval
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Dropout = Module:extend('nn.Dropout')

-- inplace is accepted for PyTorch's sake: lunet computes out of place (the same values)
local OPTS, POSITIONAL = { p = 'number', inplace = 'boolean' }, { 'p', 'inplace' }

function Dropout:__init(...)
  local a = (options.check('nn.Dropout', options.positional('nn.Dropout', POSITIONAL, ...), OPTS) or {}).p
  if a ~= nil and not (a >= 0 and a <= 1) then   -- (NaN too)
    options.fail('nn.Dropout', 'p must be a number in [0, 1], got ' .. tostring(a))
  end
  self.p = a or 0.5
end

function Dropout:forward(x) return F.dropout(x, self.p, self.training) end

function Dropout:extra_repr() return 'p ' .. self.p end

return Dropout
