-- nn.PixelUnshuffle(downscale_factor) or nn.PixelUnshuffle{downscale_factor = r}:
-- (*, C, H*r, W*r) -> (*, C*r^2, H, W), PixelShuffle's inverse, as torch's
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local PixelUnshuffle = Module:extend('nn.PixelUnshuffle')

local OPTS, POSITIONAL = { downscale_factor = 'number' }, { 'downscale_factor' }

function PixelUnshuffle:__init(...)
  local o = options.check('nn.PixelUnshuffle', options.positional('nn.PixelUnshuffle', POSITIONAL, ...), OPTS) or {}
  local r = o.downscale_factor
  if type(r) ~= 'number' or r % 1 ~= 0 or r < 1 or r >= 2 ^ 31 then
    options.fail('nn.PixelUnshuffle', 'downscale_factor must be an integer >= 1, got ' .. tostring(r))
  end
  self.downscale_factor = r
end

function PixelUnshuffle:forward(x) return F.pixel_unshuffle(x, self.downscale_factor) end

function PixelUnshuffle:extra_repr() return 'downscale_factor ' .. self.downscale_factor end

return PixelUnshuffle
