-- nn.Threshold(threshold, value[, inplace = false]) or nn.Threshold{threshold, value, inplace}:
-- x where x > threshold, else value; inplace overwrites the input and returns it
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Threshold = Module:extend('nn.Threshold')

local OPTS, POSITIONAL = { threshold = 'number', value = 'number', inplace = 'boolean' },
  { 'threshold', 'value', 'inplace' }

function Threshold:__init(...)
  local o = options.check('nn.Threshold', options.positional('nn.Threshold', POSITIONAL, ...), OPTS) or {}
  -- (both required, as in PyTorch)
  if o.threshold == nil or o.value == nil then
    options.fail('nn.Threshold', ('threshold and value must be numbers, got %s and %s'):format(type(o.threshold),
      type(o.value)))
  end
  self.threshold, self.value, self.inplace = o.threshold, o.value, o.inplace == true
end

function Threshold:forward(x) return F.threshold(x, self.threshold, self.value, self.inplace) end

function Threshold:extra_repr()
  return ('threshold %s, value %s%s'):format(self.threshold, self.value, self.inplace and ', inplace' or '')
end

return Threshold
