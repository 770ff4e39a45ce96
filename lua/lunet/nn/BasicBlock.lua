-- nn.BasicBlock(in_planes, planes[, stride = 1]): the ResNet basic block,
-- written by composing module outputs:
--   out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
-- shortcut is the identity, or a 1x1 strided conv + batch norm when the
-- shape changes. In training relu(bn1(.)) runs as one op (F.batch_norm_relu),
-- and so does relu(bn2(.) + shortcut) (F.batch_norm_add_relu).
local Module = require 'lunet.nn.Module'
local plain = require('lunet.nn.hooks').plain   -- (no forward of its own, no hooks: fusable)
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local Conv2d = require 'lunet.nn.Conv2d'
local BatchNorm2d = require 'lunet.nn.BatchNorm2d'
local BatchNorm = require 'lunet.nn.BatchNorm'
local Sequential = require 'lunet.nn.Sequential'
local F = require 'lunet.nn.functional'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local eager = require 'lunet.nn.eager'

local BasicBlock = Module:extend('nn.BasicBlock')
BasicBlock.expansion = 1

local OPTS = { dtype = true, device = true }

function BasicBlock:__init(in_planes, planes, stride, opts)
  if is_table(stride) and opts == nil and stride[1] == nil then stride, opts = nil, stride end
  if type(in_planes) ~= 'number' or type(planes) ~= 'number' or (stride ~= nil and type(stride) ~= 'number') then
    options.fail('nn.BasicBlock', 'expected (in_planes, planes[, stride][, {dtype, device}])')
  end
  stride = stride or 1
  opts = options.check('nn.BasicBlock', opts, OPTS) or {}
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

local needs = A.needs
local function grad_needed(x, ...)
  if not A.is_grad_enabled() then return false end
  if needs(x) then return true end
  for i = 1, select('#', ...) do
    local m = select(i, ...)
    if m and (needs(m.weight) or needs(m.bias)) then return true end
  end
  return false
end

local function numeric_padding(conv) return type(conv.padding) ~= 'string' end

-- When blk (an nn.BasicBlock, not a subclass or one with its own forward) can
-- run its eval forward as one fused call on x: conv1, bn1, conv2, bn2, sconv,
-- sbn (the last two nil for the identity shortcut); else nil. Needs eval
-- mode (batch norms on running statistics), numeric padding and no
-- gradient to record.
function BasicBlock.eval_parts(blk, x)
  if getmetatable(blk) ~= BasicBlock or not plain(blk) then return nil end
  local conv1, bn1, conv2, bn2 = blk.conv1, blk.bn1, blk.conv2, blk.bn2
  if not (Conv2d.fusable(conv1, bn1) and Conv2d.fusable(conv2, bn2) and numeric_padding(conv1)
      and numeric_padding(conv2)) then
    return nil
  end
  local sc, sconv, sbn = blk.shortcut, nil, nil
  if sc then
    sconv, sbn = sc[1], sc[2]
    if not (getmetatable(sc) == Sequential and sc:size() == 2 and plain(sc)
        and Conv2d.fusable(sconv, sbn) and numeric_padding(sconv)) then
      return nil
    end
  end
  if grad_needed(x, conv1, bn1, conv2, bn2, sconv, sbn) then return nil end
  return conv1, bn1, conv2, bn2, sconv, sbn
end

function BasicBlock:forward(x)
  local conv1, bn1, conv2, bn2, sconv, sbn = BasicBlock.eval_parts(self, x)
  -- eval mode, no gradient: the whole block in one call (batch norms folded
  -- into the convolutions, relu and the residual add as post-ops,
  -- activations kept in oneDNN's blocked layout inside it)
  if conv1 then return F.basic_block_eval(x, conv1, bn1, conv2, bn2, sconv, sbn) end
  conv1, bn1, conv2, bn2 = self.conv1, self.bn1, self.conv2, self.bn2
  -- (the intermediates freed once consumed: lunet.nn.eager)
  local free = eager.frees(self)
  local shortcut = self.shortcut
  if Conv2d.fusable(conv1, bn1) and Conv2d.fusable(conv2, bn2) then
    -- eval with gradients: the same fusion as differentiable compositions
    local out = conv1:forward_fused(x, bn1, nil, true)
    local residual = shortcut and shortcut(x) or x
    local y = conv2:forward_fused(out, bn2, residual, true)
    if free then eager.residual(out, residual, shortcut, y, x) end
    return y
  end
  local c1 = self.conv1(x)
  local a
  if BatchNorm.fusable(bn1) then
    a = bn1:forward_relu(c1)
  else
    local b = bn1(c1)
    a = b:relu()
    if free then eager.consumed(b, a) end
  end
  if free then eager.consumed(c1, a) end
  local out = self.conv2(a)
  if free then eager.consumed(a, out) end
  local residual = shortcut and shortcut(x) or x
  local y
  if BatchNorm.fusable(bn2) then
    y = bn2:forward_add_relu(out, residual)
  else
    local b = bn2(out)
    local s = b + residual
    y = s:relu()
    if free then eager.consumed(b, y); eager.consumed(s, y) end
  end
  if free then eager.residual(out, residual, shortcut, y, x) end
  return y
end

function BasicBlock:extra_repr()
  return ('%d -> %d, stride %d'):format(self.in_planes, self.planes, self.stride_)
end

return BasicBlock
