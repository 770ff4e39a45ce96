-- lunet.models' ConvNeXts against torchvision 0.14 (spec/fixtures/models_convnext.safetensors,
-- tools/gen_models_convnext_fixtures.py): every constructor's keys, order,
-- shapes and parameter counts; convnext_tiny's eval and float64 train outputs
-- and gradients with the state_dict set by the formula of
-- tools/gen_models_fixtures.py; stochastic depth, Permute, options, ONNX.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local mf = require 'support.models_formula'
local models = lunet.models

local T, cases = fx.load_fixture('models_convnext')

describe('lunet.models ConvNeXts against torchvision', function()
  for _, c in ipairs(cases) do
    it(c.name .. (c.size and ': outputs' or ': keys and parameter counts'), function()
      mf.check_case(models, T, c)
      collectgarbage(); collectgarbage()
      assert.equal(c.params_1000, models[c.name]():num_parameters())
      collectgarbage(); collectgarbage()
    end)
  end
end)

describe('lunet.models ConvNeXt blocks, options and export', function()
  it('ramps stochastic depth over the blocks, drops rows in training only', function()
    local m = models.convnext_tiny { num_classes = 3 }
    assert.equal(0, m.features['1']['0'].stochastic_depth.p)
    assert.is_true(math.abs(m.features['7']['2'].stochastic_depth.p - 0.1) < 1e-12)
    assert.is_true(math.abs(m.features['5']['0'].stochastic_depth.p - 0.1 * 6 / 17) < 1e-12)
    assert.equal('row', m.features['7']['2'].stochastic_depth.mode)
    assert.equal(0.5, models.convnext_large { num_classes = 3 }.features['7']['2'].stochastic_depth.p)
    assert.equal(0.3, models.convnext_small { num_classes = 3, stochastic_depth_prob = 0.3 }.features['7']['2'].stochastic_depth.p)
    -- layer_scale: torchvision's 1e-6 start; trunc_normal_(std 0.02) weights, zero biases
    local b = m.features['3']['1']
    assert.are.same({ 192, 1, 1 }, b.layer_scale:size())
    assert.equal(b.layer_scale:max():item(), b.layer_scale:min():item())
    assert.is_true(math.abs(b.layer_scale[1][1][1]:item() - 1e-6) < 1e-12)
    assert.is_true(math.abs(b.block['3'].weight:std():item() - 0.02) < 0.002)
    assert.equal(0, b.block['3'].bias:abs():sum():item())
    -- a block in training with p = 1 passes its input on; in eval it adds its branch
    local blk = models.convnext.CNBlock(8, 0.5, 1.0)
    local x = lunet.randn(2, 8, 5, 5)
    blk:train()
    assert.equal(0, fx.maxdiff(blk(x), x))
    blk:eval()
    assert.is_true(fx.maxdiff(blk(x), x) > 1e-3)
  end)

  it('Permute takes 1-based dims; LayerNorm2d normalises the channels', function()
    local P = models.convnext.Permute
    local x = lunet.randn(2, 3, 4, 5)
    assert.are.same({ 2, 4, 5, 3 }, P { 1, 3, 4, 2 }(x):size())
    assert.equal(0, fx.maxdiff(P { 1, 4, 2, 3 }(P { 1, 3, 4, 2 }(x)), x))
    assert.matches('models.Permute({1, 3, 4, 2})', tostring(P { 1, 3, 4, 2 }), 1, true)
    assert.matches('models.Permute: dims must be a list', fx.err_of(P, 3), 1, true)
    local ln = models.convnext.LayerNorm2d(3, { eps = 1e-6 })
    local y = ln(x)
    assert.is_true(y:mean(2):abs():max():item() < 1e-5)
    local want = lunet.nn.functional.layer_norm(x:permute(1, 3, 4, 2):contiguous(), { 3 }, nil, nil, 1e-6):permute(1, 4, 2, 3)
    assert.is_true(fx.maxdiff(y, want) < 1e-6)
  end)

  it('raises on unknown options and bad values, naming the constructor', function()
    assert.matches("models.convnext_tiny: unknown option 'block'", fx.err_of(models.convnext_tiny, { block = 1 }), 1, true)
    assert.matches('models.convnext_base: stochastic_depth_prob must be a number in [0, 1], got 1.5',
      fx.err_of(models.convnext_base, { stochastic_depth_prob = 1.5 }), 1, true)
    assert.matches("models.convnext_small: option 'layer_scale' must be", fx.err_of(models.convnext_small, { layer_scale = 'x' }), 1, true)
    assert.matches('models.convnext_large: pretrained weights', fx.err_of(models.convnext_large, { weights = 'DEFAULT' }), 1, true)
  end)

  it('runs empty and non-contiguous batches, prints', function()
    local m = models.convnext_tiny { num_classes = 4 }
    m:eval()
    local x = lunet.randn(2, 3, 32, 32)
    local y = lunet.no_grad(function() return m(x) end)
    local xt = x:transpose(3, 4):contiguous():transpose(3, 4)
    assert.is_true(fx.maxdiff(y, lunet.no_grad(function() return m(xt) end)) < 1e-5)
    assert.are.same({ 0, 4 }, lunet.no_grad(function() return m(lunet.randn(0, 3, 32, 32)) end):size())
    local s = tostring(m)
    assert.matches('models.CNBlock', s, 1, true)
    assert.matches('models.LayerNorm2d', s, 1, true)
  end)

  it('convnext_tiny exports to ONNX and loads back with the same output', function()
    local m = models.convnext_tiny { num_classes = 10 }
    m:load_state_dict(mf.formula_state(m, mf.keys_of(m)))
    m:eval()
    local x = mf.make_input(32)
    local path = os.tmpname()
    lunet.onnx.export(m, x, path)
    local back = lunet.onnx.load(path)
    os.remove(path)
    local want = lunet.no_grad(function() return m(x) end)
    local got = lunet.no_grad(function() return back(x) end)
    assert.is_true(fx.rel(got, want) < 1e-5, tostring(fx.rel(got, want)))
  end)
end)
