-- nn.BasicBlock(in_planes, planes[, stride = 1]): the ResNet basic block,
-- written by composing module outputs:
--   out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
-- shortcut is the identity, or a 1x1 strided conv + batch norm when the
-- shape changes.
local Module = require 'lunet.nn.Module'
local Conv2d = require 'lunet.nn.Conv2d'
local BatchNorm2d = require 'lunet.nn.BatchNorm2d'
local Sequential = require 'lunet.nn.Sequential'

local BasicBlock = Module:extend('nn.BasicBlock')
BasicBlock.expansion = 1

function BasicBlock:__init(in_planes, planes, stride, opts)
  stride = stride or 1
  opts = opts or {}
  self.in_planes, self.planes, self.stride_ = in_planes, planes, stride
  local o = { dtype = opts.dtype, device = opts.device }
  self:add_module('conv1', Conv2d(in_planes, planes, 3, { stride = stride, padding = 1, bias = false, dtype = o.dtype, device = o.device }))
  self:add_module('bn1', BatchNorm2d(planes, o))
  self:add_module('conv2', Conv2d(planes, planes, 3, { padding = 1, bias = false, dtype = o.dtype, device = o.device }))
  self:add_module('bn2', BatchNorm2d(planes, o))
  if stride ~= 1 or in_planes ~= planes then
    self:add_module('shortcut', Sequential {
      Conv2d(in_planes, planes, 1, { stride = stride, bias = false, dtype = o.dtype, device = o.device }),
      BatchNorm2d(planes, o),
    })
  end
end

function BasicBlock:forward(x)
  local conv1, bn1, conv2, bn2 = self.conv1, self.bn1, self.conv2, self.bn2
  if Conv2d.fusable(conv1, bn1) and Conv2d.fusable(conv2, bn2) then
    -- eval: two fused kernels (batch norms folded, relu and the residual
    -- add as post-ops); the shortcut's conv + bn fuse in its Sequential
    local out = conv1:forward_fused(x, bn1, nil, true)
    local residual = self.shortcut and self.shortcut(x) or x
    return conv2:forward_fused(out, bn2, residual, true)
  end
  local out = self.bn1(self.conv1(x)):relu()
  out = self.bn2(self.conv2(out))
  local residual = self.shortcut and self.shortcut(x) or x
  return (out + residual):relu()
end

function BasicBlock:extra_repr()
  return ('%d -> %d, stride %d'):format(self.in_planes, self.planes, self.stride_)
end

return BasicBlock
