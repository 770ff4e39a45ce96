-- lunet.models' RegNets as torchvision 0.14's: regnet_y_400mf .. regnet_y_128gf
-- (with squeeze-excitation) and regnet_x_400mf .. regnet_x_32gf (stem,
-- trunk_output of AnyStages 'block1'.. holding ResBottleneckBlocks
-- 'block1-0'.., avgpool, fc; same state_dict keys). Options: num_classes = 1000.
-- BlockParams.from_init_params quantises the widths as torchvision does, in
-- float32 tensor ops (torch's arange * w_a is float32: the rounding follows it).
local lunet = require 'lunet'
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'
local ops = require 'lunet.models.ops'
local make_divisible = require('lunet.models.mobilenetv2').make_divisible

local M = {}

-- Python's round(): halves to even
local function pyround(v)
  local f = math.floor(v)
  local d = v - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then return f + 1 end
  return f
end

local function cna(cin, cout, k, stride, groups, act)
  return ops.Conv2dNormActivation(cin, cout, { kernel_size = k, stride = stride, groups = groups,
    activation_layer = act and nn.ReLU or false })
end

-- 3x3 stride 2 conv, batch norm, ReLU
local SimpleStemIN = eager.own(ops.Conv2dNormActivation:extend('models.SimpleStemIN'))
M.SimpleStemIN = SimpleStemIN

function SimpleStemIN:__init(cin, cout)
  ops.Conv2dNormActivation.__init(self, cin, cout, { kernel_size = 3, stride = 2 })
end

-- 1x1, 3x3 grouped [+ SE], 1x1 as a Sequential a, b, (se,) c
local BottleneckTransform = eager.own(nn.Sequential:extend('models.BottleneckTransform'))
M.BottleneckTransform = BottleneckTransform

function BottleneckTransform:__init(win, wout, stride, group_width, bottleneck_multiplier, se_ratio)
  nn.Sequential.__init(self)
  local w_b = pyround(wout * bottleneck_multiplier)
  local g = math.floor(w_b / group_width)
  self:add(cna(win, w_b, 1, 1, 1, true), 'a')
  self:add(cna(w_b, w_b, 3, stride, g, true), 'b')
  if se_ratio and se_ratio ~= 0 then
    -- (the SE reduction is relative to the block's input width)
    self:add(ops.SqueezeExcitation(w_b, pyround(se_ratio * win)), 'se')
  end
  self:add(cna(w_b, wout, 1, 1, 1, false), 'c')
end

-- relu(x + f(x)), x projected (1x1 conv, bn) when the shape changes
local ResBottleneckBlock = eager.own(nn.Module:extend('models.ResBottleneckBlock'))
M.ResBottleneckBlock = ResBottleneckBlock

function ResBottleneckBlock:__init(win, wout, stride, group_width, bottleneck_multiplier, se_ratio)
  if win ~= wout or stride ~= 1 then self:add_module('proj', cna(win, wout, 1, stride, 1, false)) end
  self:add_module('f', BottleneckTransform(win, wout, stride, group_width or 1, bottleneck_multiplier or 1, se_ratio))
  self:add_module('activation', nn.ReLU(true))
end

function ResBottleneckBlock:forward(x)
  local proj = self.proj
  local s = proj and proj(x) or x
  local f = self.f(x)
  local a = s + f
  local y = self.activation(a)
  -- (lunet.nn.eager: f's output and the projection; the sum too unless the
  -- activation was in place)
  if eager.frees(self) then
    eager.consumed(a, y, x)
    eager.residual(f, s, proj, y, x)
  end
  return y
end

function ResBottleneckBlock:onnx_export(g, xn, x)
  local sn, s = xn, x
  if self.proj then sn, s = g:module('proj', xn, x) end
  local fn, f = g:module('f', xn, x)
  return g:module('activation', g:node('Add', { sn, fn }), s + f)
end

-- a stage: depth blocks 'block<stage>-<i>' (0-based i), the first with stride
local AnyStage = eager.own(nn.Sequential:extend('models.AnyStage'))
M.AnyStage = AnyStage

function AnyStage:__init(win, wout, stride, depth, group_width, bottleneck_multiplier, se_ratio, stage_index)
  nn.Sequential.__init(self)
  for i = 0, depth - 1 do
    self:add(ResBottleneckBlock(i == 0 and win or wout, wout, i == 0 and stride or 1, group_width,
      bottleneck_multiplier, se_ratio), ('block%d-%d'):format(stage_index, i))
  end
end

-- torchvision's BlockParams.from_init_params: per stage {width, stride, depth,
-- group_width, bottleneck_multiplier}
function M.block_params(depth, w_0, w_a, w_m, group_width, bottleneck_multiplier, se_ratio)
  if w_a < 0 or w_0 <= 0 or w_m <= 1 or w_0 % 8 ~= 0 then error('models.RegNet: invalid RegNet settings', 2) end
  bottleneck_multiplier = bottleneck_multiplier or 1.0
  local QUANT = 8
  local widths_cont = lunet.arange(depth):float() * w_a + w_0
  local capacity = ((widths_cont / w_0):log() / math.log(w_m)):round()
  local bw = ((lunet.pow(w_m, capacity) * w_0) / QUANT):round() * QUANT
  local widths = {}
  for i = 1, depth do widths[i] = math.floor(bw[i]:item()) end
  -- stages: runs of equal widths
  local stages = {}
  for i = 1, depth do
    if i == 1 or widths[i] ~= widths[i - 1] then stages[#stages + 1] = { widths[i], 2, 0, group_width, bottleneck_multiplier } end
    local s = stages[#stages]
    s[3] = s[3] + 1
  end
  -- widths and group widths made compatible (_adjust_widths_groups_compatibilty)
  for _, s in ipairs(stages) do
    local w_bot = math.floor(s[1] * s[5])
    local g = math.min(s[4], w_bot)
    s[1] = math.floor(make_divisible(w_bot, g) / s[5])
    s[4] = g
  end
  return stages, se_ratio
end

local RegNet = eager.own(nn.Module:extend('models.RegNet'))
M.RegNet = RegNet

local OPTS = common.opts { num_classes = 'number' }

-- RegNet(stages, se_ratio, opts, fname): stages as M.block_params returns them
function RegNet:__init(stages, se_ratio, opts, fname)
  fname = fname or 'models.RegNet'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local stem_width = 32
  self:add_module('stem', SimpleStemIN(3, stem_width))
  local trunk, width = nn.Sequential(), stem_width
  for i, s in ipairs(stages) do
    trunk:add(AnyStage(width, s[1], s[2], s[3], s[4], s[5], se_ratio, i), 'block' .. i)
    width = s[1]
  end
  self:add_module('trunk_output', trunk)
  self:add_module('avgpool', nn.AdaptiveAvgPool2d(1))
  self:add_module('fc', nn.Linear(width, num_classes))
  -- ResNet-style init: normal(0, sqrt(2 / fan_out)) convs, unit batch norms, normal(0, 0.01) fc
  A.no_grad(function()
    for _, m in ipairs(self:modules()) do
      local mt = getmetatable(m)
      if mt == nn.Conv2d then
        local k = m.kernel_size
        m.weight:normal_(0, math.sqrt(2 / (k[1] * k[2] * m.out_channels)))
      elseif mt == nn.BatchNorm2d then
        m.weight:fill_(1); m.bias:zero_()
      elseif mt == nn.Linear then
        m.weight:normal_(0, 0.01); m.bias:zero_()
      end
    end
  end)
end

local TRUNK = { 'stem', 'trunk_output', 'avgpool' }

-- (lunet.nn.eager: each map once consumed, the pooled map's view before its base)
function RegNet:forward(x)
  local free = eager.frees(self)
  local h = x
  for _, c in ipairs(TRUNK) do
    local nxt = self[c](h)
    if free then eager.consumed(h, nxt, x) end
    h = nxt
  end
  local flat = h:flatten(2)
  local y = self.fc(flat)
  if free then
    eager.consumed(flat, y, x)
    eager.consumed(h, y, x)
  end
  return y
end

function RegNet:onnx_export(g, xn, x)
  for _, c in ipairs(TRUNK) do xn, x = g:module(c, xn, x) end
  return g:module('fc', g:node('Flatten', { xn }, { axis_i = 1 }), x:flatten(2))
end

-- name = {depth, w_0, w_a, w_m, group_width, se_ratio}
local ARCH = {
  regnet_y_400mf = { 16, 48, 27.89, 2.09, 8, 0.25 }, regnet_y_800mf = { 14, 56, 38.84, 2.4, 16, 0.25 },
  regnet_y_1_6gf = { 27, 48, 20.71, 2.65, 24, 0.25 }, regnet_y_3_2gf = { 21, 80, 42.63, 2.66, 24, 0.25 },
  regnet_y_8gf = { 17, 192, 76.82, 2.19, 56, 0.25 }, regnet_y_16gf = { 18, 200, 106.23, 2.48, 112, 0.25 },
  regnet_y_32gf = { 20, 232, 115.89, 2.53, 232, 0.25 }, regnet_y_128gf = { 27, 456, 160.83, 2.52, 264, 0.25 },
  regnet_x_400mf = { 22, 24, 24.48, 2.54, 16 }, regnet_x_800mf = { 16, 56, 35.73, 2.28, 16 },
  regnet_x_1_6gf = { 18, 80, 34.01, 2.25, 24 }, regnet_x_3_2gf = { 25, 88, 26.31, 2.25, 48 },
  regnet_x_8gf = { 23, 80, 49.56, 2.88, 120 }, regnet_x_16gf = { 22, 216, 55.59, 2.1, 128 },
  regnet_x_32gf = { 23, 320, 69.86, 2.0, 168 },
}
M.ARCH = ARCH

for name, a in pairs(ARCH) do
  M[name] = function(opts, ...)
    local fname = 'models.' .. name
    common.check(fname, opts, OPTS, select('#', ...))
    local stages, se = M.block_params(a[1], a[2], a[3], a[4], a[5], 1.0, a[6])
    return RegNet(stages, se, opts, fname)
  end
end

return M
