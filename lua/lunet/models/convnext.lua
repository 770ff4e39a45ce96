-- lunet.models' ConvNeXts as torchvision 0.14's: convnext_tiny, convnext_small,
-- convnext_base, convnext_large (features: a 4x4 stride 4 stem, stages of
-- CNBlocks and downsampling layers; avgpool; classifier; same state_dict
-- keys). Options: num_classes = 1000, stochastic_depth_prob (0.1 tiny, 0.4
-- small, 0.5 base and large; ramped linearly over the blocks from 0),
-- layer_scale = 1e-6 (the initial value of each block's layer_scale).
local lunet = require 'lunet'
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local F = require 'lunet.nn.functional'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'
local ops = require 'lunet.models.ops'

local M = {}

-- Permute(dims): x:permute(dims), torchvision.ops.misc.Permute with lunet's
-- 1-based dims (torchvision's Permute([0, 2, 3, 1]) is Permute{1, 3, 4, 2})
local Permute = eager.own(nn.Module:extend('models.Permute'))
M.Permute = Permute

function Permute:__init(dims)
  if type(dims) ~= 'table' or #dims == 0 then common.fail('models.Permute', 'dims must be a list of dims') end
  self.dims = { unpack(dims) }
end

function Permute:forward(x) return x:permute(self.dims) end

function Permute:onnx_export(g, xn, x)
  local perm = {}
  for i, d in ipairs(self.dims) do perm[i] = d - 1 end
  return g:node('Transpose', { xn }, { perm = perm }), self(x)
end

function Permute:extra_repr() return '{' .. table.concat(self.dims, ', ') .. '}' end

-- LayerNorm2d(C, {eps}): nn.LayerNorm over the channels of an NCHW tensor
-- (to NHWC, layer_norm, back), as torchvision's
local LayerNorm2d = eager.own(nn.LayerNorm:extend('models.LayerNorm2d'))
M.LayerNorm2d = LayerNorm2d

function LayerNorm2d:forward(x)
  x = F.layer_norm(x:permute(1, 3, 4, 2), self.normalized_shape, self.weight, self.bias, self.eps)
  return x:permute(1, 4, 2, 3)
end

-- ONNX: Transpose, torch 1.13's decomposed layer norm over the last axis, Transpose
function LayerNorm2d:onnx_export(g, xn, x)
  local t = g:node('Transpose', { xn }, { perm = { 0, 2, 3, 1 } })
  local d = g:node('Sub', { t, g:node('ReduceMean', { t }, { axes = { -1 } }) })
  local v = g:node('ReduceMean', { g:node('Pow', { d, g:constant(2, { dtype = x.dtype }) }) }, { axes = { -1 } })
  v = g:node('Sqrt', { g:node('Add', { v, g:constant(self.eps, { dtype = x.dtype }) }) })
  local y = g:node('Div', { d, v })
  y = g:node('Add', { g:node('Mul', { y, g:initializer('weight', self.weight) }), g:initializer('bias', self.bias) })
  return g:node('Transpose', { y }, { perm = { 0, 3, 1, 2 } }), self(x)
end

local function layer_norm2d(c) return LayerNorm2d(c, { eps = 1e-6 }) end

-- x + stochastic_depth(layer_scale * block(x)); block: depthwise 7x7 conv,
-- to NHWC, layer norm, Linear 4x, GELU, Linear back, to NCHW
local CNBlock = eager.own(nn.Module:extend('models.CNBlock'))
M.CNBlock = CNBlock

function CNBlock:__init(dim, layer_scale, sd_prob)
  self:register_parameter('layer_scale', lunet.full({ dim, 1, 1 }, layer_scale):requires_grad_())
  self:add_module('block', nn.Sequential {
    nn.Conv2d(dim, dim, 7, { padding = 3, groups = dim }), Permute { 1, 3, 4, 2 }, nn.LayerNorm(dim, { eps = 1e-6 }),
    nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), Permute { 1, 4, 2, 3 },
  })
  self:add_module('stochastic_depth', ops.StochasticDepth(sd_prob, 'row'))
end

-- (lunet.nn.eager: the block's output (a view: Permute), the scaled map
-- and the dropped one once the sum is made. Left to the collector: the
-- bases of the block's views (the depthwise conv's output under the first
-- Permute, nn.Linear's 2-D products under its NHWC results), which its
-- nn.Sequential cannot free while it frees the views, and F.layer_norm's
-- own intermediates)
function CNBlock:forward(x)
  local b = self.block(x)
  local s = self.layer_scale * b
  local d = self.stochastic_depth(s)
  local y = d + x
  if eager.frees(self) then
    eager.consumed(d, y, x)
    eager.consumed(s, y, x)
    eager.consumed(b, y, x)
  end
  return y
end

function CNBlock:onnx_export(g, xn, x)
  local bn, b = g:module('block', xn, x)
  local sn, s = g:module('stochastic_depth', g:node('Mul', { g:initializer('layer_scale', self.layer_scale), bn }),
    self.layer_scale * b)
  return g:node('Add', { sn, xn }), s + x
end

local ConvNeXt = eager.own(nn.Module:extend('models.ConvNeXt'))
M.ConvNeXt = ConvNeXt

local OPTS = common.opts { num_classes = 'number', stochastic_depth_prob = 'number', layer_scale = 'number' }

-- ConvNeXt(block_setting, opts, fname): block_setting = {{input_channels,
-- out_channels (nil: the last), num_layers}, ...} as torchvision's CNBlockConfig
function ConvNeXt:__init(block_setting, opts, fname)
  fname = fname or 'models.ConvNeXt'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local sd = common.number_in(fname, 'stochastic_depth_prob', opts.stochastic_depth_prob, 0, 0, 1)
  local ls = common.number_in(fname, 'layer_scale', opts.layer_scale, 1e-6, -math.huge, math.huge)
  local features = nn.Sequential { ops.Conv2dNormActivation(3, block_setting[1][1], { kernel_size = 4, stride = 4,
    padding = 0, norm_layer = layer_norm2d, activation_layer = false, bias = true }) }
  local total, id = 0, 0
  for _, c in ipairs(block_setting) do total = total + c[3] end
  for _, c in ipairs(block_setting) do
    local stage = nn.Sequential()
    for _ = 1, c[3] do
      stage:add(CNBlock(c[1], ls, sd * id / (total - 1.0)))
      id = id + 1
    end
    features:add(stage)
    if c[2] then features:add(nn.Sequential { layer_norm2d(c[1]), nn.Conv2d(c[1], c[2], 2, { stride = 2 }) }) end
  end
  self:add_module('features', features)
  self:add_module('avgpool', nn.AdaptiveAvgPool2d(1))
  local last = block_setting[#block_setting]
  local cout = last[2] or last[1]
  self:add_module('classifier', nn.Sequential { layer_norm2d(cout), nn.Flatten(2), nn.Linear(cout, num_classes) })
  A.no_grad(function()
    for _, m in ipairs(self:modules()) do
      local mt = getmetatable(m)
      if mt == nn.Conv2d or mt == nn.Linear then
        -- (torch's trunc_normal_(w, std = 0.02) cuts at +-2, 100 std: the same
        -- distribution as normal_, which draws it in one pass)
        m.weight:normal_(0, 0.02)
        if m.bias then m.bias:zero_() end
      end
    end
  end)
end

function ConvNeXt:forward(x)
  local free = eager.frees(self)
  local f = self.features(x)
  local p = self.avgpool(f)
  if free then eager.consumed(f, p, x) end   -- (lunet.nn.eager)
  local y = self.classifier(p)
  if free then eager.consumed(p, y, x) end
  return y
end

function ConvNeXt:onnx_export(g, xn, x) return g:sequence({ 'features', 'avgpool', 'classifier' }, xn, x) end

-- name = {block_setting, default stochastic_depth_prob}
local ARCH = {
  convnext_tiny = { { { 96, 192, 3 }, { 192, 384, 3 }, { 384, 768, 9 }, { 768, nil, 3 } }, 0.1 },
  convnext_small = { { { 96, 192, 3 }, { 192, 384, 3 }, { 384, 768, 27 }, { 768, nil, 3 } }, 0.4 },
  convnext_base = { { { 128, 256, 3 }, { 256, 512, 3 }, { 512, 1024, 27 }, { 1024, nil, 3 } }, 0.5 },
  convnext_large = { { { 192, 384, 3 }, { 384, 768, 3 }, { 768, 1536, 27 }, { 1536, nil, 3 } }, 0.5 },
}

for name, a in pairs(ARCH) do
  M[name] = function(opts, ...)
    local fname = 'models.' .. name
    opts = common.check(fname, opts, OPTS, select('#', ...))
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    if o.stochastic_depth_prob == nil then o.stochastic_depth_prob = a[2] end
    return ConvNeXt(a[1], o, fname)
  end
end

return M
