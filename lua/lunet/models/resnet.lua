-- lunet.models' ResNets as torchvision 0.14's (same module tree, so the same
-- state_dict keys): resnet18/34/50/101/152, resnext50_32x4d,
-- resnext101_32x8d, resnext101_64x4d, wide_resnet50_2, wide_resnet101_2.
-- Options: num_classes = 1000, zero_init_residual = false, groups = 1,
-- width_per_group = 64, replace_stride_with_dilation = {false, false, false}.
-- model:sequential() is the same modules as one nn.Sequential (layer1..4
-- flattened into blocks by lunet.parallel's pipeline planner).
local nn = require 'lunet.nn'
local BatchNorm = require 'lunet.nn.BatchNorm'
local Conv2d = require 'lunet.nn.Conv2d'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'

local M = {}

local function conv3x3(cin, cout, stride, groups, dilation)
  return nn.Conv2d(cin, cout, 3, { stride = stride or 1, padding = dilation or 1, groups = groups or 1,
    dilation = dilation or 1, bias = false })
end
local function conv1x1(cin, cout, stride) return nn.Conv2d(cin, cout, 1, { stride = stride or 1, bias = false }) end

-- relu(bn(conv(x)) [+ residual]): the fused kernels when the batch norm runs
-- on running statistics (eval), else batch norm with relu as one op; free:
-- the intermediates freed once consumed (lunet.nn.eager)
local function cbr(conv, bn, x, residual, free)
  if Conv2d.fusable(conv, bn) then return conv:forward_fused(x, bn, residual, true) end
  local out = conv(x)
  local y
  if BatchNorm.fusable(bn) then
    if residual then y = bn:forward_add_relu(out, residual) else y = bn:forward_relu(out) end
  else
    local b = bn(out)
    local s = residual and b + residual or b
    y = s:relu()
    if free then
      eager.consumed(b, y)
      if residual then eager.consumed(s, y) end
    end
  end
  if free then eager.consumed(out, y) end
  return y
end

local BasicBlock = eager.own(nn.Module:extend('models.BasicBlock'))
BasicBlock.expansion = 1
M.BasicBlock = BasicBlock

-- BasicBlock(inplanes, planes, stride, downsample, groups, base_width, dilation)
function BasicBlock:__init(inplanes, planes, stride, downsample, groups, base_width, dilation)
  if (groups or 1) ~= 1 or (base_width or 64) ~= 64 then
    options.fail('models.BasicBlock', 'BasicBlock only supports groups = 1 and width_per_group = 64')
  end
  if (dilation or 1) > 1 then options.fail('models.BasicBlock', 'dilation > 1 not supported in BasicBlock') end
  self:add_module('conv1', conv3x3(inplanes, planes, stride))
  self:add_module('bn1', nn.BatchNorm2d(planes))
  self:add_module('relu', nn.ReLU(true))
  self:add_module('conv2', conv3x3(planes, planes))
  self:add_module('bn2', nn.BatchNorm2d(planes))
  if downsample then self:add_module('downsample', downsample) end
  self.stride_ = stride or 1
end

function BasicBlock:forward(x)
  local free = eager.frees(self)
  local out = cbr(self.conv1, self.bn1, x, nil, free)
  local downsample = self.downsample
  local identity = downsample and downsample(x) or x
  local y = cbr(self.conv2, self.bn2, out, identity, free)
  if free then eager.residual(out, identity, downsample, y, x) end
  return y
end

local Bottleneck = eager.own(nn.Module:extend('models.Bottleneck'))
Bottleneck.expansion = 4
M.Bottleneck = Bottleneck

function Bottleneck:__init(inplanes, planes, stride, downsample, groups, base_width, dilation)
  groups, base_width = groups or 1, base_width or 64
  local width = math.floor(planes * (base_width / 64)) * groups
  self:add_module('conv1', conv1x1(inplanes, width))
  self:add_module('bn1', nn.BatchNorm2d(width))
  self:add_module('conv2', conv3x3(width, width, stride, groups, dilation))
  self:add_module('bn2', nn.BatchNorm2d(width))
  self:add_module('conv3', conv1x1(width, planes * 4))
  self:add_module('bn3', nn.BatchNorm2d(planes * 4))
  self:add_module('relu', nn.ReLU(true))
  if downsample then self:add_module('downsample', downsample) end
  self.stride_ = stride or 1
end

function Bottleneck:forward(x)
  local free = eager.frees(self)
  local a = cbr(self.conv1, self.bn1, x, nil, free)
  local out = cbr(self.conv2, self.bn2, a, nil, free)
  if free then eager.consumed(a, out) end
  local downsample = self.downsample
  local identity = downsample and downsample(x) or x
  local y = cbr(self.conv3, self.bn3, out, identity, free)
  if free then eager.residual(out, identity, downsample, y, x) end
  return y
end

local ResNet = eager.own(nn.Module:extend('models.ResNet'))
M.ResNet = ResNet

local OPTS = common.opts { num_classes = 'number', zero_init_residual = 'boolean', groups = 'number',
  width_per_group = 'number', replace_stride_with_dilation = 'table' }

-- ResNet(block, layers, opts, fname)
function ResNet:__init(block, layers, opts, fname)
  fname = fname or 'models.ResNet'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  self.groups_ = common.positive_int(fname, 'groups', opts.groups, 1)
  self.base_width = common.positive_int(fname, 'width_per_group', opts.width_per_group, 64)
  local rs = opts.replace_stride_with_dilation or { false, false, false }
  if #rs ~= 3 or type(rs[1]) ~= 'boolean' or type(rs[2]) ~= 'boolean' or type(rs[3]) ~= 'boolean' then
    options.fail(fname, 'replace_stride_with_dilation should be nil or a list of 3 booleans')
  end
  self.inplanes, self.dilation = 64, 1
  self:add_module('conv1', nn.Conv2d(3, 64, 7, { stride = 2, padding = 3, bias = false }))
  self:add_module('bn1', nn.BatchNorm2d(64))
  self:add_module('relu', nn.ReLU(true))
  self:add_module('maxpool', nn.MaxPool2d(3, { stride = 2, padding = 1 }))
  self:add_module('layer1', self:_make_layer(block, 64, layers[1]))
  self:add_module('layer2', self:_make_layer(block, 128, layers[2], 2, rs[1]))
  self:add_module('layer3', self:_make_layer(block, 256, layers[3], 2, rs[2]))
  self:add_module('layer4', self:_make_layer(block, 512, layers[4], 2, rs[3]))
  self:add_module('avgpool', nn.AdaptiveAvgPool2d({ 1, 1 }))
  self:add_module('fc', nn.Linear(512 * block.expansion, num_classes))
  A.no_grad(function()
    for _, m in ipairs(self:modules()) do
      if getmetatable(m) == nn.Conv2d then
        nn.init.kaiming_normal_(m.weight, { mode = 'fan_out', nonlinearity = 'relu' })
      end
      -- (BatchNorm2d starts at weight 1, bias 0 already)
    end
    if opts.zero_init_residual then
      for _, m in ipairs(self:modules()) do
        if getmetatable(m) == Bottleneck then m.bn3.weight:zero_()
        elseif getmetatable(m) == BasicBlock then m.bn2.weight:zero_() end
      end
    end
  end)
end

function ResNet:_make_layer(block, planes, blocks, stride, dilate)
  stride = stride or 1
  local previous_dilation = self.dilation
  if dilate then self.dilation, stride = self.dilation * stride, 1 end
  local downsample
  if stride ~= 1 or self.inplanes ~= planes * block.expansion then
    downsample = nn.Sequential { conv1x1(self.inplanes, planes * block.expansion, stride),
      nn.BatchNorm2d(planes * block.expansion) }
  end
  local seq = nn.Sequential()
  seq:add(block(self.inplanes, planes, stride, downsample, self.groups_, self.base_width, previous_dilation))
  self.inplanes = planes * block.expansion
  for _ = 2, blocks do
    seq:add(block(self.inplanes, planes, 1, nil, self.groups_, self.base_width, self.dilation))
  end
  return seq
end

local STAGES = { 'maxpool', 'layer1', 'layer2', 'layer3', 'layer4', 'avgpool' }
function ResNet:forward(x)
  local free = eager.frees(self)
  local h = cbr(self.conv1, self.bn1, x, nil, free)
  for i = 1, #STAGES do
    local nxt = self[STAGES[i]](h)
    if free then eager.consumed(h, nxt) end
    h = nxt
  end
  return self.fc(h:flatten(2))
end

-- the same modules (shared, not copied) as one nn.Sequential with the same
-- state_dict keys: what lunet.parallel.Pipeline cuts at block boundaries
function ResNet:sequential()
  local seq = nn.Sequential()
  for _, n in ipairs({ 'conv1', 'bn1', 'relu', 'maxpool', 'layer1', 'layer2', 'layer3', 'layer4', 'avgpool' }) do
    seq:add(self[n], n)
  end
  seq:add(nn.Flatten(), 'flatten')
  return seq:add(self.fc, 'fc')
end

-- name -> block, layers, the options it fixes
local ARCH = {
  resnet18 = { BasicBlock, { 2, 2, 2, 2 } }, resnet34 = { BasicBlock, { 3, 4, 6, 3 } },
  resnet50 = { Bottleneck, { 3, 4, 6, 3 } }, resnet101 = { Bottleneck, { 3, 4, 23, 3 } },
  resnet152 = { Bottleneck, { 3, 8, 36, 3 } },
  resnext50_32x4d = { Bottleneck, { 3, 4, 6, 3 }, { groups = 32, width_per_group = 4 } },
  resnext101_32x8d = { Bottleneck, { 3, 4, 23, 3 }, { groups = 32, width_per_group = 8 } },
  resnext101_64x4d = { Bottleneck, { 3, 4, 23, 3 }, { groups = 64, width_per_group = 4 } },
  wide_resnet50_2 = { Bottleneck, { 3, 4, 6, 3 }, { width_per_group = 128 } },
  wide_resnet101_2 = { Bottleneck, { 3, 4, 23, 3 }, { width_per_group = 128 } },
}

for name, a in pairs(ARCH) do
  M[name] = function(opts, ...)
    local fname = 'models.' .. name
    opts = common.check(fname, opts, OPTS, select('#', ...))
    opts = common.fix(fname, opts, a[3])
    return ResNet(a[1], a[2], opts, fname)
  end
end

return M
