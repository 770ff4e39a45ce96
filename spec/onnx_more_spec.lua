-- lunet.onnx, second round, against PyTorch 1.13 (spec/fixtures/onnx_more_*
-- and onnx_more.safetensors from tools/gen_onnx_more_fixtures.py): torch's
-- exports of tiny models with the ops torchvision's models export (1-d and
-- 3-d convs and pools, depthwise convs, Clip, HardSigmoid, Erf, LayerNorm's
-- reductions, Resize linear/trilinear, Gather of an Embedding, Concat of
-- branches, Transpose, ReduceMean, Squeeze) load and give torch's outputs;
-- lunet's exports of the same Sequentials load back with the same outputs
-- and pass onnx.checker. (tools/check_onnx_torchvision.py runs the real
-- torchvision models.)
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local P = require 'lunet.onnx.proto'
local nn = lunet.nn

local here = debug.getinfo(1, 'S').source:match('^@(.*/)') or './'
local T, cases = fx.load_fixture('onnx_more')
local tmp = os.tmpname()
local function file(name) return here .. 'fixtures/' .. name end

describe('lunet.onnx.load of torch 1.13 exports (more ops)', function()
  for _, c in ipairs(cases) do
    it(c.name .. ' gives torch\'s outputs (batch 2 and a dynamic batch of 3)', function()
      local m = lunet.onnx.load(file(c.file))
      for _, s in ipairs({ '', '3' }) do
        local y = m(T[c.name .. '.x' .. s])
        assert.same(T[c.name .. '.out' .. s]:size(), y:size())
        assert.is_true(fx.rel(y, T[c.name .. '.out' .. s]) < 1e-5, c.name .. s)
      end
      if T[c.name .. '.x']:is_floating_point() then
        local y = m:double()(T[c.name .. '.x']:double())
        assert.is_true(fx.rel(y:float(), T[c.name .. '.out']) < 1e-5)
      end
    end)
  end
end)

-- the lunet Sequential each torch Sequential is, with its weights
local BUILD = {
  seq1d = function()
    return nn.Sequential(nn.Conv1d(3, 4, 3, { padding = 1 }), nn.ReLU6(),
      nn.MaxPool1d(3, { stride = 2, padding = 1, ceil_mode = true }), nn.AvgPool1d(3, { stride = 2, padding = 1 }),
      nn.Upsample({ scale_factor = 2, mode = 'linear' }), nn.LayerNorm(6), nn.GELU(), nn.Conv1d(4, 4, 3, { groups = 4 }),
      nn.AvgPool1d(2, { padding = 1, count_include_pad = false }), nn.Flatten(), nn.Linear(12, 5), nn.Hardswish())
  end,
  vol3d = function()
    return nn.Sequential(nn.Conv3d(2, 4, 3, { padding = 1 }), nn.Hardsigmoid(), nn.MaxPool3d(2, { ceil_mode = true }),
      nn.AvgPool3d(3, { stride = 1, padding = 1 }), nn.Upsample({ scale_factor = 2, mode = 'trilinear' }),
      nn.MaxPool3d(2), nn.Upsample({ scale_factor = 2 }), nn.SiLU(), nn.MaxPool3d(3, { stride = 3 }), nn.Flatten(),
      nn.Linear(32, 3))
  end,
  acts = function()
    return nn.Sequential(nn.Conv2d(3, 6, 3, { padding = 1, groups = 3, bias = false }), nn.BatchNorm2d(6), nn.ReLU6(),
      nn.PReLU(6), nn.Conv2d(6, 4, 1), nn.Mish(), nn.GELU({ approximate = 'tanh' }),
      nn.Upsample({ scale_factor = 2, mode = 'bilinear' }),
      nn.Upsample({ scale_factor = 1.5, mode = 'bilinear', align_corners = true }),
      nn.MaxPool2d(3, { stride = 2, ceil_mode = true }), nn.AdaptiveAvgPool2d(3), nn.Dropout(), nn.AdaptiveMaxPool2d(1),
      nn.Flatten(), nn.Linear(4, 6), nn.LayerNorm(6))
  end,
  embed = function() return nn.Sequential(nn.Embedding(10, 3), nn.Flatten(), nn.Linear(12, 2)) end,
}

local rc = os.execute("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1")
local has_onnx = rc == 0 or rc == true
local function check_model(path)
  local p = io.popen(("/usr/bin/python3 -c \"import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), "
    .. "full_check=True); print('checked')\" '%s' 2>&1"):format(path))
  local text = p:read('*a')
  p:close()
  return text
end

