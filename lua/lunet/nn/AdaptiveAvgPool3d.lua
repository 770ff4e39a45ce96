-- nn.AdaptiveAvgPool3d(output_size): a number or {d, h, w} (an entry false
-- keeps the input's size, PyTorch's None), or {output_size = ...}; input
-- (N, C, D, H, W) or (C, D, H, W)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local is_table = require('lunet.core').is_table

local AdaptiveAvgPool3d = Module:extend('nn.AdaptiveAvgPool3d')

local OPTS, POSITIONAL = { output_size = 'number|table' }, { 'output_size' }

function AdaptiveAvgPool3d:__init(...)
  local name = 'nn.AdaptiveAvgPool3d'
  local o = options.check(name, options.positional(name, POSITIONAL, ...), OPTS)
  if o == nil or o.output_size == nil then options.fail(name, 'expected output_size (a number or {d, h, w})') end
  local v = o.output_size
  -- (checked here with false read as 1: the input's size is known at forward)
  local t = is_table(v) and #v == 3 and { v[1] or 1, v[2] or 1, v[3] or 1 } or v
  options.triple(name, 'output_size', t, 1)
  self.output_size = is_table(v) and { v[1], v[2], v[3] } or { v, v, v }
end

function AdaptiveAvgPool3d:forward(x) return F.adaptive_avg_pool3d(x, self.output_size) end

function AdaptiveAvgPool3d:extra_repr()
  local v = self.output_size
  if v[1] == v[2] and v[2] == v[3] then return tostring(v[1]) end
  return ('%s, %s, %s'):format(tostring(v[1] or 'None'), tostring(v[2] or 'None'), tostring(v[3] or 'None'))
end

return AdaptiveAvgPool3d
