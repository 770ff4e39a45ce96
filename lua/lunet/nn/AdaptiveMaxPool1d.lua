-- nn.AdaptiveMaxPool1d(output_size[, return_indices = false]) or
-- nn.AdaptiveMaxPool1d{output_size, return_indices}: output_size a number or
-- {n}; input (N, C, L) or (C, L); with return_indices the forward returns the
-- output and 1-based int64 positions along L.
local Module = require 'lunet.nn.Module'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local AdaptiveMaxPool1d = Module:extend('nn.AdaptiveMaxPool1d')

local OPTS, POSITIONAL = { output_size = 'number|table', return_indices = 'boolean' }, { 'return_indices' }

function AdaptiveMaxPool1d:__init(size, ...)
  local name = 'nn.AdaptiveMaxPool1d'
  local o
  if is_table(size) and size[1] == nil then   -- the options form
    if select('#', ...) > 0 then options.fail(name, 'the options table must come last') end
    o, size = options.check(name, size, OPTS), size.output_size
  else
    o = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
    if o.output_size ~= nil then options.fail(name, "'output_size' given both by position and in the options") end
  end
  if size == nil then options.fail(name, 'expected output_size (a number or {n})') end
  self.output_size = options.single(name, 'output_size', size, 1)
  self.return_indices = o.return_indices == true
end

function AdaptiveMaxPool1d:forward(x) return F.adaptive_max_pool1d(x, self.output_size, self.return_indices) end

function AdaptiveMaxPool1d:extra_repr()
  return tostring(self.output_size) .. (self.return_indices and ', return_indices' or '')
end

return AdaptiveMaxPool1d
