-- lunet.models' EfficientNets as torchvision 0.14's: efficientnet_b0 ... b7
-- (MBConv blocks) and efficientnet_v2_s / _m / _l (FusedMBConv, then MBConv);
-- blocks of ops.Conv2dNormActivation with SiLU, an ops.SqueezeExcitation and
-- an ops.StochasticDepth ('row') whose probability grows linearly with the
-- block's index; features, avgpool, classifier; same state_dict keys.
-- Options: num_classes = 1000, dropout (0.2 ... 0.5 by model),
-- stochastic_depth_prob = 0.2, norm_layer (b0-b4 only, as torchvision: a
-- constructor called as norm_layer(channels); b5-b7 use BatchNorm2d with
-- eps 0.001 and momentum 0.01, the v2s eps 0.001).
-- (torchvision 0.14 raises on efficientnet_*(dropout=...): it passes dropout
-- positionally; lunet takes it, as later torchvisions do.)
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'
local ops = require 'lunet.models.ops'
local make_divisible = require('lunet.models.mobilenetv2').make_divisible

local M = {}

local function adjust_channels(c, wm, min_value) return make_divisible(c * wm, 8, min_value) end
local function silu_inplace() return nn.SiLU(true) end

-- torchvision's MBConvConfig (channels and depth scaled) and FusedMBConvConfig
local function mbconv(t, k, s, cin, cout, n, wm, dm)
  wm, dm = wm or 1, dm or 1
  return { expand_ratio = t, kernel = k, stride = s, input_channels = adjust_channels(cin, wm),
    out_channels = adjust_channels(cout, wm), num_layers = math.ceil(n * dm), block = 'MBConv' }
end
local function fused(t, k, s, cin, cout, n)
  return { expand_ratio = t, kernel = k, stride = s, input_channels = cin, out_channels = cout, num_layers = n,
    block = 'FusedMBConv' }
end

-- residual blocks: block(x), dropped per sample in training, plus x
local function residual_forward(self, x)
  local y = self.block(x)
  if not self.use_res_connect then return y end
  local d = self.stochastic_depth(y)
  local out = d + x
  if eager.frees(self) then   -- (lunet.nn.eager)
    eager.consumed(d, out, x)
    eager.consumed(y, out, x)
  end
  return out
end
local function residual_onnx(self, g, xn, x)
  local yn, y = g:module('block', xn, x)
  if not self.use_res_connect then return yn, y end
  return g:node('Add', { yn, xn }), y + x   -- (StochasticDepth: the identity in inference)
end

local MBConv = eager.own(nn.Module:extend('models.MBConv'))
M.MBConv = MBConv

function MBConv:__init(cnf, sd_prob, norm_layer)
  if not (cnf.stride >= 1 and cnf.stride <= 2) then common.fail('models.MBConv', 'illegal stride value') end
  self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
  local e = adjust_channels(cnf.input_channels, cnf.expand_ratio)
  local block = nn.Sequential()
  if e ~= cnf.input_channels then
    block:add(ops.Conv2dNormActivation(cnf.input_channels, e, { kernel_size = 1, norm_layer = norm_layer, activation_layer = nn.SiLU }))
  end
  block:add(ops.Conv2dNormActivation(e, e, { kernel_size = cnf.kernel, stride = cnf.stride, groups = e,
    norm_layer = norm_layer, activation_layer = nn.SiLU }))
  block:add(ops.SqueezeExcitation(e, math.max(1, math.floor(cnf.input_channels / 4)), { activation = silu_inplace }))
  block:add(ops.Conv2dNormActivation(e, cnf.out_channels, { kernel_size = 1, norm_layer = norm_layer, activation_layer = false }))
  self:add_module('block', block)
  self:add_module('stochastic_depth', ops.StochasticDepth(sd_prob, 'row'))
  self.out_channels = cnf.out_channels
end

MBConv.forward, MBConv.onnx_export = residual_forward, residual_onnx

local FusedMBConv = eager.own(nn.Module:extend('models.FusedMBConv'))
M.FusedMBConv = FusedMBConv

function FusedMBConv:__init(cnf, sd_prob, norm_layer)
  if not (cnf.stride >= 1 and cnf.stride <= 2) then common.fail('models.FusedMBConv', 'illegal stride value') end
  self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
  local e = adjust_channels(cnf.input_channels, cnf.expand_ratio)
  local block = nn.Sequential()
  if e ~= cnf.input_channels then   -- fused expand (the kxk conv), then project
    block:add(ops.Conv2dNormActivation(cnf.input_channels, e, { kernel_size = cnf.kernel, stride = cnf.stride,
      norm_layer = norm_layer, activation_layer = nn.SiLU }))
    block:add(ops.Conv2dNormActivation(e, cnf.out_channels, { kernel_size = 1, norm_layer = norm_layer, activation_layer = false }))
  else
    block:add(ops.Conv2dNormActivation(cnf.input_channels, cnf.out_channels, { kernel_size = cnf.kernel,
      stride = cnf.stride, norm_layer = norm_layer, activation_layer = nn.SiLU }))
  end
  self:add_module('block', block)
  self:add_module('stochastic_depth', ops.StochasticDepth(sd_prob, 'row'))
  self.out_channels = cnf.out_channels
end

FusedMBConv.forward, FusedMBConv.onnx_export = residual_forward, residual_onnx

local EfficientNet = eager.own(nn.Module:extend('models.EfficientNet'))
M.EfficientNet = EfficientNet

local OPTS = common.opts { num_classes = 'number', dropout = 'number', stochastic_depth_prob = 'number', norm_layer = true }

