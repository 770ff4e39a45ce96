-- lunet.models.ops: torchvision 0.14's building blocks (torchvision.ops.misc
-- and torchvision.ops.stochastic_depth) that its newer CNNs share, with the
-- same module trees and state_dict keys:
--   ops.Conv2dNormActivation(cin, cout, {kernel_size = 3, stride = 1, padding, groups = 1,
--     dilation = 1, norm_layer = nn.BatchNorm2d | false, activation_layer = nn.ReLU | false,
--     inplace = true, bias})   -- an nn.Sequential: conv, norm, activation ('0', '1', '2')
--   ops.SqueezeExcitation(cin, csqueeze, {activation = nn.ReLU, scale_activation = nn.Sigmoid})
--     -- x * scale_activation(fc2(activation(fc1(avgpool(x))))), fc1/fc2 1x1 convs
--   ops.StochasticDepth(p, mode)  -- 'row' | 'batch'; ops.stochastic_depth(x, p, mode, training)
-- norm_layer and activation_layer are constructors called as torchvision
-- calls them (norm_layer(cout); activation_layer(inplace) when inplace is
-- not nil), so a function(c) return nn.BatchNorm2d(c, {eps = 1e-3}) end works.
local nn = require 'lunet.nn'
local lunet = require 'lunet'
local options = require 'lunet.options'
local core = require 'lunet.core'
local eager = require 'lunet.nn.eager'

local M = {}

local function fail(fname, msg) options.fail(fname, msg) end

local function channels(fname, what, v)
  if type(v) ~= 'number' or v % 1 ~= 0 or v < 1 then
    fail(fname, ('%s must be an integer >= 1, got %s'):format(what, tostring(v)))
  end
  return v
end

local function callable(v)
  if type(v) == 'function' then return true end
  local mt = getmetatable(v)
  return mt ~= nil and mt.__call ~= nil
end

-- ---- Conv2dNormActivation ----------------------------------------------------------------------

local Conv2dNormActivation = eager.own(nn.Sequential:extend('models.Conv2dNormActivation'))
M.Conv2dNormActivation = Conv2dNormActivation

local CNA_OPTS = { kernel_size = 'number', stride = 'number', padding = 'number', groups = 'number',
  dilation = 'number', norm_layer = true, activation_layer = true, inplace = 'boolean', bias = 'boolean' }

function Conv2dNormActivation:__init(cin, cout, opts)
  local fname = 'models.Conv2dNormActivation'
  nn.Sequential.__init(self)
  channels(fname, 'in_channels', cin)
  channels(fname, 'out_channels', cout)
  local o = options.check(fname, opts, CNA_OPTS) or {}
  local k = o.kernel_size or 3
  local dilation = o.dilation or 1
  local norm = o.norm_layer
  if norm == nil then norm = nn.BatchNorm2d end
  local act = o.activation_layer
  if act == nil then act = nn.ReLU end
  if norm ~= false and not callable(norm) then fail(fname, 'norm_layer must be a constructor or false, got ' .. core.typename(norm)) end
  if act ~= false and not callable(act) then fail(fname, 'activation_layer must be a constructor or false, got ' .. core.typename(act)) end
  local padding = o.padding or math.floor((k - 1) / 2) * dilation
  local bias = o.bias
  if bias == nil then bias = norm == false end
  self:add(nn.Conv2d(cin, cout, k, { stride = o.stride or 1, padding = padding, dilation = dilation,
    groups = o.groups or 1, bias = bias }))
  if norm ~= false then self:add(norm(cout)) end
  if act ~= false then
    local inplace = o.inplace
    if inplace == nil then inplace = true end
    self:add(act(inplace))
  end
  self.out_channels = cout
end

-- ---- SqueezeExcitation -------------------------------------------------------------------------

local SqueezeExcitation = eager.own(nn.Module:extend('models.SqueezeExcitation'))
M.SqueezeExcitation = SqueezeExcitation

local SE_OPTS = { activation = true, scale_activation = true }

