-- nn.Upsample{scale_factor = s (or {sh, sw}), mode = 'nearest'} or
-- nn.Upsample{size = {H, W}}: nearest-neighbour resizing of (N, C, H, W)
-- input, as PyTorch's (the source of each output pixel computed as torch
-- 1.13's upsample_nearest2d). Only mode 'nearest'.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local is_table = require('lunet.core').is_table

local Upsample = Module:extend('nn.Upsample')

function Upsample:__init(opts)
  if not is_table(opts) then
    options.fail('nn.Upsample', 'expected {size = {H, W}} or {scale_factor = s[, mode = \'nearest\']}, got ' ..
      require('lunet.core').typename(opts))
  end
  self.geometry = F._internal.interp_geometry('nn.Upsample', opts)
  self.mode = 'nearest'
  self.size, self.scale_factor = opts.size, opts.scale_factor
end

function Upsample:forward(x)
  if not require('lunet.tensor').is_tensor(x) or x:dim() ~= 4 then
    options.raise('nn.Upsample: input must be a 4-d tensor (N, C, H, W), got ' ..
      (require('lunet.tensor').is_tensor(x) and x:dim() .. '-d' or require('lunet.core').typename(x)))
  end
  return F._internal.interpolate(x, self.geometry)
end

function Upsample:extra_repr()
  local g = self.geometry
  if g.size then return ('size {%d, %d}, nearest'):format(g.size[1], g.size[2]) end
  return ('scale_factor {%s, %s}, nearest'):format(tostring(g.scale_factor[1]), tostring(g.scale_factor[2]))
end

return Upsample
