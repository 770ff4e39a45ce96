-- nn.Dropout([p = 0.5[, inplace = false]]) or nn.Dropout{p, inplace}: in training zeroes
-- elements with probability p (lunet's seeded RNG) and scales the rest by 1/(1-p); identity
-- in eval. inplace overwrites the input and returns it (PyTorch's nn.Dropout(p, True))
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Dropout = Module:extend('nn.Dropout')

local OPTS, POSITIONAL = { p = 'number', inplace = 'boolean' }, { 'p', 'inplace' }

function Dropout:__init(...)
  local o = options.check('nn.Dropout', options.positional('nn.Dropout', POSITIONAL, ...), OPTS) or {}
  local a = o.p
  if a ~= nil and not (a >= 0 and a <= 1) then   -- (NaN too)
    options.fail('nn.Dropout', 'p must be a number in [0, 1], got ' .. tostring(a))
  end
  self.p = a or 0.5
  self.inplace = o.inplace == true
end

function Dropout:forward(x) return F.dropout(x, self.p, self.training, self.inplace) end

function Dropout:extra_repr() return 'p ' .. self.p .. (self.inplace and ', inplace' or '') end

return Dropout