-- EfficientNet(setting, dropout, opts, fname, last_channel, norm_layer):
-- setting a list of the configs above; norm_layer the model's default
function EfficientNet:__init(setting, dropout, opts, fname, last_channel, norm_layer)
  fname = fname or 'models.EfficientNet'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local p = common.number_in(fname, 'dropout', opts.dropout, dropout or 0.2, 0, 1)
  local sdp = common.number_in(fname, 'stochastic_depth_prob', opts.stochastic_depth_prob, 0.2, 0, 1)
  local norm = opts.norm_layer or norm_layer or nn.BatchNorm2d
  if type(norm) ~= 'function' and not (getmetatable(norm) or {}).__call then
    common.fail(fname, 'norm_layer must be a constructor (a function(channels) returning a module)')
  end
  if type(setting) ~= 'table' or #setting == 0 then common.fail(fname, 'The inverted_residual_setting should not be empty') end
  local features = nn.Sequential { ops.Conv2dNormActivation(3, setting[1].input_channels,
    { kernel_size = 3, stride = 2, norm_layer = norm, activation_layer = nn.SiLU }) }
  local total, id = 0, 0
  for _, cnf in ipairs(setting) do total = total + cnf.num_layers end
  for _, cnf in ipairs(setting) do
    local stage = nn.Sequential()
    for i = 1, cnf.num_layers do
      local b = {}
      for k, v in pairs(cnf) do b[k] = v end
      if i > 1 then b.input_channels, b.stride = b.out_channels, 1 end
      stage:add(M[cnf.block](b, sdp * id / total, norm))
      id = id + 1
    end
    features:add(stage)
  end
  local cin = setting[#setting].out_channels
  local cout = last_channel or 4 * cin
  features:add(ops.Conv2dNormActivation(cin, cout, { kernel_size = 1, norm_layer = norm, activation_layer = nn.SiLU }))
  self:add_module('features', features)
  self:add_module('avgpool', nn.AdaptiveAvgPool2d(1))
  self:add_module('classifier', nn.Sequential { nn.Dropout(p, true), nn.Linear(cout, num_classes) })
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
        local r = 1 / math.sqrt(m.out_features)
        m.weight:uniform_(-r, r)
        m.bias:zero_()
      end
    end
  end)
end

EfficientNet.forward, EfficientNet.onnx_export = ops.pooled_forward, ops.pooled_onnx_export

local function b_setting(wm, dm)
  return { mbconv(1, 3, 1, 32, 16, 1, wm, dm), mbconv(6, 3, 2, 16, 24, 2, wm, dm), mbconv(6, 5, 2, 24, 40, 2, wm, dm),
    mbconv(6, 3, 2, 40, 80, 3, wm, dm), mbconv(6, 5, 1, 80, 112, 3, wm, dm), mbconv(6, 5, 2, 112, 192, 4, wm, dm),
    mbconv(6, 3, 1, 192, 320, 1, wm, dm) }
end
local V2 = {
  s = { fused(1, 3, 1, 24, 24, 2), fused(4, 3, 2, 24, 48, 4), fused(4, 3, 2, 48, 64, 4), mbconv(4, 3, 2, 64, 128, 6),
    mbconv(6, 3, 1, 128, 160, 9), mbconv(6, 3, 2, 160, 256, 15) },
  m = { fused(1, 3, 1, 24, 24, 3), fused(4, 3, 2, 24, 48, 5), fused(4, 3, 2, 48, 80, 5), mbconv(4, 3, 2, 80, 160, 7),
    mbconv(6, 3, 1, 160, 176, 14), mbconv(6, 3, 2, 176, 304, 18), mbconv(6, 3, 1, 304, 512, 5) },
  l = { fused(1, 3, 1, 32, 32, 4), fused(4, 3, 2, 32, 64, 7), fused(4, 3, 2, 64, 96, 7), mbconv(4, 3, 2, 96, 192, 10),
    mbconv(6, 3, 1, 192, 224, 19), mbconv(6, 3, 2, 224, 384, 25), mbconv(6, 3, 1, 384, 640, 7) },
}

local function bn_eps3(c) return nn.BatchNorm2d(c, { eps = 1e-3 }) end
local function bn_eps3_m(c) return nn.BatchNorm2d(c, { eps = 1e-3, momentum = 0.01 }) end

-- name -> width_mult, depth_mult, dropout (torchvision's efficientnet_bN)
local B = { b0 = { 1.0, 1.0, 0.2 }, b1 = { 1.0, 1.1, 0.2 }, b2 = { 1.1, 1.2, 0.3 }, b3 = { 1.2, 1.4, 0.3 },
  b4 = { 1.4, 1.8, 0.4 }, b5 = { 1.6, 2.2, 0.4 }, b6 = { 1.8, 2.6, 0.5 }, b7 = { 2.0, 3.1, 0.5 } }

for v, a in pairs(B) do
  local name = 'efficientnet_' .. v
  local own_norm = a[1] >= 1.6 and bn_eps3_m or nil   -- (b5-b7 set norm_layer themselves)
  M[name] = function(opts, ...)
    local fname = 'models.' .. name
    opts = common.check(fname, opts, OPTS, select('#', ...))
    if own_norm and opts.norm_layer ~= nil then common.fail(fname, 'norm_layer is fixed for this model') end
    return EfficientNet(b_setting(a[1], a[2]), a[3], opts, fname, nil, own_norm)
  end
end
for v, setting in pairs(V2) do
  local name = 'efficientnet_v2_' .. v
  M[name] = function(opts, ...)
    local fname = 'models.' .. name
    opts = common.check(fname, opts, OPTS, select('#', ...))
    if opts.norm_layer ~= nil then common.fail(fname, 'norm_layer is fixed for this model') end
    return EfficientNet(setting, 0.2, opts, fname, 1280, bn_eps3)
  end
end

return M
