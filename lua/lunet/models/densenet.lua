-- lunet.models' DenseNets as torchvision 0.14's: densenet121, densenet161,
-- densenet169, densenet201 (features with denseblockN / transitionN, norm5;
-- classifier; same state_dict keys). Options: num_classes = 1000,
-- bn_size = 4, drop_rate = 0, memory_efficient = false (accepted: it only
-- trades memory for recomputation in torchvision, the results are the same).
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local F = require 'lunet.nn.functional'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'
local classify_flat = require('lunet.models.ops').classify_flat
local function cat(list, dim) return require('lunet').cat(list, dim) end

local M = {}

local DenseLayer = eager.own(nn.Module:extend('models.DenseLayer'))
M.DenseLayer = DenseLayer

function DenseLayer:__init(nin, growth_rate, bn_size, drop_rate)
  self:add_module('norm1', nn.BatchNorm2d(nin))
  self:add_module('relu1', nn.ReLU(true))
  self:add_module('conv1', nn.Conv2d(nin, bn_size * growth_rate, 1, { bias = false }))
  self:add_module('norm2', nn.BatchNorm2d(bn_size * growth_rate))
  self:add_module('relu2', nn.ReLU(true))
  self:add_module('conv2', nn.Conv2d(bn_size * growth_rate, growth_rate, 3, { padding = 1, bias = false }))
  self.drop_rate = drop_rate
end

-- inputs: the block's feature maps so far (a list), concatenated on channels
-- (lunet.nn.eager: the concatenation, which grows with each layer, once
-- norm1 consumed it, and each map once the next module consumed it; the
-- ReLUs are in place: each gives back what its batch norm made)
function DenseLayer:forward(inputs)
  local free = eager.frees(self)
  local made = #inputs > 1
  local x = made and cat(inputs, 2) or inputs[1]
  local a = self.relu1(self.norm1(x))
  if free and made then eager.consumed(x, a, inputs[1]) end
  local b = self.conv1(a)
  if free then eager.consumed(a, b, x) end
  local c = self.relu2(self.norm2(b))
  if free then eager.consumed(b, c, x) end
  local out = self.conv2(c)
  if free then eager.consumed(c, out, x) end
  if self.drop_rate > 0 then
    local d = F.dropout(out, self.drop_rate, self.training)
    if free then eager.consumed(out, d, x) end
    out = d
  end
  return out
end

-- lunet.onnx.export (as torch 1.13 writes torchvision's: a Concat even of one
-- input; conv1 -> norm2 folded)
function DenseLayer:onnx_export(g, names, xs)
  local xn = g:node('Concat', names, { axis_i = 1 })
  local x = cat(xs, 2)
  return g:sequence({ 'norm1', 'relu1', 'conv1', 'norm2', 'relu2', 'conv2' }, xn, x)
end

local DenseBlock = eager.own(nn.Module:extend('models.DenseBlock'))
M.DenseBlock = DenseBlock

function DenseBlock:__init(num_layers, nin, bn_size, growth_rate, drop_rate)
  for i = 1, num_layers do
    self:add_module('denselayer' .. i, DenseLayer(nin + (i - 1) * growth_rate, growth_rate, bn_size, drop_rate))
  end
end

function DenseBlock:forward(x)
  local features = { x }
  for _, name in ipairs(self._children) do features[#features + 1] = self[name](features) end
  local y = cat(features, 2)
  -- (lunet.nn.eager: the layers' maps once concatenated, never the block's input)
  if eager.frees(self) then
    for i = 2, #features do eager.consumed(features[i], y, x) end
  end
  return y
end

function DenseBlock:onnx_export(g, xn, x)
  local names, features = { xn }, { x }
  for _, name in ipairs(self._children) do
    names[#names + 1], features[#features + 1] = g:module(name, { unpack(names) }, features)
  end
  return g:node('Concat', names, { axis_i = 1 }), cat(features, 2)
end

local function transition(nin, nout)
  return nn.Sequential():add(nn.BatchNorm2d(nin), 'norm'):add(nn.ReLU(true), 'relu')
    :add(nn.Conv2d(nin, nout, 1, { bias = false }), 'conv'):add(nn.AvgPool2d(2, { stride = 2 }), 'pool')
end

local DenseNet = eager.own(nn.Module:extend('models.DenseNet'))
M.DenseNet = DenseNet

local OPTS = common.opts { num_classes = 'number', bn_size = 'number', drop_rate = 'number',
  memory_efficient = 'boolean' }

-- DenseNet(growth_rate, block_config, num_init_features, opts, fname)
function DenseNet:__init(growth_rate, block_config, num_init_features, opts, fname)
  fname = fname or 'models.DenseNet'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local bn_size = common.positive_int(fname, 'bn_size', opts.bn_size, 4)
  local drop_rate = common.number_in(fname, 'drop_rate', opts.drop_rate, 0, 0, 1)
  local features = nn.Sequential()
    :add(nn.Conv2d(3, num_init_features, 7, { stride = 2, padding = 3, bias = false }), 'conv0')
    :add(nn.BatchNorm2d(num_init_features), 'norm0'):add(nn.ReLU(true), 'relu0')
    :add(nn.MaxPool2d(3, { stride = 2, padding = 1 }), 'pool0')
  local n = num_init_features
  for i, num_layers in ipairs(block_config) do
    features:add(DenseBlock(num_layers, n, bn_size, growth_rate, drop_rate), 'denseblock' .. i)
    n = n + num_layers * growth_rate
    if i ~= #block_config then
      features:add(transition(n, math.floor(n / 2)), 'transition' .. i)
      n = math.floor(n / 2)
    end
  end
  features:add(nn.BatchNorm2d(n), 'norm5')
  self:add_module('features', features)
  self:add_module('classifier', nn.Linear(n, num_classes))
  A.no_grad(function()
    for _, m in ipairs(self:modules()) do
      if getmetatable(m) == nn.Conv2d then nn.init.kaiming_normal_(m.weight) end
    end
    self.classifier.bias:zero_()
  end)
end

-- (lunet.nn.eager: each map once consumed; the pooled map's flattened view
-- before its base)
function DenseNet:forward(x)
  local free = eager.frees(self)
  local f = self.features(x)
  local out = F.relu(f)
  if free then eager.consumed(f, out, x) end
  local p = F.adaptive_avg_pool2d(out, 1)
  if free then eager.consumed(out, p, x) end
  return classify_flat(self.classifier, p, x, free)
end

function DenseNet:onnx_export(g, xn, x)
  xn, x = g:module('features', xn, x)
  xn = g:node('Flatten', { g:node('GlobalAveragePool', { g:node('Relu', { xn }) }) }, { axis_i = 1 })
  return g:module('classifier', xn, F.adaptive_avg_pool2d(F.relu(x), 1):flatten(2))
end

for name, a in pairs({ densenet121 = { 32, { 6, 12, 24, 16 }, 64 }, densenet161 = { 48, { 6, 12, 36, 24 }, 96 },
                       densenet169 = { 32, { 6, 12, 32, 32 }, 64 }, densenet201 = { 32, { 6, 12, 48, 32 }, 64 } }) do
  M[name] = function(opts, ...)
    local fname = 'models.' .. name
    common.check(fname, opts, OPTS, select('#', ...))
    return DenseNet(a[1], a[2], a[3], opts, fname)
  end
end

return M
