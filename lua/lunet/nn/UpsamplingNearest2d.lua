-- nn.UpsamplingNearest2d{size = {H, W}} or nn.UpsamplingNearest2d{scale_factor = s (or {sh, sw})}:
-- nn.Upsample with mode 'nearest' on (N, C, H, W) input, as PyTorch's (which
-- fixes the mode, so it is not an option here).
local Upsample = require 'lunet.nn.Upsample'
local options = require 'lunet.options'
local core = require 'lunet.core'

local UpsamplingNearest2d = Upsample:extend('nn.UpsamplingNearest2d')

local OPTS = { size = 'number|table', scale_factor = 'number|table' }

function UpsamplingNearest2d:__init(opts)
  if not core.is_table(opts) then
    options.fail(self.__name, 'expected {size = {H, W}} or {scale_factor = s}, got ' .. core.typename(opts))
  end
  options.check(self.__name, opts, OPTS)
  Upsample.__init(self, { size = opts.size, scale_factor = opts.scale_factor, mode = 'nearest' })
end

function UpsamplingNearest2d:forward(x)
  if require('lunet.tensor').is_tensor(x) and x:dim() ~= 4 then
    options.raise(('%s: input must be 4-d (N, C, H, W), got %d-d'):format(self.__name, x:dim()))
  end
  return Upsample.forward(self, x)
end

return UpsamplingNearest2d