function SqueezeExcitation:__init(cin, csq, opts)
  local fname = 'models.SqueezeExcitation'
  channels(fname, 'input_channels', cin)
  channels(fname, 'squeeze_channels', csq)
  local o = options.check(fname, opts, SE_OPTS) or {}
  local act, scale = o.activation or nn.ReLU, o.scale_activation or nn.Sigmoid
  if not callable(act) then fail(fname, 'activation must be a constructor, got ' .. core.typename(act)) end
  if not callable(scale) then fail(fname, 'scale_activation must be a constructor, got ' .. core.typename(scale)) end
  self:add_module('avgpool', nn.AdaptiveAvgPool2d(1))
  self:add_module('fc1', nn.Conv2d(cin, csq, 1))
  self:add_module('fc2', nn.Conv2d(csq, cin, 1))
  self:add_module('activation', act())
  self:add_module('scale_activation', scale())
end

function SqueezeExcitation:scale(x)
  return self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
end

function SqueezeExcitation:forward(x) return self:scale(x) * x end

-- ONNX: torch 1.13 writes the pool as GlobalAveragePool, then the chain and a Mul
function SqueezeExcitation:onnx_export(g, xn, x)
  local pn = g:node('GlobalAveragePool', { xn })
  local sn, s = pn, self.avgpool(x)
  for _, c in ipairs({ 'fc1', 'activation', 'fc2', 'scale_activation' }) do sn, s = g:module(c, sn, s) end
  return g:node('Mul', { sn, xn }), s * x
end

-- ---- StochasticDepth ---------------------------------------------------------------------------

local function check_sd(fname, p, mode)
  if type(p) ~= 'number' or not (p >= 0 and p <= 1) then
    fail(fname, ('drop probability has to be between 0 and 1, but got %s'):format(tostring(p)))
  end
  if mode ~= 'row' and mode ~= 'batch' then
    fail(fname, ("mode has to be either 'batch' or 'row', but got %s"):format(tostring(mode)))
  end
end

-- x scaled per sample ('row') or as a whole ('batch') by a Bernoulli(1 - p)
-- draw over 1 - p: training's residual branches dropped whole
function M.stochastic_depth(x, p, mode, training)
  check_sd('models.stochastic_depth', p, mode)
  if not lunet.is_tensor(x) then fail('models.stochastic_depth', 'input must be a tensor, got ' .. core.typename(x)) end
  if training == false or p == 0 then return x end
  local size = {}
  for d = 1, x:dim() do size[d] = 1 end
  if mode == 'row' and x:dim() > 0 then size[1] = x:size(1) end
  local survival = 1 - p
  local noise = lunet.empty(size, { dtype = x.dtype, device = x.device }):bernoulli_(survival)
  if survival > 0 then noise:div_(survival) end
  return x * noise
end

local StochasticDepth = eager.own(nn.Module:extend('models.StochasticDepth'))
M.StochasticDepth = StochasticDepth

function StochasticDepth:__init(p, mode)
  check_sd('models.StochasticDepth', p, mode)
  self.p, self.mode = p, mode
end

function StochasticDepth:forward(x) return M.stochastic_depth(x, self.p, self.mode, self.training) end

-- ONNX: an inference graph, where the layer passes its input on
function StochasticDepth:onnx_export(g, xn, x) return xn, x end

function StochasticDepth:extra_repr() return ('p=%s, mode=%s'):format(self.p, self.mode) end

-- ---- the pooled classifier head --------------------------------------------------------------

-- head(p:flatten(2)), then (free: lunet.nn.eager) the flattened view and
-- the pooled map p freed, the view first so that none outlives its base;
-- never x, the model's input
function M.classify_flat(head, p, x, free)
  local flat = p:flatten(2)
  local y = head(flat)
  if free then
    eager.consumed(flat, y, x)
    eager.consumed(p, y, x)
  end
  return y
end

-- forward and ONNX export of a model made of features, avgpool and a
-- classifier on the flattened pool (torchvision's VGG, AlexNet,
-- MobileNetV3, EfficientNet); each map freed once consumed
function M.pooled_forward(self, x)
  local free = eager.frees(self)
  local f = self.features(x)
  local p = self.avgpool(f)
  if free then eager.consumed(f, p, x) end
  return M.classify_flat(self.classifier, p, x, free)
end

function M.pooled_onnx_export(self, g, xn, x)
  xn, x = g:module('features', xn, x)
  xn, x = g:module('avgpool', xn, x)
  return g:module('classifier', g:node('Flatten', { xn }, { axis_i = 1 }), x:flatten(2))
end

return M
