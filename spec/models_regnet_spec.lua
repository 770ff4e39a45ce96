-- lunet.models' RegNets against torchvision 0.14 (spec/fixtures/models_regnet.safetensors,
-- tools/gen_models_regnet_fixtures.py): every constructor's keys, order,
-- shapes and parameter counts; regnet_x_400mf's eval output, regnet_y_400mf's
-- eval and float64 train outputs and gradients, all with the state_dict set by
-- the formula of tools/gen_models_fixtures.py; width quantisation, options,
-- errors, ONNX.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local mf = require 'support.models_formula'
local models = lunet.models

local T, cases = fx.load_fixture('models_regnet')

describe('lunet.models RegNets against torchvision', function()
  for _, c in ipairs(cases) do
    it(c.name .. (c.size and ': outputs' or ': keys and parameter counts'), function()
      mf.check_case(models, T, c)
      collectgarbage(); collectgarbage()
      -- (regnet_y_128gf: 637M parameters, 2.5 GB, not built twice: its count at
      -- 1000 classes is the one at 10 with the larger fc)
      if c.name == 'regnet_y_128gf' then
        assert.equal(c.params_1000, c.params + 990 * (c.keys[#c.keys - 1][2][2] + 1))   -- (fc.weight: 10 x in)
      else
        assert.equal(c.params_1000, models[c.name]():num_parameters())
      end
      collectgarbage(); collectgarbage()
    end)
  end

  it('quantises the widths as BlockParams.from_init_params', function()
    -- regnet_y_400mf: {width, stride, depth, group_width, bottleneck_multiplier} per stage
    local stages, se = models.regnet.block_params(16, 48, 27.89, 2.09, 8, 1.0, 0.25)
    assert.are.same({ { 48, 2, 1, 8, 1 }, { 104, 2, 3, 8, 1 }, { 208, 2, 6, 8, 1 }, { 440, 2, 6, 8, 1 } }, stages)
    assert.equal(0.25, se)
    assert.matches('invalid RegNet settings', fx.err_of(models.regnet.block_params, 16, 44, 27.89, 2.09, 8), 1, true)
    local m = models.regnet_y_400mf { num_classes = 3 }
    assert.equal(8, m.trunk_output.block1['block1-0'].f.se.fc1.out_channels)    -- round(0.25 * 32)
    assert.equal(12, m.trunk_output.block2['block2-0'].f.se.fc1.out_channels)   -- round(0.25 * 48)
    assert.is_nil(m.trunk_output.block2['block2-1'].proj)
    assert.equal(13, m.trunk_output.block2['block2-0'].f.b['0'].groups)           -- 104 / 8
  end)
end)

describe('lunet.models RegNet options, init and export', function()
  it('raises on unknown options and bad values, naming the constructor', function()
    assert.matches("models.regnet_y_400mf: unknown option 'stem_width'", fx.err_of(models.regnet_y_400mf, { stem_width = 8 }), 1, true)
    assert.matches('models.regnet_x_8gf: num_classes must be an integer >= 1, got 0', fx.err_of(models.regnet_x_8gf, { num_classes = 0 }), 1, true)
    assert.matches('models.regnet_x_400mf: pretrained weights', fx.err_of(models.regnet_x_400mf, { pretrained = true }), 1, true)
    assert.matches('models.regnet_y_800mf: expected one options table', fx.err_of(models.regnet_y_800mf, {}, 2), 1, true)
  end)

  it('initialises as torchvision, prints, and runs empty and non-contiguous batches', function()
    local m = models.regnet_x_400mf { num_classes = 5 }
    local w = m.trunk_output.block2['block2-0'].f.b['0'].weight   -- 3x3, 64 out: std sqrt(2 / 576)
    assert.is_true(math.abs(w:std():item() - math.sqrt(2 / (9 * 64))) < 0.005)
    assert.equal(1, m.stem['1'].weight:min():item())
    assert.equal(0, m.fc.bias:abs():sum():item())
    assert.is_true(math.abs(m.fc.weight:std():item() - 0.01) < 0.002)
    local s = tostring(m)
    assert.matches('models.RegNet', s, 1, true)
    assert.matches('(block1-0): models.ResBottleneckBlock', s, 1, true)
    m:eval()
    local x = lunet.randn(2, 3, 32, 32)
    local y = lunet.no_grad(function() return m(x) end)
    local xt = x:transpose(3, 4):contiguous():transpose(3, 4)
    assert.is_true(fx.maxdiff(y, lunet.no_grad(function() return m(xt) end)) < 1e-5)
    assert.are.same({ 0, 5 }, lunet.no_grad(function() return m(lunet.randn(0, 3, 32, 32)) end):size())
  end)

  it('regnet_y_400mf exports to ONNX and loads back with the same output', function()
    local m = models.regnet_y_400mf { num_classes = 10 }
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
