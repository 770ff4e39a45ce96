-- nn.Unfold(kernel_size[, {dilation = 1, padding = 0, stride = 1}]), or torch's
-- positional nn.Unfold(kernel_size, dilation, padding, stride): the sliding
-- blocks of (N, C, H, W) input as columns (N, C*kh*kw, L), as torch's
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local core = require 'lunet.core'

local Unfold = Module:extend('nn.Unfold')

local OPTS = { dilation = 'number|table', padding = 'number|table', stride = 'number|table' }
local POSITIONAL = { 'dilation', 'padding', 'stride' }

-- kernel_size and the options checked once, here, for nn.Unfold and nn.Fold
function Unfold.geometry(name, k, ...)
  if type(k) ~= 'number' and not core.is_table(k) then
    options.fail(name, 'expected kernel_size (a number or {h, w}), got ' .. core.typename(k))
  end
  local o = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
  options.pair(name, 'kernel_size', k, 1)
  options.pair(name, 'dilation', o.dilation, 1)
  options.pair(name, 'padding', o.padding, 0)
  options.pair(name, 'stride', o.stride, 1)
  return { dilation = o.dilation, padding = o.padding, stride = o.stride }
end

-- '2' or '{2, 3}', and the options that are not their defaults
function Unfold.geometry_repr(k, o)
  local function s(v) return core.is_table(v) and '{' .. v[1] .. ', ' .. v[2] .. '}' or tostring(v) end
  local r = s(k)
  if o.dilation and o.dilation ~= 1 then r = r .. ', dilation ' .. s(o.dilation) end
  if o.padding and o.padding ~= 0 then r = r .. ', padding ' .. s(o.padding) end
  if o.stride and o.stride ~= 1 then r = r .. ', stride ' .. s(o.stride) end
  return r
end

function Unfold:__init(k, ...)
  self.opts = Unfold.geometry('nn.Unfold', k, ...)
  self.kernel_size = k
end

function Unfold:forward(x) return F.unfold(x, self.kernel_size, self.opts) end

function Unfold:extra_repr() return Unfold.geometry_repr(self.kernel_size, self.opts) end

return Unfold
