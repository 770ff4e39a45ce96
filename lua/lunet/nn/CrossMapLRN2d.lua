-- nn.CrossMapLRN2d(size[, alpha = 1e-4[, beta = 0.75[, k = 1]]]) or (size, {alpha, beta, k}):
-- torch's legacy cross-channel LRN of (N, C, H, W) input, x * (k + alpha/size *
-- the sum of x^2 over the channels c-h..c+h)^-beta with h = floor((size-1)/2).
-- Unlike nn.LocalResponseNorm: an even size sums 2h+1 channels and still divides
-- by size, and, as torch 1.13 (its running sum, ported from Torch7 with an
-- off-by-one), channel 1 stays in the sum of every channel past h + 1. Its
-- gradient is this formula's (torch 1.13's hand-written backward is that of
-- the intended window without channel 1, not of its own forward).
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local factory = require 'lunet.factory'
local T = require 'lunet.tensor'
local typename = require('lunet.core').typename
local LocalResponseNorm = require 'lunet.nn.LocalResponseNorm'

local CrossMapLRN2d = Module:extend('nn.CrossMapLRN2d')

-- (nn.LocalResponseNorm's arguments, checked as there)
function CrossMapLRN2d:__init(size, ...) LocalResponseNorm._setup(self, 'nn.CrossMapLRN2d', size, ...) end

function CrossMapLRN2d:forward(x)
  if not T.is_tensor(x) then options.raise('nn.CrossMapLRN2d: input must be a tensor, got ' .. typename(x)) end
  if x:dim() ~= 4 then
    options.raise(('nn.CrossMapLRN2d: input must be 4-d (N, C, H, W), got %d-d {%s}'):format(x:dim(),
      table.concat(x:size(), ',')))
  end
  if not x:is_floating_point() then options.raise('nn.CrossMapLRN2d: input must be floating point, got ' .. x.dtype) end
  if x:numel() == 0 then return x:clone() end
  local s, h = x:size(), math.floor((self.size - 1) / 2)
  local sq = x * x
  -- the window sum: channels as the rows of one plane, a (2h+1) x 1 average pool times its area
  local sum = F.avg_pool2d(F.pad(sq:reshape(s[1], 1, s[2], s[3] * s[4]), { 0, 0, h, h }), { 2 * h + 1, 1 }, 1)
    :reshape(s) * (2 * h + 1)
  if s[2] > h + 1 then
    local past = factory.arange(1, s[2] + 1, { dtype = x.dtype, device = x.device }):gt(h + 1):to(x.dtype)
    sum = sum + sq:narrow(2, 1, 1) * past:view(1, s[2], 1, 1)
  end
  return x * (sum * (self.alpha / self.size) + self.k):pow(-self.beta)
end

CrossMapLRN2d.extra_repr = LocalResponseNorm.extra_repr

return CrossMapLRN2d
