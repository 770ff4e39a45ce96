-- nn.UpsamplingNearest2d{size = {H, W}} or nn.UpsamplingNearest2d{scale_factor = s (or {sh, sw})}:
-- nn.Upsample with mode 'nearest' on (N, C, H, W) input, as PyTorch's (which
-- fixes the mode, so it is not an option here).
local Upsample = require 'lunet.nn.Upsample'
local options = require 'lunet.options'

local UpsamplingNearest2d = Upsample:extend('nn.UpsamplingNearest2d')

function UpsamplingNearest2d:__init(opts) Upsample._fixed(self, opts, 'nearest') end

function UpsamplingNearest2d:forward(x)
  if require('lunet.tensor').is_tensor(x) and x:dim() ~= 4 then
    options.raise(('%s: input must be 4-d (N, C, H, W), got %d-d'):format(self.__name, x:dim()))
  end
  return Upsample.forward(self, x)
end

return UpsamplingNearest2d
