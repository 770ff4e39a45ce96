-- lunet.models' MNASNets (B1) as torchvision 0.14's: mnasnet0_5,
-- mnasnet0_75, mnasnet1_0, mnasnet1_3 (layers: a stem and stacks of
-- inverted residuals; classifier; same state_dict keys, version 2's stem
-- scaled by alpha). Options: num_classes = 1000, dropout = 0.2. Batch norms
-- have momentum 1 - 0.9997 (the paper's TensorFlow 0.9997), as torchvision.
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'

local M = {}

local BN_MOMENTUM = 1 - 0.9997
M.BN_MOMENTUM = BN_MOMENTUM

local function bn(c) return nn.BatchNorm2d(c, { momentum = BN_MOMENTUM }) end

local InvertedResidual = eager.own(nn.Module:extend('models.MNASInvertedResidual'))
M.InvertedResidual = InvertedResidual

function InvertedResidual:__init(cin, cout, k, stride, expansion)
  local fname = 'models.mnasnet.InvertedResidual'
  if stride ~= 1 and stride ~= 2 then common.fail(fname, 'stride should be 1 or 2 instead of ' .. tostring(stride)) end
  if k ~= 3 and k ~= 5 then common.fail(fname, 'kernel_size should be 3 or 5 instead of ' .. tostring(k)) end
  local mid = cin * expansion
  self.apply_residual = cin == cout and stride == 1
  self:add_module('layers', nn.Sequential {
    nn.Conv2d(cin, mid, 1, { bias = false }), bn(mid), nn.ReLU(true),   -- pointwise
    nn.Conv2d(mid, mid, k, { padding = math.floor(k / 2), stride = stride, groups = mid, bias = false }),
    bn(mid), nn.ReLU(true),                                              -- depthwise
    nn.Conv2d(mid, cout, 1, { bias = false }), bn(cout),                 -- linear pointwise
  })
end

function InvertedResidual:forward(x)
  if not self.apply_residual then return self.layers(x) end
  local y = self.layers(x)
  local out = y + x
  if eager.frees(self) then eager.consumed(y, out, x) end   -- (lunet.nn.eager)
  return out
end

function InvertedResidual:onnx_export(g, xn, x)
  local yn, y = g:module('layers', xn, x)
  if not self.apply_residual then return yn, y end
  return g:node('Add', { yn, xn }), y + x
end

-- repeats blocks, the first with the stride (and no skip: its map changes)
local function stack(cin, cout, k, stride, exp, repeats)
  local seq = nn.Sequential { InvertedResidual(cin, cout, k, stride, exp) }
  for _ = 2, repeats do seq:add(InvertedResidual(cout, cout, k, 1, exp)) end
  return seq
end

-- val rounded to a multiple of divisor, up unless within 10% (torchvision's)
local function round_to_multiple_of(val, divisor)
  local new = math.max(divisor, math.floor(math.floor(val + divisor / 2) / divisor) * divisor)
  return new >= 0.9 * val and new or new + divisor
end

function M.get_depths(alpha)
  local out = {}
  for i, d in ipairs({ 32, 16, 24, 40, 80, 96, 192, 320 }) do out[i] = round_to_multiple_of(d * alpha, 8) end
  return out
end

local MNASNet = eager.own(nn.Module:extend('models.MNASNet'))
M.MNASNet = MNASNet

local OPTS = common.opts { num_classes = 'number', dropout = 'number' }

function MNASNet:__init(alpha, opts, fname)
  fname = fname or 'models.MNASNet'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local p = common.number_in(fname, 'dropout', opts.dropout, 0.2, 0, 1)
  if type(alpha) ~= 'number' or not (alpha > 0) then
    common.fail(fname, 'alpha should be greater than 0.0 instead of ' .. tostring(alpha))
  end
  self.alpha = alpha
  local d = M.get_depths(alpha)
  self:add_module('layers', nn.Sequential {
    nn.Conv2d(3, d[1], 3, { padding = 1, stride = 2, bias = false }), bn(d[1]), nn.ReLU(true),
    nn.Conv2d(d[1], d[1], 3, { padding = 1, groups = d[1], bias = false }), bn(d[1]), nn.ReLU(true),
    nn.Conv2d(d[1], d[2], 1, { bias = false }), bn(d[2]),
    stack(d[2], d[3], 3, 2, 3, 3), stack(d[3], d[4], 5, 2, 3, 3), stack(d[4], d[5], 5, 2, 6, 3),
    stack(d[5], d[6], 3, 1, 6, 2), stack(d[6], d[7], 5, 2, 6, 4), stack(d[7], d[8], 3, 1, 6, 1),
    nn.Conv2d(d[8], 1280, 1, { bias = false }), bn(1280), nn.ReLU(true),
  })
  self:add_module('classifier', nn.Sequential { nn.Dropout(p, true), nn.Linear(1280, num_classes) })
  A.no_grad(function()
    for _, m in ipairs(self:modules()) do
      local mt = getmetatable(m)
      if mt == nn.Conv2d then
        nn.init.kaiming_normal_(m.weight, { mode = 'fan_out', nonlinearity = 'relu' })
      elseif mt == nn.BatchNorm2d then
        m.weight:fill_(1); m.bias:zero_()
      elseif mt == nn.Linear then
        nn.init.kaiming_uniform_(m.weight, { mode = 'fan_out', nonlinearity = 'sigmoid' })
        m.bias:zero_()
      end
    end
  end)
end

function MNASNet:forward(x)
  local free = eager.frees(self)
  local f = self.layers(x)
  local m = f:mean({ 3, 4 })
  if free then eager.consumed(f, m, x) end   -- (lunet.nn.eager)
  local y = self.classifier(m)
  if free then eager.consumed(m, y, x) end
  return y
end

function MNASNet:onnx_export(g, xn, x)
  xn, x = g:module('layers', xn, x)
  return g:module('classifier', g:node('ReduceMean', { xn }, { axes = { 2, 3 }, keepdims_i = 0 }), x:mean({ 3, 4 }))
end

for name, alpha in pairs({ mnasnet0_5 = 0.5, mnasnet0_75 = 0.75, mnasnet1_0 = 1.0, mnasnet1_3 = 1.3 }) do
  M[name] = function(opts, ...)
    local fname = 'models.' .. name
    common.check(fname, opts, OPTS, select('#', ...))
    return MNASNet(alpha, opts, fname)
  end
end

return M
