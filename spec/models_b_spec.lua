-- lunet.models' ShuffleNetV2, MNASNet, GoogLeNet and Inception v3 against
-- torchvision 0.14 (spec/fixtures/models_b.safetensors,
-- tools/gen_models_b_fixtures.py, the scheme of models_spec.lua): keys,
-- order, shapes and parameter counts; with every entry set by a formula of
-- its position, eval outputs, train outputs and gradients in float64; ONNX
-- round trips; options and errors.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local models = lunet.models

local T, cases = fx.load_fixture('models_b')

-- the formula of tools/gen_models_fixtures.py (spec/support/models_formula.lua)
local formula = require 'support.models_formula'
local formula_state, make_input, keys_of = formula.formula_state, formula.make_input, formula.keys_of

-- the case's model at num_classes = 10 (n) with its options; googlenet and
-- inception_v3 skip their truncated-normal init (host erfinv, ~1 s), replaced anyway
local function build(c, n)
  local opts = { num_classes = n }
  for k, v in pairs(c.opts) do opts[k] = v end
  if c.ctor == 'googlenet' or c.ctor == 'inception_v3' then opts.init_weights = false end
  return models[c.ctor](opts)
end

describe('lunet.models (ShuffleNetV2, MNASNet, GoogLeNet, Inception v3) against torchvision', function()
  for _, c in ipairs(cases) do
    it(c.name .. (c.size and '' or ': keys and parameter counts'), function()
      local model = build(c, 10)
      assert.are.same(c.keys, keys_of(model))
      assert.equal(c.params, model:num_parameters())
      if not c.size then
        assert.equal(c.params_1000, build(c):num_parameters())
        return
      end
      model:load_state_dict(formula_state(model, c.keys))
      local x = make_input(c.size)
      model:eval()
      local out = lunet.no_grad(function() return model(x) end)
      local r = fx.rel(out, T[c.name .. '.eval'])
      assert.is_true(r < 1e-4, c.name .. ' eval ' .. r)
      if not c.train then return end
      -- train mode in float64 (batch statistics over 2 samples amplify float32 rounding)
      model:to('float64'):train()
      x = x:double()
      local y = model(x)
      if c.train == 'aux' then
        for _, f in ipairs({ 'logits', 'aux_logits2', 'aux_logits1' }) do
          local rf = fx.rel(y[f], T[c.name .. '.train.' .. f])
          assert.is_true(rf < 1e-6, f .. ' ' .. rf)
        end
        return
      end
      r = fx.rel(y, T[c.name .. '.train'])
      assert.is_true(r < 1e-6, c.name .. ' train ' .. r)
      if not c.grads then return end
      local bn
      for _, m in ipairs(model:modules()) do
        if getmetatable(m) == lunet.nn.BatchNorm2d then bn = m; break end
      end
      assert.is_true(fx.rel(bn.running_mean, T[c.name .. '.running_mean']) < 1e-9)
      y:sum():backward()
      for _, key in ipairs(c.grads) do
        local rg = fx.rel(model:get_parameter(key).grad, T[c.name .. '.d.' .. key])
        assert.is_true(rg < 1e-6, key .. ' ' .. rg)
      end
      for _, e in ipairs(model:named_parameters()) do
        local want, got = c.grad_sq[e[1]], e[2].grad:double():pow(2):sum():item()
        assert.is_true(math.abs(got - want) <= 1e-6 * want + 1e-20, e[1] .. ' ' .. got .. ' vs ' .. want)
      end
    end)
  end

  it('export to ONNX and load back equal (eval)', function()
    local function check(m, size)
      m:eval()
      local x = lunet.randn(2, 3, size, size)
      local path = os.tmpname()
      lunet.onnx.export(m, x, path)
      local back = lunet.onnx.load(path)
      os.remove(path)
      local want = lunet.no_grad(function() return m(x) end)
      local r = fx.rel(lunet.no_grad(function() return back(x) end), want)
      assert.is_true(r < 1e-5, tostring(m.__name) .. ' ' .. r)
    end
    check(models.shufflenet_v2_x0_5 { num_classes = 10 }, 32)
    check(models.mnasnet0_5 { num_classes = 10 }, 32)
    check(models.googlenet { num_classes = 10, transform_input = true, init_weights = false }, 32)
    check(models.inception_v3 { num_classes = 10, aux_logits = false, init_weights = false }, 75)
  end)
end)

