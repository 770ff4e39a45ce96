-- lunet.onnx.export's Conv + BatchNorm2d folding against torch 1.13
-- (spec/fixtures/onnx_fold.safetensors from tools/gen_onnx_fold_fixtures.py):
-- a small net trained a few steps (running statistics a trained model's, some
-- variances tiny; eps 1e-3 and 1e-5; a conv with a bias; a batch norm without
-- affine) exports to torch's folded weights and biases bit for bit, and the
-- file gives the model's outputs.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local P = require 'lunet.onnx.proto'
local I = require 'lunet.onnx.import'
local nn = lunet.nn

local T = fx.load_fixture('onnx_fold')
local tmp = os.tmpname()

local function build()
  local m = nn.Sequential(
    nn.Conv2d(3, 16, 3, { padding = 1, bias = false }), nn.BatchNorm2d(16, { eps = 1e-3 }), nn.SiLU(),
    nn.Conv2d(16, 16, 3, { padding = 1, groups = 16 }), nn.BatchNorm2d(16), nn.ReLU(),
    nn.Conv2d(16, 8, 1, { bias = false }), nn.BatchNorm2d(8, { eps = 1e-3, momentum = 0.01, affine = false }),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))
  local sd = {}
  for k, v in pairs(T) do
    if k:sub(1, 3) == 'sd.' then sd[k:sub(4)] = v end
  end
  m:load_state_dict(sd, false)
  return m:eval()
end

-- the Conv nodes' weight and bias tensors of an .onnx file, in node order
local function conv_params(path)
  local f = assert(io.open(path, 'rb'))
  local g = P.decode(P.schema.Model, f:read('*a'), 'conv_params').graph
  f:close()
  local inits, out = {}, {}
  for _, t in ipairs(g.initializer or {}) do inits[t.name] = I.tensor_of('conv_params', t) end
  for _, n in ipairs(g.node) do
    assert.are_not.equal('BatchNormalization', n.op_type)
    if n.op_type == 'Conv' then out[#out + 1] = { inits[n.input[2]], inits[n.input[3]] } end
  end
  return out
end

describe('onnx.export folds Conv + BatchNorm2d as torch 1.13', function()
  teardown(function() os.remove(tmp) end)

  it('to torch\'s folded weights and biases, bit for bit (trained statistics, tiny variances, eps 1e-3)', function()
    lunet.onnx.export(build(), T.x, tmp)
    local convs = conv_params(tmp)
    assert.equal(3, #convs)
    for i, c in ipairs(convs) do
      assert.equal(0, fx.maxdiff(c[1], T['conv' .. i .. '.w']), 'conv' .. i .. ' weight')
      assert.equal(0, fx.maxdiff(c[2], T['conv' .. i .. '.b']), 'conv' .. i .. ' bias')
    end
  end)

  it('the file gives the model\'s and torch\'s outputs', function()
    local m = build()
    lunet.onnx.export(m, T.x:narrow(1, 1, 1), tmp, { dynamic_axes = { input = { 'batch' }, output = { 'batch' } } })
    local got = lunet.onnx.load(tmp)(T.x)
    local want = lunet.no_grad(function() return m(T.x) end)
    assert.is_true(fx.rel(got, want) < 1e-5, tostring(fx.rel(got, want)))
    assert.is_true(fx.rel(got, T.out) < 1e-5, tostring(fx.rel(got, T.out)))
    assert.is_true(fx.rel(got, T.out64) < 1e-5, tostring(fx.rel(got, T.out64)))
  end)
end)
