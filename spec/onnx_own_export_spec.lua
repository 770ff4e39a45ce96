-- lunet.onnx.export of modules with their own forward: a class's
-- :onnx_export(g, x_name, x) method (lua/lunet/onnx/export_ctx.lua), and
-- lunet.models' DenseNet through it. Files load back with the module's
-- outputs and pass onnx.checker where python3-onnx is installed.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local nn = lunet.nn

local tmp = os.tmpname()
local rc = os.execute("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1")
local has_onnx = rc == 0 or rc == true
-- onnx.checker, and the graph's op types counted ("Conv=3,Relu=2")
local function check_model(path)
  local p = io.popen(("/usr/bin/python3 -c \"import onnx,sys,collections; m=onnx.load(sys.argv[1]); "
    .. "onnx.checker.check_model(m, full_check=True); c=collections.Counter(n.op_type for n in m.graph.node); "
    .. "print(','.join('%%s=%%d' %% kv for kv in sorted(c.items())))\" '%s' 2>&1"):format(path))
  local text = p:read('*a')
  p:close()
  return text
end

-- the README's example: forward is lunet.cat({self.a(x), self.b(x)}, 2)
local Two = nn.Module:extend('my.Two')
function Two:__init()
  self.a = nn.Conv2d(3, 4, 3, { padding = 1 })
  self.b = nn.Sequential(nn.Conv2d(3, 2, 1), nn.BatchNorm2d(2), nn.ReLU())
end
function Two:forward(x) return lunet.cat({ self.a(x), self.b(x) }, 2) end
function Two:onnx_export(g, xn, x)
  local an, a = g:module('a', xn, x)
  local bn, b = g:module('b', xn, x)
  return g:node('Concat', { an, bn }, { axis_i = 1 }), lunet.cat({ a, b }, 2)
end

-- x * w + 1 with a learnt w: an initializer and a Constant; the value left
-- to the walk (only a name returned)
local Scale = nn.Module:extend('my.Scale')
function Scale:__init(c) self.w = lunet.randn(c, 1, 1):requires_grad_() end
function Scale:forward(x) return x * self.w + 1 end
function Scale:onnx_export(g, xn)
  local y = g:node('Mul', { xn, g:initializer('w', self.w) })
  return g:node('Add', { y, g:constant(1) })
end

local function round_trip(m, x, opts)
  m:eval()
  lunet.onnx.export(m, x, tmp, opts)
  local back = lunet.onnx.load(tmp)
  assert.is_true(fx.rel(back(x), m(x)) < 1e-5)
  return back
end

