-- lunet.models' MobileNetV3s and EfficientNets against torchvision 0.14
-- (spec/fixtures/models_effnet.safetensors, tools/gen_models_effnet_fixtures.py,
-- the formula scheme of models_spec.lua): state_dict keys, order and shapes,
-- parameter counts, eval and train outputs, gradients; options, errors,
-- torchvision's batch norm settings and stochastic depth schedule, ONNX.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local models = lunet.models
local nn = lunet.nn

local T, cases = fx.load_fixture('models_effnet')

-- the formula of tools/gen_models_fixtures.py (spec/support/models_formula.lua)
local formula = require 'support.models_formula'
local formula_state, make_input, keys_of = formula.formula_state, formula.make_input, formula.keys_of

describe('lunet.models mobilenet_v3 / efficientnet against torchvision', function()
  for _, c in ipairs(cases) do
    it(c.name .. (c.size and '' or ': keys and parameter counts'), function()
      local opts = { num_classes = 10 }
      for k, v in pairs(c.opts or {}) do opts[k] = v end
      local model = models[c.name](opts)
      assert.are.same(c.keys, keys_of(model))
      assert.equal(c.params, model:num_parameters())
      if not c.size then return end
      model:load_state_dict(formula_state(model, c.keys))
      local x = make_input(c.size)
      model:eval()
      local out = lunet.no_grad(function() return model(x) end)
      local r = fx.rel(out, T[c.name .. '.eval'])
      assert.is_true(r < 1e-4, c.name .. ' eval ' .. r)
      if c.train ~= 'model' then return end
      -- train mode in float64 (batch statistics over 2 samples amplify float32 rounding)
      model:to('float64'):train()
      local y = model(x:double())
      r = fx.rel(y, T[c.name .. '.train'])
      assert.is_true(r < 1e-6, c.name .. ' train ' .. r)
      local bn
      for _, m in ipairs(model:modules()) do
        if getmetatable(m) == nn.BatchNorm2d then bn = m; break end
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

  it('at the default 1000 classes: torchvision\'s parameter counts', function()
    for _, c in ipairs(cases) do
      if c.name:match('^mobilenet') or c.name == 'efficientnet_b0' or c.name == 'efficientnet_v2_s' then
        assert.equal(c.params_1000, models[c.name]():num_parameters(), c.name)
      end
    end
  end)
end)

describe('lunet.models mobilenet_v3 / efficientnet options and errors', function()
  it('registers the names', function()
    local list = table.concat(models.list_models(), ' ')
    for _, n in ipairs({ 'mobilenet_v3_large', 'mobilenet_v3_small', 'efficientnet_b0', 'efficientnet_b7',
                         'efficientnet_v2_s', 'efficientnet_v2_l' }) do
      assert.matches(n, list, 1, true)
    end
    assert.is_table(models.efficientnet.FusedMBConv)
    assert.is_table(models.mobilenetv3.InvertedResidual)
  end)

  it('batch norms, dropout and stochastic depth as torchvision sets them', function()
    local function first_bn(m) return m.features[1][2] end
    local s = models.mobilenet_v3_small { num_classes = 3 }
    assert.equal(0.001, first_bn(s).eps)
    assert.equal(0.01, first_bn(s).momentum)
    assert.equal(0.2, s.classifier[3].p)
    assert.is_true(s.classifier[3].inplace)
    assert.equal(1e-5, first_bn(models.efficientnet_b0 { num_classes = 3 }).eps)
    local b5 = models.efficientnet_b5 { num_classes = 3 }
    assert.equal(0.001, first_bn(b5).eps)
    assert.equal(0.01, first_bn(b5).momentum)
    assert.equal(0.4, b5.classifier[1].p)
    local v2 = models.efficientnet_v2_s { num_classes = 3, dropout = 0.1 }
    assert.equal(0.001, first_bn(v2).eps)
    assert.equal(0.1, first_bn(v2).momentum)
    assert.equal(0.1, v2.classifier[1].p)
    -- stochastic depth: p * block index / number of blocks (16 in b0)
    local b0 = models.efficientnet_b0 { num_classes = 3, stochastic_depth_prob = 0.4 }
    assert.equal(0, b0.features[2][1].stochastic_depth.p)
    assert.is_true(math.abs(b0.features[3][2].stochastic_depth.p - 0.4 * 2 / 16) < 1e-15)
    assert.is_true(math.abs(b0.features[8][1].stochastic_depth.p - 0.4 * 15 / 16) < 1e-15)
    assert.equal('row', b0.features[8][1].stochastic_depth.mode)
    -- SE: Hardsigmoid and make_divisible'd squeeze (V3), SiLU and in/4 (EfficientNet)
    assert.equal(getmetatable(s.features[2].block[2].scale_activation), nn.Hardsigmoid)
    assert.equal(8, s.features[2].block[2].fc1.out_channels)
    assert.equal(getmetatable(b0.features[3][1].block[3].activation), nn.SiLU)
    assert.equal(4, b0.features[3][1].block[3].fc1.out_channels)
    -- norm_layer (b0-b4, the V3s), width_mult, reduced_tail, dilated
    local gn = models.efficientnet_b1 { num_classes = 3, norm_layer = function(c) return nn.GroupNorm(1, c) end }
    assert.equal(nn.GroupNorm, getmetatable(first_bn(gn)))
    local w = models.mobilenet_v3_large { num_classes = 3, width_mult = 0.5, reduced_tail = true, dilated = true }
    assert.equal(8, w.features[1][1].out_channels)
    assert.equal(320, w.classifier[1].out_features)
    assert.equal(522187, w:num_parameters())   -- (torchvision's)
    assert.equal(2, w.features[15].block[2][1].dilation)
    assert.equal(1, w.features[14].block[2][1].stride)
    -- init: Linear uniform in +-1/sqrt(out) (EfficientNet), normal(0, 0.01) (V3)
    assert.is_true(b0.classifier[2].weight:abs():max():item() <= 1 / math.sqrt(3))
    assert.is_true(math.abs(s.classifier[1].weight:std():item() - 0.01) < 0.001)
    assert.equal(0, s.classifier[1].bias:abs():sum():item())
  end)

  it('raises on unknown options and bad values, naming the constructor', function()
    local cases = {
      { models.mobilenet_v3_small, { zzz = 1 }, "models.mobilenet_v3_small: unknown option 'zzz'" },
      { models.mobilenet_v3_large, { dropout = 2 }, 'models.mobilenet_v3_large: dropout must be a number in [0, 1], got 2' },
      { models.mobilenet_v3_large, { width_mult = 0 }, 'models.mobilenet_v3_large: width_mult must be a number' },
      { models.mobilenet_v3_small, { reduced_tail = 1 }, "option 'reduced_tail' must be a boolean" },
      { models.mobilenet_v3_small, { norm_layer = 3 }, 'models.mobilenet_v3_small: norm_layer must be a constructor' },
      { models.efficientnet_b0, { stochastic_depth_prob = -1 }, 'models.efficientnet_b0: stochastic_depth_prob must be a number in [0, 1]' },
      { models.efficientnet_b3, { num_classes = 0 }, 'models.efficientnet_b3: num_classes must be an integer >= 1, got 0' },
      { models.efficientnet_b6, { norm_layer = nn.BatchNorm2d }, 'models.efficientnet_b6: norm_layer is fixed for this model' },
      { models.efficientnet_v2_m, { norm_layer = nn.BatchNorm2d }, 'models.efficientnet_v2_m: norm_layer is fixed' },
      { models.efficientnet_v2_l, { width_mult = 2 }, "models.efficientnet_v2_l: unknown option 'width_mult'" },
      { models.efficientnet_b0, { pretrained = true }, 'models.efficientnet_b0: pretrained weights are not downloaded' },
      { models.efficientnet_b0, 'x', 'models.efficientnet_b0: expected an options table' },
    }
    for _, c in ipairs(cases) do assert.matches(c[3], fx.err_of(c[1], c[2]), 1, true) end
    assert.matches('models.efficientnet_b0: expected one options table', fx.err_of(models.efficientnet_b0, {}, 3), 1, true)
  end)

  it('prints, runs empty batches and non-contiguous input; stochastic depth drops in training', function()
    local m = models.mobilenet_v3_small { num_classes = 5 }
    local s = tostring(m)
    assert.matches('models.MobileNetV3', s, 1, true)
    assert.matches('models.SqueezeExcitation', s, 1, true)
    assert.matches('StochasticDepth', tostring(models.efficientnet_b0 { num_classes = 2 }), 1, true)
    m:eval()
    local x = lunet.randn(2, 3, 40, 40)
    local y = lunet.no_grad(function() return m(x) end)
    local xt = x:transpose(3, 4):contiguous():transpose(3, 4)
    assert.is_true(fx.maxdiff(y, lunet.no_grad(function() return m(xt) end)) < 1e-5)
    assert.are.same({ 0, 5 }, lunet.no_grad(function() return m(lunet.randn(0, 3, 40, 40)) end):size())
    -- p = 1 drops every residual branch: the block passes its input on
    local b = models.efficientnet.MBConv({ expand_ratio = 1, kernel = 3, stride = 1, input_channels = 8,
      out_channels = 8, num_layers = 1 }, 1.0, nn.BatchNorm2d)
    local z = lunet.randn(2, 8, 5, 5)
    assert.equal(0, fx.maxdiff(lunet.no_grad(function() return b(z) end), z))
  end)

  it('exports to ONNX and loads back equal (mobilenet_v3_small, efficientnet_b0)', function()
    for _, n in ipairs({ 'mobilenet_v3_small', 'efficientnet_b0' }) do
      local m = models[n] { num_classes = 7 }
      m:eval()
      local x = lunet.randn(2, 3, 32, 32)
      local path = os.tmpname()
      lunet.onnx.export(m, x, path)
      local back = lunet.onnx.load(path)
      os.remove(path)
      local want = lunet.no_grad(function() return m(x) end)
      local r = fx.rel(lunet.no_grad(function() return back(x) end), want)
      assert.is_true(r < 1e-5, n .. ' ' .. r)
    end
  end)
end)
