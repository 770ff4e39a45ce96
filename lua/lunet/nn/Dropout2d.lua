-- nn.Dropout2d([p = 0.5[, inplace = false]]) or nn.Dropout2d{p, inplace}: input
-- (N, C, H, W); in training zeroes whole channels with probability p (lunet's
-- seeded RNG) and scales the kept ones by 1/(1-p); identity in eval. inplace
-- overwrites the input and returns it (PyTorch's nn.Dropout2d(p, True))
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Dropout2d = Module:extend('nn.Dropout2d')

local OPTS, POSITIONAL = { p = 'number', inplace = 'boolean' }, { 'p', 'inplace' }

function Dropout2d:__init(...)
  local o = options.check('nn.Dropout2d', options.positional('nn.Dropout2d', POSITIONAL, ...), OPTS) or {}
  local a = o.p
  if a ~= nil and not (a >= 0 and a <= 1) then   -- (NaN too)
    options.fail('nn.Dropout2d', 'p must be a number in [0, 1], got ' .. tostring(a))
  end
  self.p = a or 0.5
  self.inplace = o.inplace == true
end

function Dropout2d:forward(x) return F.dropout2d(x, self.p, self.training, self.inplace) end

function Dropout2d:extra_repr() return 'p ' .. self.p .. (self.inplace and ', inplace' or '') end

return Dropout2d
