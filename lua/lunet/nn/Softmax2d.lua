-- nn.Softmax2d(): softmax over the channels of (N, C, H, W) or (C, H, W)
-- input (dim -3) at each location, as torch's
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local typename = require('lunet.core').typename

local Softmax2d = Module:extend('nn.Softmax2d')

function Softmax2d:__init(...)
  if select('#', ...) > 0 then options.fail('nn.Softmax2d', 'takes no arguments') end
end

function Softmax2d:forward(x)
  if not T.is_tensor(x) then options.raise('nn.Softmax2d: input must be a tensor, got ' .. typename(x)) end
  local d = x:dim()
  if d ~= 3 and d ~= 4 then
    options.raise(('nn.Softmax2d: input must be 3-d (C, H, W) or 4-d (N, C, H, W), got %d-d {%s}'):format(d,
      table.concat(x:size(), ',')))
  end
  return F.softmax(x, -3)
end

return Softmax2d
