-- nn.Hardtanh([min_val = -1[, max_val = 1[, inplace = false]]]) or nn.Hardtanh{min_val, max_val, inplace}:
-- x clamped to [min_val, max_val]; inplace overwrites the input and returns it
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Hardtanh = Module:extend('nn.Hardtanh')

local OPTS, POSITIONAL = { min_val = 'number', max_val = 'number', inplace = 'boolean' },
  { 'min_val', 'max_val', 'inplace' }

function Hardtanh:__init(...)
  local o = options.check('nn.Hardtanh', options.positional('nn.Hardtanh', POSITIONAL, ...), OPTS) or {}
  self.min_val, self.max_val, self.inplace = o.min_val or -1, o.max_val or 1, o.inplace == true
  -- (PyTorch's module asserts it; F.hardtanh takes min_val == max_val)
  if not (self.max_val > self.min_val) then
    options.fail('nn.Hardtanh', ('max_val (%s) must be greater than min_val (%s)'):format(self.max_val, self.min_val))
  end
end

function Hardtanh:forward(x) return F.hardtanh(x, self.min_val, self.max_val, self.inplace) end

function Hardtanh:extra_repr()
  return ('min_val %s, max_val %s%s'):format(self.min_val, self.max_val, self.inplace and ', inplace' or '')
end

return Hardtanh
