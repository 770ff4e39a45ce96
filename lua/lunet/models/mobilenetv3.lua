-- lunet.models.mobilenet_v3_large / mobilenet_v3_small as torchvision 0.14's
-- (InvertedResidual blocks of ops.Conv2dNormActivation expand / depthwise /
-- project with ReLU or Hardswish and an ops.SqueezeExcitation with
-- Hardsigmoid; features, avgpool, classifier; same state_dict keys).
-- Options: num_classes = 1000, dropout = 0.2, width_mult = 1.0,
-- reduced_tail = false, dilated = false, norm_layer (a constructor called
-- as norm_layer(channels); default BatchNorm2d with eps 0.001, momentum 0.01).
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'
local ops = require 'lunet.models.ops'
local make_divisible = require('lunet.models.mobilenetv2').make_divisible

local M = {}

-- torchvision's InvertedResidualConfig: channels scaled by width_mult
local function conf(wm, cin, k, exp, cout, se, act, stride, dilation)
  local adj = function(c) return make_divisible(c * wm, 8) end
  return { input_channels = adj(cin), kernel = k, expanded_channels = adj(exp), out_channels = adj(cout),
    use_se = se, use_hs = act == 'HS', stride = stride, dilation = dilation }
end

local function hardsigmoid_se(cin, csq) return ops.SqueezeExcitation(cin, csq, { scale_activation = nn.Hardsigmoid }) end

local InvertedResidual = eager.own(nn.Module:extend('models.InvertedResidual'))
M.InvertedResidual = InvertedResidual

-- InvertedResidual(cnf, norm_layer): cnf as torchvision's InvertedResidualConfig
function InvertedResidual:__init(cnf, norm_layer)
  if not (cnf.stride >= 1 and cnf.stride <= 2) then common.fail('models.InvertedResidual', 'illegal stride value') end
  self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
  local act = cnf.use_hs and nn.Hardswish or nn.ReLU
  local e = cnf.expanded_channels
  local block = nn.Sequential()
  if e ~= cnf.input_channels then
    block:add(ops.Conv2dNormActivation(cnf.input_channels, e, { kernel_size = 1, norm_layer = norm_layer, activation_layer = act }))
  end
  block:add(ops.Conv2dNormActivation(e, e, { kernel_size = cnf.kernel, stride = cnf.dilation > 1 and 1 or cnf.stride,
    dilation = cnf.dilation, groups = e, norm_layer = norm_layer, activation_layer = act }))
  if cnf.use_se then block:add(hardsigmoid_se(e, make_divisible(math.floor(e / 4), 8))) end
  block:add(ops.Conv2dNormActivation(e, cnf.out_channels, { kernel_size = 1, norm_layer = norm_layer, activation_layer = false }))
  self:add_module('block', block)
  self.out_channels = cnf.out_channels
  self._is_cn = cnf.stride > 1
end

function InvertedResidual:forward(x)
  local y = self.block(x)
  if not self.use_res_connect then return y end
  local out = y + x
  if eager.frees(self) then eager.consumed(y, out, x) end   -- (lunet.nn.eager)
  return out
end

-- ONNX: the block, then an Add where the residual is
function InvertedResidual:onnx_export(g, xn, x)
  local yn, y = g:module('block', xn, x)
  if not self.use_res_connect then return yn, y end
  return g:node('Add', { yn, xn }), y + x
end

local MobileNetV3 = eager.own(nn.Module:extend('models.MobileNetV3'))
M.MobileNetV3 = MobileNetV3

local OPTS = common.opts { num_classes = 'number', dropout = 'number', width_mult = 'number',
  reduced_tail = 'boolean', dilated = 'boolean', norm_layer = true }

local function default_norm(c) return nn.BatchNorm2d(c, { eps = 0.001, momentum = 0.01 }) end

