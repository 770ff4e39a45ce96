-- nn.Dropout1d([p = 0.5[, inplace = false]]) or nn.Dropout1d{p, inplace}: input
-- (N, C, L) or (C, L); in training zeroes whole channels with probability p
-- (lunet's seeded RNG) and scales the kept ones by 1/(1-p); identity in eval.
-- inplace overwrites the input and returns it (PyTorch's nn.Dropout1d(p, True))
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local NAME = 'nn.Dropout1d'
local Dropout1d = Module:extend(NAME)

local OPTS, POSITIONAL = { p = 'number', inplace = 'boolean' }, { 'p', 'inplace' }

function Dropout1d:__init(...)
  local o = options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {}
  local a = o.p
  if a ~= nil and not (a >= 0 and a <= 1) then   -- (NaN too)
    options.fail(NAME, 'p must be a number in [0, 1], got ' .. tostring(a))
  end
  self.p = a or 0.5
  self.inplace = o.inplace == true
end

function Dropout1d:forward(x) return F.dropout1d(x, self.p, self.training, self.inplace) end

function Dropout1d:extra_repr() return 'p ' .. self.p .. (self.inplace and ', inplace' or '') end

return Dropout1d
