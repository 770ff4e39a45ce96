-- nn.UpsamplingBilinear2d{size = {H, W}} or nn.UpsamplingBilinear2d{scale_factor = s (or {sh, sw})}:
-- nn.Upsample with mode 'bilinear' and align_corners = true, as PyTorch's
-- (which fixes both, so neither is an option here).
local Upsample = require 'lunet.nn.Upsample'

local UpsamplingBilinear2d = Upsample:extend('nn.UpsamplingBilinear2d')

function UpsamplingBilinear2d:__init(opts) Upsample._fixed(self, opts, 'bilinear', true) end

return UpsamplingBilinear2d
