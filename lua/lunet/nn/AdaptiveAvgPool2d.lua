-- nn.AdaptiveAvgPool2d(output_size): a number or {oh, ow}
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local AdaptiveAvgPool2d = Module:extend('nn.AdaptiveAvgPool2d')

function AdaptiveAvgPool2d:__init(size)
  if size == nil then error('nn.AdaptiveAvgPool2d: expected output_size', 3) end
  self.output_size = size
end

function AdaptiveAvgPool2d:forward(x) return F.adaptive_avg_pool2d(x, self.output_size) end

function AdaptiveAvgPool2d:extra_repr()
  local s = self.output_size
  if type(s) == 'table' then return s[1] .. 'x' .. s[2] end
  return s .. 'x' .. s
end

return AdaptiveAvgPool2d
