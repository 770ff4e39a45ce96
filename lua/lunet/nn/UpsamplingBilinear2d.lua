-- nn.UpsamplingBilinear2d{size = {H, W}} or nn.UpsamplingBilinear2d{scale_factor = s (or {sh, sw})}:
-- nn.Upsample with mode 'bilinear' and align_corners = true, as PyTorch's
-- (which fixes both, so neither is an option here).
local Upsample = require 'lunet.nn.Upsample'
local options = require 'lunet.options'
local core = require 'lunet.core'

local UpsamplingBilinear2d = Upsample:extend('nn.UpsamplingBilinear2d')

local OPTS = { size = 'number|table', scale_factor = 'number|table' }

function UpsamplingBilinear2d:__init(opts)
  if not core.is_table(opts) then
    options.fail(self.__name, 'expected {size = {H, W}} or {scale_factor = s}, got ' .. core.typename(opts))
  end
  options.check(self.__name, opts, OPTS)
  Upsample.__init(self, { size = opts.size, scale_factor = opts.scale_factor, mode = 'bilinear', align_corners = true })
end

return UpsamplingBilinear2d
