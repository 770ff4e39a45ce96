-- nn.AdaptiveMaxPool3d(output_size[, {return_indices = false}]), PyTorch's
-- positional (output_size, return_indices) or {output_size = ..., return_indices = ...}:
-- output_size a number or {d, h, w}, an entry false keeping the input's size
-- (PyTorch's None). Input (N, C, D, H, W) or (C, D, H, W); with return_indices
-- the forward returns the output and 1-based int64 positions d*H*W + h*W + w + 1
-- within each volume (torch's plus one).
local Module = require 'lunet.nn.Module'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local NAME = 'nn.AdaptiveMaxPool3d'
local AdaptiveMaxPool3d = Module:extend(NAME)

local OPTS, POSITIONAL = { output_size = 'number|table', return_indices = 'boolean' }, { 'return_indices' }

-- a number >= 1, or false (the input's size)
local function entry(v) return v == false or type(v) == 'number' and v % 1 == 0 and v >= 1 and v < 2 ^ 31 end

function AdaptiveMaxPool3d:__init(size, ...)
  local o
  if is_table(size) and size[1] == nil and size[2] == nil and size[3] == nil then   -- the options form
    if select('#', ...) > 0 then options.fail(NAME, 'the options table must come last') end
    o, size = options.check(NAME, size, OPTS), size.output_size
  else
    o = options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {}
    if o.output_size ~= nil then options.fail(NAME, "'output_size' given both by position and in the options") end
  end
  local ok = type(size) == 'number' and entry(size)
  if is_table(size) then
    ok = entry(size[1]) and entry(size[2]) and entry(size[3])
    for k in pairs(size) do if k ~= 1 and k ~= 2 and k ~= 3 then ok = false end end
  end
  if not ok then
    options.fail(NAME, ("output_size must be an integer >= 1 or {d, h, w} of them (false: the input's size), got %s")
      :format(is_table(size) and '{' .. tostring(size[1]) .. ', ' .. tostring(size[2]) .. ', ' .. tostring(size[3])
        .. '}' or tostring(size)))
  end
  self.output_size = size
  self.return_indices = o.return_indices == true
end

function AdaptiveMaxPool3d:forward(x) return F.adaptive_max_pool3d(x, self.output_size, self.return_indices) end

function AdaptiveMaxPool3d:extra_repr()
  local s = self.output_size
  local function e(v) return v and tostring(v) or 'None' end
  local r = is_table(s) and e(s[1]) .. 'x' .. e(s[2]) .. 'x' .. e(s[3]) or s .. 'x' .. s .. 'x' .. s
  if self.return_indices then r = r .. ', return_indices' end
  return r
end

return AdaptiveMaxPool3d