describe('lunet.onnx.export (more modules)', function()
  after_each(function() os.remove(tmp) end)

  for _, c in ipairs(cases) do
    if c.seq then
      it(c.name .. ': exports, loads back with torch\'s outputs, passes onnx.checker', function()
        local m = BUILD[c.name]()
        local sd, prefix = {}, c.name .. '.sd.'
        for k, v in pairs(T) do
          if k:sub(1, #prefix) == prefix then sd[k:sub(#prefix + 1)] = v end
        end
        m:load_state_dict(sd, false)
        m:eval()
        -- (lunet's Embedding takes 1-based indices; the exported file too)
        local function input(s)
          local x = T[c.name .. '.x' .. s]
          return x:is_floating_point() and x or x + 1
        end
        local x = input('')
        assert.is_true(fx.rel(m(x), T[c.name .. '.out']) < 1e-5, 'the lunet model is torch\'s')
        lunet.onnx.export(m, x, tmp, { dynamic_axes = { input = { 'batch' }, output = { 'batch' } } })
        local back = lunet.onnx.load(tmp)
        assert.is_true(fx.rel(back(x), T[c.name .. '.out']) < 1e-5)
        assert.is_true(fx.rel(back(input('3')), T[c.name .. '.out3']) < 1e-5)
        if has_onnx then assert.equal('checked\n', check_model(tmp))
        else print('onnx_more_spec: python3-onnx not installed, onnx.checker not run') end
      end)
    end
  end
end)

describe('lunet.onnx.export of lunet.models', function()
  after_each(function() os.remove(tmp) end)

  for _, name in ipairs({ 'squeezenet1_1', 'mobilenet_v2' }) do
    it(name .. ' round trip (Fire: Concat; InvertedResidual: depthwise, Clip, Add)', function()
      local m = lunet.models[name]({ num_classes = 5 }):eval()
      local x = lunet.randn(2, 3, 48, 48)
      lunet.onnx.export(m, x, tmp)
      assert.is_true(fx.rel(lunet.onnx.load(tmp)(x), m(x)) < 1e-5)
      if has_onnx then assert.equal('checked\n', check_model(tmp)) end
    end)
  end

  it('a module of Lua code without :onnx_export: a named error', function()
    local Net = nn.Module:extend('my.Net')
    function Net:forward(x) return x * 2 end
    assert.truthy(fx.err_of(lunet.onnx.export, Net(), lunet.randn(1, 3), tmp)
      :find('onnx.export: unsupported module my.Net at the top (supported: ', 1, true))
  end)

  it('errors: modes and options the emitters cannot write', function()
    local x = lunet.randn(1, 2, 4, 4)
    assert.truthy(fx.err_of(lunet.onnx.export, nn.Sequential(nn.Upsample({ scale_factor = 2, mode = 'bicubic' })), x,
      tmp):find('nn.Upsample at 0: mode bicubic is not supported', 1, true))
    assert.truthy(fx.err_of(lunet.onnx.export, nn.Sequential(nn.Softplus(2)), x, tmp)
      :find('nn.Softplus at 0: beta other than 1', 1, true))
    assert.truthy(fx.err_of(lunet.onnx.export, nn.Sequential(nn.AdaptiveMaxPool2d(2)), x, tmp)
      :find('only output size 1', 1, true))
    assert.truthy(fx.err_of(lunet.onnx.export, nn.Sequential(nn.Linear(4, 4)), lunet.tensor({ true }), tmp)
      :find('sample_input must be a floating-point, int64 or int32 tensor, got bool', 1, true))
  end)
end)

describe('lunet.onnx.load errors (more ops)', function()
  after_each(function() os.remove(tmp) end)

  local function one_node(op, attrs)
    local g = P.msg(1, P.str(1, 'x') .. P.str(2, 'y') .. P.str(4, op) .. (attrs or '')) .. P.msg(11, P.str(1, 'x'))
      .. P.msg(12, P.str(1, 'y'))
    local f = assert(io.open(tmp, 'wb'))
    f:write(P.int(1, 7) .. P.msg(7, g) .. P.msg(8, P.int(2, 13)))
    f:close()
  end
  local function attr_i(name, v) return P.msg(5, P.str(1, name) .. P.int(3, v) .. P.int(20, 2)) end
  local function attr_ints(name, v) return P.msg(5, P.str(1, name) .. P.ints(8, v) .. P.int(20, 7)) end

  it('names the node and the problem', function()
    one_node('Cast', attr_i('to', 3))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('(Cast): cast to ONNX type 3 is not supported', 1, true))
    one_node('HardSigmoid', attr_i('gamma', 1))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('(HardSigmoid): attribute gamma is not supported', 1, true))
    one_node('ReduceSum', attr_ints('axes', { 1 }))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('axes is an input from opset 13', 1, true))
    one_node('Transpose', attr_ints('perm', { 1, 0 }))
    assert.truthy(fx.err_of(lunet.onnx.load(tmp), lunet.randn(2, 3, 4)):find('perm has 2 values for rank 3', 1, true))
    one_node('ReduceMean', attr_ints('axes', { 5 }))
    assert.truthy(fx.err_of(lunet.onnx.load(tmp), lunet.randn(2, 3)):find('axis 5 is out of range for rank 2', 1, true))
    one_node('Squeeze', attr_ints('axes', { 0 }))
    assert.truthy(fx.err_of(lunet.onnx.load(tmp), lunet.randn(2, 3)):find('cannot squeeze axis 0 of size 2', 1, true))
    one_node('MaxPool', attr_ints('kernel_shape', { 2, 2, 2, 2 }))
    assert.truthy(fx.err_of(lunet.onnx.load(tmp), lunet.randn(1, 1, 4, 4, 4, 4)):find('is not supported', 1, true))
    -- 0-d and empty inputs
    one_node('ReduceMean')
    assert.equal(0, lunet.onnx.load(tmp)(lunet.tensor(3)):dim())
    one_node('Transpose')
    assert.same({ 0, 2 }, lunet.onnx.load(tmp)(lunet.empty(2, 0)):size())
  end)
end)
