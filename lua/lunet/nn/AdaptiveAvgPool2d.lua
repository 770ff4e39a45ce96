-- nn.AdaptiveAvgPool2d(output_size): a number or {oh, ow} (or {output_size = ...})
local Module = require 'lunet.nn.Module'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local AdaptiveAvgPool2d = Module:extend('nn.AdaptiveAvgPool2d')

local OPTS, POSITIONAL = { output_size = 'number|table' }, { 'output_size' }

function AdaptiveAvgPool2d:__init(...)
  local o = options.check('nn.AdaptiveAvgPool2d', options.positional('nn.AdaptiveAvgPool2d', POSITIONAL, ...), OPTS)
  if o == nil or o.output_size == nil then options.fail('nn.AdaptiveAvgPool2d', 'expected output_size (a number or {h, w})') end
  options.pair('nn.AdaptiveAvgPool2d', 'output_size', o.output_size, 1)
  self.output_size = o.output_size
end

function AdaptiveAvgPool2d:forward(x) return F.adaptive_avg_pool2d(x, self.output_size) end

function AdaptiveAvgPool2d:extra_repr()
  local s = self.output_size
  if is_table(s) then return s[1] .. 'x' .. s[2] end
  return s .. 'x' .. s
end

return AdaptiveAvgPool2d
