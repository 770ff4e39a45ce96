-- nn.AdaptiveAvgPool1d(output_size): a number or {n} (or {output_size = ...}); input (N, C, L) or (C, L)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local AdaptiveAvgPool1d = Module:extend('nn.AdaptiveAvgPool1d')

local OPTS, POSITIONAL = { output_size = 'number|table' }, { 'output_size' }

function AdaptiveAvgPool1d:__init(...)
  local name = 'nn.AdaptiveAvgPool1d'
  local o = options.check(name, options.positional(name, POSITIONAL, ...), OPTS)
  if o == nil or o.output_size == nil then options.fail(name, 'expected output_size (a number or {n})') end
  self.output_size = options.single(name, 'output_size', o.output_size, 1)
end

function AdaptiveAvgPool1d:forward(x) return F.adaptive_avg_pool1d(x, self.output_size) end

function AdaptiveAvgPool1d:extra_repr() return tostring(self.output_size) end

return AdaptiveAvgPool1d
