-- nn.Upsample{scale_factor = s (or one per spatial dim)[, mode = 'nearest'][, align_corners = false]}
-- or nn.Upsample{size = n or {...}, ...}: resizing of (N, C, L), (N, C, H, W)
-- or (N, C, D, H, W) input as PyTorch's, in any of F.interpolate's modes
-- ('nearest', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area', 'nearest-exact').
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local is_table = require('lunet.core').is_table

local Upsample = Module:extend('nn.Upsample')

local OPTS = { size = 'number|table', scale_factor = 'number|table', mode = 'string',
  align_corners = 'boolean', recompute_scale_factor = 'boolean' }

function Upsample:__init(opts)
  if not is_table(opts) then
    options.fail(self.__name, 'expected {size = {H, W}} or {scale_factor = s[, mode = \'nearest\']}, got ' ..
      require('lunet.core').typename(opts))
  end
  options.check(self.__name, opts, OPTS)   -- (F.interpolate's, less antialias, as torch's nn.Upsample)
  self.geometry = F._internal.interp_geometry(self.__name, opts)
  self.mode, self.align_corners = self.geometry.mode, self.geometry.align_corners
  self.size, self.scale_factor = opts.size, opts.scale_factor
end

-- the constructor of the subclasses that fix the mode, as PyTorch's
-- (nn.UpsamplingNearest2d, nn.UpsamplingBilinear2d): opts take size or
-- scale_factor only
local FIXED_OPTS = { size = 'number|table', scale_factor = 'number|table' }
function Upsample._fixed(self, opts, mode, align_corners)
  if not is_table(opts) then
    options.fail(self.__name, 'expected {size = {H, W}} or {scale_factor = s}, got ' .. require('lunet.core').typename(opts))
  end
  options.check(self.__name, opts, FIXED_OPTS)
  Upsample.__init(self, { size = opts.size, scale_factor = opts.scale_factor, mode = mode, align_corners = align_corners })
end

function Upsample:forward(x)
  return F._internal.interpolate(x, self.geometry, self.__name)
end

function Upsample:extra_repr()
  local g = self.geometry
  local function show(v) return type(v) == 'number' and tostring(v) or '{' .. table.concat(v, ', ') .. '}' end
  local s = g.size and 'size ' .. show(g.size) or 'scale_factor ' .. show(g.scale_factor)
  return s .. ', ' .. g.mode .. (g.align_corners and ', align_corners' or '')
end

return Upsample