describe('lunet.models (ShuffleNetV2, MNASNet, GoogLeNet, Inception v3) options', function()
  it('are listed and check their options', function()
    local names = { 'shufflenet_v2_x0_5', 'shufflenet_v2_x1_0', 'shufflenet_v2_x1_5', 'shufflenet_v2_x2_0',
      'mnasnet0_5', 'mnasnet0_75', 'mnasnet1_0', 'mnasnet1_3', 'googlenet', 'inception_v3' }
    local listed = {}
    for _, n in ipairs(models.list_models()) do listed[n] = true end
    for _, n in ipairs(names) do
      assert.is_true(listed[n], n)
      assert.matches("models." .. n .. ": unknown option 'zzz'", fx.err_of(models[n], { zzz = 1 }), 1, true)
      assert.matches('models.' .. n .. ': pretrained weights are not downloaded', fx.err_of(models[n], { weights = 'DEFAULT' }), 1, true)
      assert.matches('models.' .. n .. ': num_classes must be an integer >= 1', fx.err_of(models[n], { num_classes = 0 }), 1, true)
    end
    local bad = {
      { models.mnasnet0_5, { dropout = 2 }, 'models.mnasnet0_5: dropout must be a number in [0, 1], got 2' },
      { models.googlenet, { dropout_aux = -1 }, 'models.googlenet: dropout_aux must be a number in [0, 1], got -1' },
      { models.googlenet, { aux_logits = 1 }, "models.googlenet: option 'aux_logits' must be a boolean" },
      { models.googlenet, { blocks = {} }, "models.googlenet: unknown option 'blocks'" },
      { models.inception_v3, { transform_input = 'yes' }, "models.inception_v3: option 'transform_input' must be a boolean" },
      { models.inception_v3, { dropout = 0 / 0 }, 'models.inception_v3: dropout must be a number in [0, 1]' },
      { models.shufflenet_v2_x1_0, { dropout = 0.1 }, "models.shufflenet_v2_x1_0: unknown option 'dropout'" },
    }
    for _, c in ipairs(bad) do assert.matches(c[3], fx.err_of(c[1], c[2]), 1, true) end
    assert.matches('models.MNASNet: alpha should be greater than 0.0', fx.err_of(models.mnasnet.MNASNet, 0), 1, true)
    assert.matches('models.ShuffleNetV2: expected stages_repeats as list of 3',
      fx.err_of(models.shufflenetv2.ShuffleNetV2, { 4, 8 }, { 24, 48, 96, 192, 1024 }), 1, true)
  end)

  it('initialise as torchvision: momentum, eps, truncated normals, aux heads', function()
    local mn = models.mnasnet1_0 { num_classes = 3 }
    assert.is_true(math.abs(mn.layers[2].momentum - 3e-4) < 1e-12)
    assert.equal(0, mn.classifier[2].bias:abs():sum():item())
    local g = models.googlenet { num_classes = 3 }
    assert.equal(0.001, g.conv1.bn.eps)
    local w = g.inception4e.branch2[2].conv.weight
    assert.is_true(math.abs(w:std():item() - 0.01) < 0.001)
    assert.is_table(g.aux1)
    assert.is_nil(models.googlenet { aux_logits = false, init_weights = false }.aux1)
    local inc = models.inception_v3 { num_classes = 3 }
    assert.is_true(math.abs(inc.Mixed_7c.branch1x1.conv.weight:std():item() - 0.1) < 0.01)
    assert.is_true(math.abs(inc.AuxLogits.fc.weight:std():item() - 0.001) < 0.0002)
    -- eval without aux heads' outputs; train with: torchvision's named outputs
    inc:eval()
    local y = lunet.no_grad(function() return inc(lunet.randn(1, 3, 75, 75)) end)
    assert.are.same({ 1, 3 }, y:size())
  end)

  it('runs on empty batches and non-contiguous input', function()
    local m = models.shufflenet_v2_x0_5 { num_classes = 5 }
    m:eval()
    local x = lunet.randn(2, 3, 32, 32)
    local y = lunet.no_grad(function() return m(x) end)
    local xt = x:transpose(3, 4):contiguous():transpose(3, 4)
    assert.is_true(fx.maxdiff(y, lunet.no_grad(function() return m(xt) end)) < 1e-5)
    assert.are.same({ 0, 5 }, lunet.no_grad(function() return m(lunet.randn(0, 3, 32, 32)) end):size())
    assert.matches('models.ShuffleNetV2', tostring(m), 1, true)
  end)
end)
