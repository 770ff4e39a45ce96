-- lunet.models.mobilenet_v2 as torchvision 0.14's (InvertedResidual blocks
-- of 1x1 expand, 3x3 depthwise, 1x1 project convs with ReLU6; features,
-- classifier; same state_dict keys). Options: num_classes = 1000,
-- width_mult = 1.0, round_nearest = 8, dropout = 0.2,
-- inverted_residual_setting = {{t, c, n, s}, ...}.
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'

local M = {}

-- v rounded to a multiple of divisor, by no more than 10% down (torchvision's)
function M.make_divisible(v, divisor, min_value)
  min_value = min_value or divisor
  local new_v = math.max(min_value, math.floor(math.floor(v + divisor / 2) / divisor) * divisor)
  if new_v < 0.9 * v then new_v = new_v + divisor end
  return new_v
end

-- torchvision's Conv2dNormActivation: conv (no bias), batch norm, ReLU6
local function conv_bn_relu6(cin, cout, k, stride, groups)
  k = k or 3
  return nn.Sequential {
    nn.Conv2d(cin, cout, k, { stride = stride or 1, padding = math.floor((k - 1) / 2), groups = groups or 1, bias = false }),
    nn.BatchNorm2d(cout), nn.ReLU6(true),
  }
end

local InvertedResidual = eager.own(nn.Module:extend('models.InvertedResidual'))
M.InvertedResidual = InvertedResidual

function InvertedResidual:__init(inp, oup, stride, expand_ratio)
  local hidden = math.floor(inp * expand_ratio + 0.5)
  self.use_res_connect = stride == 1 and inp == oup
  self.out_channels = oup
  local seq = nn.Sequential()
  if expand_ratio ~= 1 then seq:add(conv_bn_relu6(inp, hidden, 1)) end
  seq:add(conv_bn_relu6(hidden, hidden, 3, stride, hidden))   -- depthwise
  seq:add(nn.Conv2d(hidden, oup, 1, { bias = false }))
  seq:add(nn.BatchNorm2d(oup))
  self:add_module('conv', seq)
end

function InvertedResidual:forward(x)
  if not self.use_res_connect then return self.conv(x) end
  local y = self.conv(x)
  local out = x + y
  if eager.frees(self) then eager.consumed(y, out, x) end   -- (lunet.nn.eager)
  return out
end

local MobileNetV2 = eager.own(nn.Module:extend('models.MobileNetV2'))
M.MobileNetV2 = MobileNetV2

local OPTS = common.opts { num_classes = 'number', width_mult = 'number', round_nearest = 'number',
  dropout = 'number', inverted_residual_setting = 'table' }
local SETTING = { { 1, 16, 1, 1 }, { 6, 24, 2, 2 }, { 6, 32, 3, 2 }, { 6, 64, 4, 2 }, { 6, 96, 3, 1 },
  { 6, 160, 3, 2 }, { 6, 320, 1, 1 } }

function MobileNetV2:__init(opts, fname)
  fname = fname or 'models.MobileNetV2'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local round = common.positive_int(fname, 'round_nearest', opts.round_nearest, 8)
  local p = common.number_in(fname, 'dropout', opts.dropout, 0.2, 0, 1)
  local wm = common.number_in(fname, 'width_mult', opts.width_mult, 1.0, 1e-6, math.huge)
  local setting = opts.inverted_residual_setting or SETTING
  if #setting == 0 then common.fail(fname, 'inverted_residual_setting should be non-empty') end
  for _, s in ipairs(setting) do
    if type(s) ~= 'table' or #s ~= 4 then
      common.fail(fname, 'inverted_residual_setting should be a list of {t, c, n, s} lists')
    end
    for j = 1, 4 do common.positive_int(fname, 'inverted_residual_setting entries', s[j]) end
  end
  local input_channel = M.make_divisible(32 * wm, round)
  local last_channel = M.make_divisible(1280 * math.max(1.0, wm), round)
  local features = nn.Sequential { conv_bn_relu6(3, input_channel, 3, 2) }
  for _, s in ipairs(setting) do
    local t, c, n, stride = s[1], s[2], s[3], s[4]
    local out = M.make_divisible(c * wm, round)
    for i = 1, n do
      features:add(InvertedResidual(input_channel, out, i == 1 and stride or 1, t))
      input_channel = out
    end
  end
  features:add(conv_bn_relu6(input_channel, last_channel, 1))
  self:add_module('features', features)
  self:add_module('classifier', nn.Sequential { nn.Dropout(p), nn.Linear(last_channel, num_classes) })
  A.no_grad(function()
    for _, m in ipairs(self:modules()) do
      local mt = getmetatable(m)
      if mt == nn.Conv2d then
        nn.init.kaiming_normal_(m.weight, { mode = 'fan_out' })
        if m.bias then m.bias:zero_() end
      elseif mt == nn.Linear then
        m.weight:normal_(0, 0.01)
        m.bias:zero_()
      end
    end
  end)
end

function MobileNetV2:forward(x)
  local f = self.features(x)
  local p = nn.functional.adaptive_avg_pool2d(f, 1)
  if eager.frees(self) then eager.consumed(f, p, x) end   -- (lunet.nn.eager)
  return self.classifier(p:flatten(2))
end

function M.mobilenet_v2(opts, ...)
  common.check('models.mobilenet_v2', opts, OPTS, select('#', ...))
  return MobileNetV2(opts, 'models.mobilenet_v2')
end

return M