-- torchvision's _mobilenet_v3_conf: the block configs and last_channel
local function arch_conf(arch, wm, reduced_tail, dilated)
  local r, d = reduced_tail and 2 or 1, dilated and 2 or 1
  local q = function(c) return math.floor(c / r) end
  local rows, last
  if arch == 'mobilenet_v3_large' then
    rows = { { 16, 3, 16, 16, false, 'RE', 1, 1 }, { 16, 3, 64, 24, false, 'RE', 2, 1 }, { 24, 3, 72, 24, false, 'RE', 1, 1 },
      { 24, 5, 72, 40, true, 'RE', 2, 1 }, { 40, 5, 120, 40, true, 'RE', 1, 1 }, { 40, 5, 120, 40, true, 'RE', 1, 1 },
      { 40, 3, 240, 80, false, 'HS', 2, 1 }, { 80, 3, 200, 80, false, 'HS', 1, 1 }, { 80, 3, 184, 80, false, 'HS', 1, 1 },
      { 80, 3, 184, 80, false, 'HS', 1, 1 }, { 80, 3, 480, 112, true, 'HS', 1, 1 }, { 112, 3, 672, 112, true, 'HS', 1, 1 },
      { 112, 5, 672, q(160), true, 'HS', 2, d }, { q(160), 5, q(960), q(160), true, 'HS', 1, d },
      { q(160), 5, q(960), q(160), true, 'HS', 1, d } }
    last = q(1280)
  else
    rows = { { 16, 3, 16, 16, true, 'RE', 2, 1 }, { 16, 3, 72, 24, false, 'RE', 2, 1 }, { 24, 3, 88, 24, false, 'RE', 1, 1 },
      { 24, 5, 96, 40, true, 'HS', 2, 1 }, { 40, 5, 240, 40, true, 'HS', 1, 1 }, { 40, 5, 240, 40, true, 'HS', 1, 1 },
      { 40, 5, 120, 48, true, 'HS', 1, 1 }, { 48, 5, 144, 48, true, 'HS', 1, 1 }, { 48, 5, 288, q(96), true, 'HS', 2, d },
      { q(96), 5, q(576), q(96), true, 'HS', 1, d }, { q(96), 5, q(576), q(96), true, 'HS', 1, d } }
    last = q(1024)
  end
  local setting = {}
  for i, row in ipairs(rows) do setting[i] = conf(wm, unpack(row)) end
  return setting, make_divisible(last * wm, 8)
end

-- MobileNetV3(arch, opts, fname): arch 'mobilenet_v3_large' | 'mobilenet_v3_small'
function MobileNetV3:__init(arch, opts, fname)
  fname = fname or 'models.MobileNetV3'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local p = common.number_in(fname, 'dropout', opts.dropout, 0.2, 0, 1)
  local wm = common.number_in(fname, 'width_mult', opts.width_mult, 1.0, 1e-6, math.huge)
  local norm = opts.norm_layer or default_norm
  if type(norm) ~= 'function' and not (getmetatable(norm) or {}).__call then
    common.fail(fname, 'norm_layer must be a constructor (a function(channels) returning a module)')
  end
  if arch ~= 'mobilenet_v3_large' and arch ~= 'mobilenet_v3_small' then
    common.fail(fname, 'Unsupported model type ' .. tostring(arch))
  end
  local setting, last_channel = arch_conf(arch, wm, opts.reduced_tail, opts.dilated)
  local features = nn.Sequential { ops.Conv2dNormActivation(3, setting[1].input_channels,
    { kernel_size = 3, stride = 2, norm_layer = norm, activation_layer = nn.Hardswish }) }
  for _, cnf in ipairs(setting) do features:add(InvertedResidual(cnf, norm)) end
  local cin = setting[#setting].out_channels
  features:add(ops.Conv2dNormActivation(cin, 6 * cin, { kernel_size = 1, norm_layer = norm, activation_layer = nn.Hardswish }))
  self:add_module('features', features)
  self:add_module('avgpool', nn.AdaptiveAvgPool2d(1))
  self:add_module('classifier', nn.Sequential { nn.Linear(6 * cin, last_channel), nn.Hardswish(true),
    nn.Dropout(p, true), nn.Linear(last_channel, num_classes) })
  A.no_grad(function()
    for _, m in ipairs(self:modules()) do
      local mt = getmetatable(m)
      if mt == nn.Conv2d then
        nn.init.kaiming_normal_(m.weight, { mode = 'fan_out' })
        if m.bias then m.bias:zero_() end
      elseif (mt == nn.BatchNorm2d or mt == nn.GroupNorm) and m.weight then
        m.weight:fill_(1)
        m.bias:zero_()
      elseif mt == nn.Linear then
        m.weight:normal_(0, 0.01)
        m.bias:zero_()
      end
    end
  end)
end

MobileNetV3.forward, MobileNetV3.onnx_export = ops.pooled_forward, ops.pooled_onnx_export

for _, name in ipairs({ 'mobilenet_v3_large', 'mobilenet_v3_small' }) do
  M[name] = function(opts, ...)
    local fname = 'models.' .. name
    common.check(fname, opts, OPTS, select('#', ...))
    return MobileNetV3(name, opts, fname)
  end
end

return M
