-- nn.Upsample{scale_factor = s (or {sh, sw})[, mode = 'nearest' | 'bilinear'][, align_corners = false]}
-- or nn.Upsample{size = {H, W}, ...}: resizing of (N, C, H, W) input, as
-- PyTorch's (the source of each output pixel computed as torch 1.13's
-- upsample_nearest2d and upsample_bilinear2d); see F.interpolate.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local is_table = require('lunet.core').is_table

local Upsample = Module:extend('nn.Upsample')

function Upsample:__init(opts)
  if not is_table(opts) then
    options.fail(self.__name, 'expected {size = {H, W}} or {scale_factor = s[, mode = \'nearest\']}, got ' ..
      require('lunet.core').typename(opts))
  end
  self.geometry = F._internal.interp_geometry(self.__name, opts)
  self.mode, self.align_corners = self.geometry.mode, self.geometry.align_corners
  self.size, self.scale_factor = opts.size, opts.scale_factor
end

function Upsample:forward(x)
  if not require('lunet.tensor').is_tensor(x) or x:dim() ~= 4 then
    options.raise(self.__name .. ': input must be a 4-d tensor (N, C, H, W), got ' ..
      (require('lunet.tensor').is_tensor(x) and x:dim() .. '-d' or require('lunet.core').typename(x)))
  end
  return F._internal.interpolate(x, self.geometry)
end

function Upsample:extra_repr()
  local g = self.geometry
  local s = g.size and ('size {%d, %d}'):format(g.size[1], g.size[2])
    or ('scale_factor {%s, %s}'):format(tostring(g.scale_factor[1]), tostring(g.scale_factor[2]))
  return s .. ', ' .. g.mode .. (g.align_corners and ', align_corners' or '')
end

return Upsample
