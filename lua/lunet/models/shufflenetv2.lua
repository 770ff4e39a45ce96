-- lunet.models' ShuffleNet V2s as torchvision 0.14's: shufflenet_v2_x0_5,
-- shufflenet_v2_x1_0, shufflenet_v2_x1_5, shufflenet_v2_x2_0 (conv1,
-- maxpool, stage2-4 of InvertedResidual blocks, conv5, fc; same state_dict
-- keys). Options: num_classes = 1000. Initialisation: PyTorch's layer
-- defaults, as torchvision (it sets none).
local nn = require 'lunet.nn'
local F = require 'lunet.nn.functional'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'
local function cat(list, dim) return require('lunet').cat(list, dim) end

local M = {}

-- torchvision's channel_shuffle (view, transpose, view) is torch's
-- F.channel_shuffle: the same permutation of channels
M.channel_shuffle = F.channel_shuffle

local InvertedResidual = eager.own(nn.Module:extend('models.ShuffleInvertedResidual'))
M.InvertedResidual = InvertedResidual

local function depthwise(c, stride)
  return nn.Conv2d(c, c, 3, { stride = stride, padding = 1, groups = c, bias = false })
end

function InvertedResidual:__init(inp, oup, stride)
  local fname = 'models.shufflenetv2.InvertedResidual'
  if not (stride >= 1 and stride <= 3) then common.fail(fname, 'illegal stride value') end
  local bf = math.floor(oup / 2)
  if stride == 1 and inp ~= bf * 2 then
    common.fail(fname, ('Invalid combination of stride %d, inp %d and oup %d values. If stride == 1 then inp '
      .. 'should be equal to oup // 2 << 1.'):format(stride, inp, oup))
  end
  self.stride = stride
  -- (stride 1: an empty branch1, as torchvision's, so no keys)
  local b1 = nn.Sequential()
  if stride > 1 then
    b1:add(depthwise(inp, stride)):add(nn.BatchNorm2d(inp)):add(nn.Conv2d(inp, bf, 1, { bias = false }))
      :add(nn.BatchNorm2d(bf)):add(nn.ReLU(true))
  end
  self:add_module('branch1', b1)
  self:add_module('branch2', nn.Sequential {
    nn.Conv2d(stride > 1 and inp or bf, bf, 1, { bias = false }), nn.BatchNorm2d(bf), nn.ReLU(true),
    depthwise(bf, stride), nn.BatchNorm2d(bf),
    nn.Conv2d(bf, bf, 1, { bias = false }), nn.BatchNorm2d(bf), nn.ReLU(true),
  })
end

-- (lunet.nn.eager: the branches' outputs once concatenated, the
-- concatenation once shuffled (a copy); the halves of x, views that would
-- hold its storage, once consumed: the views only, never x)
function InvertedResidual:forward(x)
  local free = eager.frees(self)
  local a, b, x2
  if self.stride == 1 then
    a, x2 = unpack(x:chunk(2, 2))
    b = self.branch2(x2)
  else
    a, b = self.branch1(x), self.branch2(x)
  end
  local out = cat({ a, b }, 2)
  local y = F.channel_shuffle(out, 2)
  if free then
    eager.consumed(a, out, x)
    eager.consumed(b, out, x)
    if x2 then eager.consumed(x2, out, x) end
    eager.consumed(out, y, x)
  end
  return y
end

-- ONNX: the halves as Slices, a Concat, the shuffle as Reshape, Transpose, Reshape (torch 1.13's ops)
function InvertedResidual:onnx_export(g, xn, x)
  local i64 = { dtype = 'int64' }
  local an, a, bn, b
  if self.stride == 1 then
    local c = x:size(2)
    local x1, x2 = unpack(x:chunk(2, 2))
    local axes = g:constant({ 1 }, i64)
    an, a = g:node('Slice', { xn, g:constant({ 0 }, i64), g:constant({ c / 2 }, i64), axes }), x1
    bn, b = g:module('branch2', g:node('Slice', { xn, g:constant({ c / 2 }, i64), g:constant({ c }, i64), axes }), x2)
  else
    an, a = g:module('branch1', xn, x)
    bn, b = g:module('branch2', xn, x)
  end
  local out = cat({ a, b }, 2)
  local n, c, h, w = unpack(out:size())
  local on = g:node('Concat', { an, bn }, { axis_i = 1 })
  on = g:node('Reshape', { on, g:constant({ 0, 2, c / 2, h, w }, i64) })
  on = g:node('Transpose', { on }, { perm = { 0, 2, 1, 3, 4 } })
  on = g:node('Reshape', { on, g:constant({ 0, c, h, w }, i64) })
  return on, F.channel_shuffle(out, 2)
end

local ShuffleNetV2 = eager.own(nn.Module:extend('models.ShuffleNetV2'))
M.ShuffleNetV2 = ShuffleNetV2

local OPTS = common.opts { num_classes = 'number' }

local function conv_bn_relu(cin, cout, k, stride)
  return nn.Sequential { nn.Conv2d(cin, cout, k, { stride = stride, padding = math.floor(k / 2), bias = false }),
    nn.BatchNorm2d(cout), nn.ReLU(true) }
end

-- ShuffleNetV2(stages_repeats (3), stages_out_channels (5), opts, fname)
function ShuffleNetV2:__init(repeats, outs, opts, fname)
  fname = fname or 'models.ShuffleNetV2'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  if type(repeats) ~= 'table' or #repeats ~= 3 then common.fail(fname, 'expected stages_repeats as list of 3 positive ints') end
  if type(outs) ~= 'table' or #outs ~= 5 then common.fail(fname, 'expected stages_out_channels as list of 5 positive ints') end
  self:add_module('conv1', conv_bn_relu(3, outs[1], 3, 2))
  self:add_module('maxpool', nn.MaxPool2d(3, { stride = 2, padding = 1 }))
  local cin = outs[1]
  for s = 1, 3 do
    local seq = nn.Sequential { InvertedResidual(cin, outs[s + 1], 2) }
    for _ = 2, repeats[s] do seq:add(InvertedResidual(outs[s + 1], outs[s + 1], 1)) end
    self:add_module('stage' .. (s + 1), seq)
    cin = outs[s + 1]
  end
  self:add_module('conv5', conv_bn_relu(cin, outs[5], 1, 1))
  self:add_module('fc', nn.Linear(outs[5], num_classes))
end

local TRUNK = { 'conv1', 'maxpool', 'stage2', 'stage3', 'stage4', 'conv5' }

-- (lunet.nn.eager: each map freed once the next module consumed it)
function ShuffleNetV2:forward(x)
  local free = eager.frees(self)
  local h = x
  for i = 1, #TRUNK do
    local nxt = self[TRUNK[i]](h)
    if free then eager.consumed(h, nxt, x) end
    h = nxt
  end
  local m = h:mean({ 3, 4 })   -- (global pool)
  if free then eager.consumed(h, m, x) end
  local y = self.fc(m)
  if free then eager.consumed(m, y, x) end
  return y
end

function ShuffleNetV2:onnx_export(g, xn, x)
  for _, c in ipairs(TRUNK) do xn, x = g:module(c, xn, x) end
  return g:module('fc', g:node('ReduceMean', { xn }, { axes = { 2, 3 }, keepdims_i = 0 }), x:mean({ 3, 4 }))
end

for name, a in pairs({ shufflenet_v2_x0_5 = { 24, 48, 96, 192, 1024 }, shufflenet_v2_x1_0 = { 24, 116, 232, 464, 1024 },
                       shufflenet_v2_x1_5 = { 24, 176, 352, 704, 1024 }, shufflenet_v2_x2_0 = { 24, 244, 488, 976, 2048 } }) do
  M[name] = function(opts, ...)
    local fname = 'models.' .. name
    common.check(fname, opts, OPTS, select('#', ...))
    return ShuffleNetV2({ 4, 8, 4 }, a, opts, fname)
  end
end

return M
