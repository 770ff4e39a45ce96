-- lunet.models.inception_v3 as torchvision 0.14's Inception3 (Conv2d_1a_3x3
-- ... Mixed_5b-7c of InceptionA-E, AuxLogits, fc; same state_dict keys).
-- Options: num_classes = 1000, aux_logits = true, transform_input = false,
-- init_weights = true (truncated normal, std 0.1; AuxLogits.fc 0.001, as
-- torchvision's stddev attributes resolve), dropout = 0.5. Input at least
-- 75x75 (eval; train with aux_logits needs the aux head's 5x5 pool: ~299).
-- Output: the logits; in train mode with aux_logits a table
-- {logits =, aux_logits =} as torchvision's InceptionOutputs.
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local F = require 'lunet.nn.functional'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'
local classify_flat = require('lunet.models.ops').classify_flat
local googlenet = require 'lunet.models.googlenet'
local function cat(list) return require('lunet').cat(list, 2) end

local M = {}
local BasicConv2d = googlenet.BasicConv2d
M.BasicConv2d = BasicConv2d

-- A block is its children plus a plan: branches (concatenated), each a list
-- of steps: a child's name, a pool {'avg' | 'max', k, stride, padding}, or
-- {split = {a, b}} (cat(a(x), b(x))). forward and the ONNX export read it.
-- (free: a split's halves freed once concatenated, lunet.nn.eager)
local function step(self, s, x, free)
  if type(s) == 'string' then return self[s](x) end
  if s.split then
    local a, b = self[s.split[1]](x), self[s.split[2]](x)
    local y = cat({ a, b })
    if free then
      eager.consumed(a, y, x)
      eager.consumed(b, y, x)
    end
    return y
  end
  local fn = s[1] == 'avg' and F.avg_pool2d or F.max_pool2d
  return fn(x, s[2], { stride = s[3], padding = s[4] })
end

local function emit(self, g, s, xn, x)
  if type(s) == 'string' then return g:module(s, xn, x) end
  if s.split then
    local an, a = g:module(s.split[1], xn, x)
    local bn, b = g:module(s.split[2], xn, x)
    return g:node('Concat', { an, bn }, { axis_i = 1 }), cat({ a, b })
  end
  local p = s[4]
  local attrs = { kernel_shape = { s[2], s[2] }, strides = { s[3], s[3] }, pads = { p, p, p, p } }
  if s[1] == 'avg' then attrs.count_include_pad_i = 1 end
  return g:node(s[1] == 'avg' and 'AveragePool' or 'MaxPool', { xn }, attrs), step(self, s, x)
end

-- (lunet.nn.eager: each step's input once the step ran, and the branches'
-- outputs once concatenated; never the block's input x)
local function block(name, build, plan)
  local B = eager.own(nn.Module:extend('models.' .. name))
  B.__init = build
  function B:forward(x)
    local free = eager.frees(self)
    local outs = {}
    for i, br in ipairs(plan) do
      local y = x
      for _, s in ipairs(br) do
        local nxt = step(self, s, y, free)
        if free then eager.consumed(y, nxt, x) end
        y = nxt
      end
      outs[i] = y
    end
    local out = cat(outs)
    if free then
      for i = 1, #outs do eager.consumed(outs[i], out, x) end
    end
    return out
  end
  function B:onnx_export(g, xn, x)
    local names, outs = {}, {}
    for i, br in ipairs(plan) do
      local yn, y = xn, x
      for _, s in ipairs(br) do yn, y = emit(self, g, s, yn, y) end
      names[i], outs[i] = yn, y
    end
    return g:node('Concat', names, { axis_i = 1 }), cat(outs)
  end
  M[name] = B
  return B
end

local function conv(self, name, cin, cout, k, stride, pad) self:add_module(name, BasicConv2d(cin, cout, k, { stride = stride, padding = pad })) end
local AVG3 = { 'avg', 3, 1, 1 }
local MAX3 = { 'max', 3, 2, 0 }

local InceptionA = block('InceptionA', function(self, cin, pool_features)
  conv(self, 'branch1x1', cin, 64, 1)
  conv(self, 'branch5x5_1', cin, 48, 1); conv(self, 'branch5x5_2', 48, 64, 5, 1, 2)
  conv(self, 'branch3x3dbl_1', cin, 64, 1); conv(self, 'branch3x3dbl_2', 64, 96, 3, 1, 1)
  conv(self, 'branch3x3dbl_3', 96, 96, 3, 1, 1)
  conv(self, 'branch_pool', cin, pool_features, 1)
end, { { 'branch1x1' }, { 'branch5x5_1', 'branch5x5_2' }, { 'branch3x3dbl_1', 'branch3x3dbl_2', 'branch3x3dbl_3' },
  { AVG3, 'branch_pool' } })

local InceptionB = block('InceptionB', function(self, cin)
  conv(self, 'branch3x3', cin, 384, 3, 2)
  conv(self, 'branch3x3dbl_1', cin, 64, 1); conv(self, 'branch3x3dbl_2', 64, 96, 3, 1, 1)
  conv(self, 'branch3x3dbl_3', 96, 96, 3, 2)
end, { { 'branch3x3' }, { 'branch3x3dbl_1', 'branch3x3dbl_2', 'branch3x3dbl_3' }, { MAX3 } })

local InceptionC = block('InceptionC', function(self, cin, c7)
  conv(self, 'branch1x1', cin, 192, 1)
  conv(self, 'branch7x7_1', cin, c7, 1); conv(self, 'branch7x7_2', c7, c7, { 1, 7 }, 1, { 0, 3 })
  conv(self, 'branch7x7_3', c7, 192, { 7, 1 }, 1, { 3, 0 })
  conv(self, 'branch7x7dbl_1', cin, c7, 1); conv(self, 'branch7x7dbl_2', c7, c7, { 7, 1 }, 1, { 3, 0 })
  conv(self, 'branch7x7dbl_3', c7, c7, { 1, 7 }, 1, { 0, 3 }); conv(self, 'branch7x7dbl_4', c7, c7, { 7, 1 }, 1, { 3, 0 })
  conv(self, 'branch7x7dbl_5', c7, 192, { 1, 7 }, 1, { 0, 3 })
  conv(self, 'branch_pool', cin, 192, 1)
end, { { 'branch1x1' }, { 'branch7x7_1', 'branch7x7_2', 'branch7x7_3' },
  { 'branch7x7dbl_1', 'branch7x7dbl_2', 'branch7x7dbl_3', 'branch7x7dbl_4', 'branch7x7dbl_5' }, { AVG3, 'branch_pool' } })

local InceptionD = block('InceptionD', function(self, cin)
  conv(self, 'branch3x3_1', cin, 192, 1); conv(self, 'branch3x3_2', 192, 320, 3, 2)
  conv(self, 'branch7x7x3_1', cin, 192, 1); conv(self, 'branch7x7x3_2', 192, 192, { 1, 7 }, 1, { 0, 3 })
  conv(self, 'branch7x7x3_3', 192, 192, { 7, 1 }, 1, { 3, 0 }); conv(self, 'branch7x7x3_4', 192, 192, 3, 2)
end, { { 'branch3x3_1', 'branch3x3_2' }, { 'branch7x7x3_1', 'branch7x7x3_2', 'branch7x7x3_3', 'branch7x7x3_4' }, { MAX3 } })

local InceptionE = block('InceptionE', function(self, cin)
  conv(self, 'branch1x1', cin, 320, 1)
  conv(self, 'branch3x3_1', cin, 384, 1)
  conv(self, 'branch3x3_2a', 384, 384, { 1, 3 }, 1, { 0, 1 }); conv(self, 'branch3x3_2b', 384, 384, { 3, 1 }, 1, { 1, 0 })
  conv(self, 'branch3x3dbl_1', cin, 448, 1); conv(self, 'branch3x3dbl_2', 448, 384, 3, 1, 1)
  conv(self, 'branch3x3dbl_3a', 384, 384, { 1, 3 }, 1, { 0, 1 }); conv(self, 'branch3x3dbl_3b', 384, 384, { 3, 1 }, 1, { 1, 0 })
  conv(self, 'branch_pool', cin, 192, 1)
end, { { 'branch1x1' }, { 'branch3x3_1', { split = { 'branch3x3_2a', 'branch3x3_2b' } } },
  { 'branch3x3dbl_1', 'branch3x3dbl_2', { split = { 'branch3x3dbl_3a', 'branch3x3dbl_3b' } } }, { AVG3, 'branch_pool' } })

local InceptionAux = eager.own(nn.Module:extend('models.InceptionV3Aux'))
M.InceptionAux = InceptionAux

function InceptionAux:__init(cin, num_classes)
  conv(self, 'conv0', cin, 128, 1)
  conv(self, 'conv1', 128, 768, 5)
  self:add_module('fc', nn.Linear(768, num_classes))
end

-- (lunet.nn.eager: each map once consumed, the flattened view before its base)
function InceptionAux:forward(x)
  local free = eager.frees(self)
  local p = F.avg_pool2d(x, 5, { stride = 3 })
  local a = self.conv0(p)
  if free then eager.consumed(p, a, x) end
  local b = self.conv1(a)
  if free then eager.consumed(a, b, x) end
  local g = F.adaptive_avg_pool2d(b, 1)
  if free then eager.consumed(b, g, x) end
  return classify_flat(self.fc, g, x, free)
end

local Inception3 = eager.own(nn.Module:extend('models.Inception3'))
M.Inception3 = Inception3

local OPTS = common.opts { num_classes = 'number', aux_logits = 'boolean', transform_input = 'boolean',
  init_weights = 'boolean', dropout = 'number' }

local TRUNK1 = { 'Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'maxpool1', 'Conv2d_3b_1x1', 'Conv2d_4a_3x3',
  'maxpool2', 'Mixed_5b', 'Mixed_5c', 'Mixed_5d', 'Mixed_6a', 'Mixed_6b', 'Mixed_6c', 'Mixed_6d', 'Mixed_6e' }
local TRUNK2 = { 'Mixed_7a', 'Mixed_7b', 'Mixed_7c', 'avgpool' }

function Inception3:__init(opts, fname)
  fname = fname or 'models.Inception3'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local p = common.number_in(fname, 'dropout', opts.dropout, 0.5, 0, 1)
  self.aux_logits = opts.aux_logits ~= false
  self.transform_input = opts.transform_input == true
  conv(self, 'Conv2d_1a_3x3', 3, 32, 3, 2)
  conv(self, 'Conv2d_2a_3x3', 32, 32, 3)
  conv(self, 'Conv2d_2b_3x3', 32, 64, 3, 1, 1)
  self:add_module('maxpool1', nn.MaxPool2d(3, { stride = 2 }))
  conv(self, 'Conv2d_3b_1x1', 64, 80, 1)
  conv(self, 'Conv2d_4a_3x3', 80, 192, 3)
  self:add_module('maxpool2', nn.MaxPool2d(3, { stride = 2 }))
  self:add_module('Mixed_5b', InceptionA(192, 32))
  self:add_module('Mixed_5c', InceptionA(256, 64))
  self:add_module('Mixed_5d', InceptionA(288, 64))
  self:add_module('Mixed_6a', InceptionB(288))
  self:add_module('Mixed_6b', InceptionC(768, 128))
  self:add_module('Mixed_6c', InceptionC(768, 160))
  self:add_module('Mixed_6d', InceptionC(768, 160))
  self:add_module('Mixed_6e', InceptionC(768, 192))
  if self.aux_logits then self:add_module('AuxLogits', InceptionAux(768, num_classes)) end
  self:add_module('Mixed_7a', InceptionD(768))
  self:add_module('Mixed_7b', InceptionE(1280))
  self:add_module('Mixed_7c', InceptionE(2048))
  self:add_module('avgpool', nn.AdaptiveAvgPool2d({ 1, 1 }))
  self:add_module('dropout', nn.Dropout(p))
  self:add_module('fc', nn.Linear(2048, num_classes))
  if opts.init_weights ~= false then
    A.no_grad(function()
      local aux_fc = self.AuxLogits and self.AuxLogits.fc
      for _, m in ipairs(self:modules()) do
        local mt = getmetatable(m)
        -- (torchvision's conv1.stddev = 0.01 sits on the BasicConv2d, not its conv: 0.1 there too)
        if mt == nn.Conv2d or mt == nn.Linear then nn.init.trunc_normal_(m.weight, 0, m == aux_fc and 0.001 or 0.1, -2, 2)
        elseif mt == nn.BatchNorm2d then m.weight:fill_(1); m.bias:zero_() end
      end
    end)
  end
end

-- (lunet.nn.eager: each map freed once the next module consumed it, as
-- GoogLeNet's; the aux head's output is returned: kept)
function Inception3:forward(x)
  local free = eager.frees(self)
  local h = x
  if self.transform_input then h = googlenet.transform_input(x) end
  h = googlenet.trunk(self, TRUNK1, h, x, free)
  local aux = self.training and self.aux_logits and self.AuxLogits(h) or nil
  h = googlenet.trunk(self, TRUNK2, h, aux and googlenet.aux_keep(aux, h, x) or x, free)
  local d = self.dropout(h)
  local flat = d:flatten(2)
  local y = self.fc(flat)
  if free then
    eager.consumed(flat, y, x)
    eager.consumed(d, y, x)
    eager.consumed(h, y, x)
  end
  if aux then return { logits = y, aux_logits = aux } end
  return y
end

-- ONNX: the eval graph (no aux head)
function Inception3:onnx_export(g, xn, x)
  if self.transform_input then xn, x = googlenet.export_transform_input(g, xn, x) end
  for _, c in ipairs(TRUNK1) do xn, x = g:module(c, xn, x) end
  for _, c in ipairs(TRUNK2) do xn, x = g:module(c, xn, x) end
  return g:module('fc', g:node('Flatten', { xn }, { axis_i = 1 }), x:flatten(2))
end

function M.inception_v3(opts, ...)
  common.check('models.inception_v3', opts, OPTS, select('#', ...))
  return Inception3(opts, 'models.inception_v3')
end

return M
