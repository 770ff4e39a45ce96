-- nn.PixelShuffle(upscale_factor) or nn.PixelShuffle{upscale_factor = r}:
-- (*, C*r^2, H, W) -> (*, C, H*r, W*r), as torch's
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local PixelShuffle = Module:extend('nn.PixelShuffle')

local OPTS, POSITIONAL = { upscale_factor = 'number' }, { 'upscale_factor' }

function PixelShuffle:__init(...)
  local o = options.check('nn.PixelShuffle', options.positional('nn.PixelShuffle', POSITIONAL, ...), OPTS) or {}
  local r = o.upscale_factor
  if type(r) ~= 'number' or r % 1 ~= 0 or r < 1 or r >= 2 ^ 31 then
    options.fail('nn.PixelShuffle', 'upscale_factor must be an integer >= 1, got ' .. tostring(r))
  end
  self.upscale_factor = r
end

function PixelShuffle:forward(x) return F.pixel_shuffle(x, self.upscale_factor) end

function PixelShuffle:extra_repr() return 'upscale_factor ' .. self.upscale_factor end

return PixelShuffle
