-- nn.ZeroPad2d(padding): pads (N, C, H, W) or (C, H, W) input with zeros;
-- padding is a number (every side) or {left, right, top, bottom}
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local core = require 'lunet.core'

local ZeroPad2d = Module:extend('nn.ZeroPad2d')

function ZeroPad2d:__init(padding)
  local p = padding
  if type(p) == 'number' then p = { p, p, p, p } end
  if not core.is_table(p) or #p ~= 4 then
    options.fail('nn.ZeroPad2d', 'padding must be a number or {left, right, top, bottom}, got ' ..
      (core.is_table(p) and #p .. ' values' or core.typename(p)))
  end
  for i = 1, 4 do
    local v = p[i]
    if type(v) ~= 'number' or v % 1 ~= 0 or v < 0 or v > 2 ^ 31 then
      options.fail('nn.ZeroPad2d', ('padding must be integers >= 0, got %s'):format(tostring(v)))
    end
  end
  self.padding = { p[1], p[2], p[3], p[4] }
end

function ZeroPad2d:forward(x)
  local T = require 'lunet.tensor'
  if T.is_tensor(x) and x:dim() == 3 then return F.pad(x:unsqueeze(1), self.padding):squeeze(1) end
  if not T.is_tensor(x) or x:dim() ~= 4 then
    options.raise('nn.ZeroPad2d: input must be (N, C, H, W) or (C, H, W), got ' ..
      (T.is_tensor(x) and x:dim() .. '-d' or core.typename(x)))
  end
  return F.pad(x, self.padding)
end

function ZeroPad2d:extra_repr() return '{' .. table.concat(self.padding, ', ') .. '}' end

return ZeroPad2d
