-- lunet.models.googlenet as torchvision 0.14's (BasicConv2d stem, Inception
-- blocks 3a-5b, aux heads aux1/aux2, fc; same state_dict keys). Options:
-- num_classes = 1000, aux_logits = true, transform_input = false,
-- init_weights = true (truncated normal std 0.01), dropout = 0.2,
-- dropout_aux = 0.7. Output: the logits; in train mode with aux_logits a
-- table {logits =, aux_logits2 =, aux_logits1 =} as torchvision's
-- GoogLeNetOutputs (whose eager forward puts aux1's output in aux_logits2
-- and aux2's in aux_logits1: kept, so code ported from it computes the same).
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local F = require 'lunet.nn.functional'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'
local function lunet() return require 'lunet' end

local M = {}

-- conv (no bias), batch norm (eps 1e-3), ReLU: torchvision's BasicConv2d
local BasicConv2d = eager.own(nn.Module:extend('models.BasicConv2d'))
M.BasicConv2d = BasicConv2d

-- BasicConv2d(cin, cout, k, {stride, padding}) (k, padding: numbers or {h, w})
function BasicConv2d:__init(cin, cout, k, opts)
  opts = opts or {}
  self:add_module('conv', nn.Conv2d(cin, cout, k, { stride = opts.stride or 1, padding = opts.padding or 0, bias = false }))
  self:add_module('bn', nn.BatchNorm2d(cout, { eps = 0.001 }))
end

function BasicConv2d:forward(x)
  local c = self.conv(x)
  local y = F.relu(self.bn(c), true)
  if eager.frees(self) then eager.consumed(c, y, x) end   -- (lunet.nn.eager; the ReLU gives back bn's output)
  return y
end

function BasicConv2d:onnx_export(g, xn, x)
  local yn, y = g:sequence({ 'conv', 'bn' }, xn, x)
  return g:node('Relu', { yn }), F.relu(y)
end

-- torchvision's _transform_input: ImageNet normalisation to (x - 0.5) / 0.5's
local SCALE = { 0.229 / 0.5, 0.224 / 0.5, 0.225 / 0.5 }
local SHIFT = { (0.485 - 0.5) / 0.5, (0.456 - 0.5) / 0.5, (0.406 - 0.5) / 0.5 }
function M.transform_input(x)
  local o = { dtype = x.dtype, device = x.device }
  local s = x * lunet().tensor(SCALE, o):view(1, 3, 1, 1)
  local y = s + lunet().tensor(SHIFT, o):view(1, 3, 1, 1)
  if eager.active() then eager.consumed(s, y, x) end   -- (its own product: lunet.nn.eager)
  return y
end

function M.export_transform_input(g, xn, x)
  local o = { dtype = 'float32' }
  local sn = g:constant(lunet().tensor(SCALE, o):view(1, 3, 1, 1))
  local bn = g:constant(lunet().tensor(SHIFT, o):view(1, 3, 1, 1))
  return g:node('Add', { g:node('Mul', { xn, sn }), bn }), M.transform_input(x)
end

-- the branches' outputs concatenated on channels
local Inception = eager.own(nn.Module:extend('models.Inception'))
M.Inception = Inception

function Inception:__init(cin, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj)
  self:add_module('branch1', BasicConv2d(cin, ch1x1, 1))
  self:add_module('branch2', nn.Sequential { BasicConv2d(cin, ch3x3red, 1), BasicConv2d(ch3x3red, ch3x3, 3, { padding = 1 }) })
  -- (3x3, not 5x5: torchvision's known bug, vision#906, kept for its weights)
  self:add_module('branch3', nn.Sequential { BasicConv2d(cin, ch5x5red, 1), BasicConv2d(ch5x5red, ch5x5, 3, { padding = 1 }) })
  self:add_module('branch4', nn.Sequential { nn.MaxPool2d(3, { stride = 1, padding = 1, ceil_mode = true }),
    BasicConv2d(cin, pool_proj, 1) })
end

local BRANCHES = { 'branch1', 'branch2', 'branch3', 'branch4' }

function Inception:forward(x)
  local out = {}
  for i, b in ipairs(BRANCHES) do out[i] = self[b](x) end
  local y = lunet().cat(out, 2)
  -- (lunet.nn.eager: the branches' maps once concatenated)
  if eager.frees(self) then
    for i = 1, #out do eager.consumed(out[i], y, x) end
  end
  return y
end

function Inception:onnx_export(g, xn, x)
  local names, outs = {}, {}
  for i, b in ipairs(BRANCHES) do names[i], outs[i] = g:module(b, xn, x) end
  return g:node('Concat', names, { axis_i = 1 }), lunet().cat(outs, 2)
end

local InceptionAux = eager.own(nn.Module:extend('models.InceptionAux'))
M.InceptionAux = InceptionAux

function InceptionAux:__init(cin, num_classes, dropout)
  self:add_module('conv', BasicConv2d(cin, 128, 1))
  self:add_module('fc1', nn.Linear(2048, 1024))
  self:add_module('fc2', nn.Linear(1024, num_classes))
  self:add_module('dropout', nn.Dropout(dropout))
end

-- (lunet.nn.eager: each map once consumed, the flattened view before its
-- base; the ReLU is in place, the dropout gives back its input in eval)
function InceptionAux:forward(x)
  local free = eager.frees(self)
  local p = F.adaptive_avg_pool2d(x, { 4, 4 })
  local c = self.conv(p)
  if free then eager.consumed(p, c, x) end
  local flat = c:flatten(2)
  local h = F.relu(self.fc1(flat), true)
  if free then
    eager.consumed(flat, h, x)
    eager.consumed(c, h, x)
  end
  local d = self.dropout(h)
  if free then eager.consumed(h, d, x) end
  local y = self.fc2(d)
  if free then eager.consumed(d, y, x) end
  return y
end

local GoogLeNet = eager.own(nn.Module:extend('models.GoogLeNet'))
M.GoogLeNet = GoogLeNet

local OPTS = common.opts { num_classes = 'number', aux_logits = 'boolean', transform_input = 'boolean',
  init_weights = 'boolean', dropout = 'number', dropout_aux = 'number' }

function GoogLeNet:__init(opts, fname)
  fname = fname or 'models.GoogLeNet'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local p = common.number_in(fname, 'dropout', opts.dropout, 0.2, 0, 1)
  local p_aux = common.number_in(fname, 'dropout_aux', opts.dropout_aux, 0.7, 0, 1)
  self.aux_logits = opts.aux_logits ~= false
  self.transform_input = opts.transform_input == true
  local I = Inception
  self:add_module('conv1', BasicConv2d(3, 64, 7, { stride = 2, padding = 3 }))
  self:add_module('maxpool1', nn.MaxPool2d(3, { stride = 2, ceil_mode = true }))
  self:add_module('conv2', BasicConv2d(64, 64, 1))
  self:add_module('conv3', BasicConv2d(64, 192, 3, { padding = 1 }))
  self:add_module('maxpool2', nn.MaxPool2d(3, { stride = 2, ceil_mode = true }))
  self:add_module('inception3a', I(192, 64, 96, 128, 16, 32, 32))
  self:add_module('inception3b', I(256, 128, 128, 192, 32, 96, 64))
  self:add_module('maxpool3', nn.MaxPool2d(3, { stride = 2, ceil_mode = true }))
  self:add_module('inception4a', I(480, 192, 96, 208, 16, 48, 64))
  self:add_module('inception4b', I(512, 160, 112, 224, 24, 64, 64))
  self:add_module('inception4c', I(512, 128, 128, 256, 24, 64, 64))
  self:add_module('inception4d', I(512, 112, 144, 288, 32, 64, 64))
  self:add_module('inception4e', I(528, 256, 160, 320, 32, 128, 128))
  self:add_module('maxpool4', nn.MaxPool2d(2, { stride = 2, ceil_mode = true }))
  self:add_module('inception5a', I(832, 256, 160, 320, 32, 128, 128))
  self:add_module('inception5b', I(832, 384, 192, 384, 48, 128, 128))
  if self.aux_logits then
    self:add_module('aux1', InceptionAux(512, num_classes, p_aux))
    self:add_module('aux2', InceptionAux(528, num_classes, p_aux))
  end
  self:add_module('avgpool', nn.AdaptiveAvgPool2d({ 1, 1 }))
  self:add_module('dropout', nn.Dropout(p))
  self:add_module('fc', nn.Linear(1024, num_classes))
  if opts.init_weights ~= false then
    A.no_grad(function()
      for _, m in ipairs(self:modules()) do
        local mt = getmetatable(m)
        if mt == nn.Conv2d or mt == nn.Linear then nn.init.trunc_normal_(m.weight, 0, 0.01, -2, 2)
        elseif mt == nn.BatchNorm2d then m.weight:fill_(1); m.bias:zero_() end
      end
    end)
  end
end

local TRUNK1 = { 'conv1', 'maxpool1', 'conv2', 'conv3', 'maxpool2', 'inception3a', 'inception3b', 'maxpool3',
  'inception4a' }
local TRUNK2 = { 'inception4b', 'inception4c', 'inception4d' }
local TRUNK3 = { 'inception4e', 'maxpool4', 'inception5a', 'inception5b', 'avgpool' }

-- the trunk's modules names applied in turn from h (GoogLeNet's and
-- Inception3's); free: each map freed once the next module consumed it
-- (lunet.nn.eager; an aux head has run on it already), never keep (the
-- forward's input, or a map an aux head gave back or a view of)
local function trunk(self, names, h, keep, free)
  for i = 1, #names do
    local nxt = self[names[i]](h)
    if free then eager.consumed(h, nxt, keep) end
    h = nxt
  end
  return h
end
M.trunk = trunk

-- what trunk must keep after an aux head gave back a from h: h when a is h
-- or a view of it, else the forward's input x
function M.aux_keep(a, h, x) return eager.aliases(a, h) and h or x end

-- the classifier on the pooled map h: fc(dropout(flatten(h))), then h, its
-- view and the dropout's output freed (free; the view before its base)
local function head(self, h, x, free)
  local flat = h:flatten(2)
  local d = self.dropout(flat)
  local y = self.fc(d)
  if free then
    eager.consumed(d, y, x)
    eager.consumed(flat, y, x)
    eager.consumed(h, y, x)
  end
  return y
end

-- (the aux heads' outputs are returned: kept; transform_input's result, made
-- here, is freed once conv1 consumed it)
function GoogLeNet:forward(x)
  local free = eager.frees(self)
  local h = x
  if self.transform_input then h = M.transform_input(x) end
  local aux = self.training and self.aux_logits
  local a1, a2
  h = trunk(self, TRUNK1, h, x, free)
  if aux then a1 = self.aux1(h) end
  h = trunk(self, TRUNK2, h, aux and M.aux_keep(a1, h, x) or x, free)
  if aux then a2 = self.aux2(h) end
  h = trunk(self, TRUNK3, h, aux and M.aux_keep(a2, h, x) or x, free)
  local y = head(self, h, x, free)
  if aux then return { logits = y, aux_logits2 = a1, aux_logits1 = a2 } end
  return y
end

-- ONNX: the eval graph (no aux heads)
function GoogLeNet:onnx_export(g, xn, x)
  if self.transform_input then xn, x = M.export_transform_input(g, xn, x) end
  for _, list in ipairs({ TRUNK1, TRUNK2, TRUNK3 }) do
    for _, c in ipairs(list) do xn, x = g:module(c, xn, x) end
  end
  return g:module('fc', g:node('Flatten', { xn }, { axis_i = 1 }), x:flatten(2))
end

function M.googlenet(opts, ...)
  common.check('models.googlenet', opts, OPTS, select('#', ...))
  return GoogLeNet(opts, 'models.googlenet')
end

return M