describe('onnx.export: a module\'s own :onnx_export', function()
  after_each(function() os.remove(tmp) end)

  it('the README example: children by the walk, Concat, batch norm folded; checker; dynamic batch', function()
    local m = nn.Sequential(Two(), nn.ReLU(), Scale(6))
    local back = round_trip(m, lunet.randn(1, 3, 5, 5), { dynamic_axes = { input = { 'batch' }, output = { 'batch' } } })
    local x3 = lunet.randn(3, 3, 5, 5)
    assert.is_true(fx.rel(back(x3), m(x3)) < 1e-5)
    -- the initializer is named by the module's state_dict key (2.w; the
    -- loaded graph's parameter names have no dots)
    assert.is_true(lunet.equal(back:state_dict()._2_w, m[3].w:detach()))
    if has_onnx then
      assert.equal('Add=1,Concat=1,Constant=1,Conv=2,Mul=1,Relu=2\n', check_model(tmp))
    else print('onnx_own_export_spec: python3-onnx not installed, onnx.checker not run') end
  end)

  it('at the top, on non-contiguous and empty-batch samples', function()
    round_trip(Two(), lunet.randn(1, 3, 6, 5):transpose(3, 4))
    local m = Two():eval()
    lunet.onnx.export(m, lunet.randn(0, 3, 4, 4), tmp)
    assert.same({ 0, 6, 4, 4 }, lunet.onnx.load(tmp)(lunet.randn(0, 3, 4, 4)):size())
  end)

  it('inherited by subclasses; a subclass\'s method wins over its parent\'s emitter', function()
    local Sub = Two:extend('my.Sub')
    round_trip(Sub(), lunet.randn(1, 3, 4, 4))
    local Seq = nn.Sequential:extend('my.Seq')   -- forward: the children, doubled
    function Seq:forward(x) return nn.Sequential.forward(self, x) * 2 end
    function Seq:onnx_export(g, xn, x)
      local yn, y = g:sequence(self._children, xn, x)
      return g:node('Mul', { yn, g:constant(2, { dtype = 'float32' }) }), y * 2
    end
    round_trip(Seq(nn.Linear(3, 2), nn.Tanh()), lunet.randn(4, 3))
  end)

  it('g.opset, fresh names, several outputs', function()
    local seen = {}
    local M = nn.Module:extend('my.Fresh')
    function M:forward(x) return x:relu() end
    function M:onnx_export(g, xn)
      seen.opset = g.opset
      seen.a, seen.b = g:fresh('v'), g:fresh('v')
      seen.c, seen.d = g:node('Relu', { xn }, {}, 2)
      return seen.c
    end
    local m = M()
    lunet.onnx.export(nn.Sequential(m), lunet.randn(2, 3), tmp, { opset_version = 15 })
    assert.equal(15, seen.opset)
    assert.equal('/0/v_output_0', seen.a)
    assert.is_true(seen.a ~= seen.b and seen.c ~= seen.d and seen.b ~= seen.d)
  end)

  it('training modes are restored after the walk', function()
    local m = nn.Sequential(Two())
    m:train()
    lunet.onnx.export(m, lunet.randn(1, 3, 4, 4), tmp)
    assert.is_true(m.training and m[1].training and m[1].b[2].training)
  end)

  it('errors name the class, its path and the problem', function()
    local x = lunet.randn(1, 3, 4, 4)
    local function err(f)
      local Bad = nn.Module:extend('my.Bad')
      Bad.__init = Two.__init
      Bad.forward = Two.forward
      Bad.onnx_export = f
      return fx.err_of(lunet.onnx.export, nn.Sequential(nn.Identity(), Bad()), x, tmp)
    end
    assert.truthy(err(function(_, g, xn) return g:node('LeakyRelu', { xn }, { alpha = 0.1 }) end)
      :find('onnx.export: my.Bad at 1: LeakyRelu: attribute alpha = 0.1 is not an integer (name it alpha_f', 1, true))
    assert.truthy(err(function(_, g, xn, y) return g:module('c', xn, y) end)
      :find('my.Bad at 1: module: c is not a child module', 1, true))
    assert.truthy(err(function(_, g, xn, y) return g:module(nn.ReLU(), xn, y) end)
      :find('my.Bad at 1: module: not a child module', 1, true))
    assert.truthy(err(function(_, g) return g:node('Relu', { 3 }) end)
      :find('my.Bad at 1: Relu: input 1 is a number, not a value name', 1, true))
    assert.truthy(err(function(_, g) return g:node('', {}) end):find('node: op must be an ONNX op name', 1, true))
    assert.truthy(err(function(_, g) return g:initializer('w', 3) end)
      :find('initializer w: value must be a tensor', 1, true))
    assert.truthy(err(function() return 3 end)
      :find('onnx.export: my.Bad:onnx_export at 1 must return its output\'s value name, got number', 1, true))
    -- a built-in emitter given a list (a DenseLayer's inputs) by a method
    assert.truthy(err(function(_, g, xn, y) return g:module('a', { xn }, { y }) end)
      :find('onnx.export: nn.Conv2d at 1/a: takes one tensor', 1, true))
    -- and a module of Lua code without a method
    local Net = nn.Module:extend('my.Net')
    function Net:forward(y) return y end
    assert.truthy(fx.err_of(lunet.onnx.export, nn.Sequential(Net()), x, tmp)
      :find('unsupported module my.Net at 0 (supported: ', 1, true))
  end)
end)

describe('onnx.export of lunet.models.densenet121', function()
  after_each(function() os.remove(tmp) end)

  it('round trip at 1x3x32x32 and batch 2; torch 1.13\'s node types for torchvision\'s densenet121', function()
    local m = lunet.models.densenet121({ num_classes = 5, drop_rate = 0.2 })
    local back = round_trip(m, lunet.randn(1, 3, 32, 32), { dynamic_axes = { input = { 'batch' }, output = { 'batch' } } })
    local x2 = lunet.randn(2, 3, 32, 32)
    assert.is_true(fx.rel(back(x2), m(x2)) < 1e-5)
    if has_onnx then
      -- torch 1.13 writes these for torchvision 0.14's densenet121 (a one-off
      -- check), and 245 Identity nodes besides: its sharing of equal folded biases
      assert.equal('AveragePool=3,BatchNormalization=62,Concat=62,Constant=3,Conv=120,Flatten=1,Gemm=1,'
        .. 'GlobalAveragePool=1,MaxPool=1,Pad=3,Relu=121\n', check_model(tmp))
    end
  end)
end)
