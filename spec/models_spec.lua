-- lunet.models against torchvision 0.14 (spec/fixtures/models.safetensors,
-- tools/gen_models_fixtures.py): the state_dict keys, order and shapes,
-- parameter counts, and with every parameter and buffer set by a formula of
-- its position (no weight files), the outputs in eval and train mode and
-- some gradients; options, errors, printing, pipelines.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local models = lunet.models

local T, cases = fx.load_fixture('models')

-- the formula of tools/gen_models_fixtures.py (spec/support/models_formula.lua)
local formula = require 'support.models_formula'
local formula_state, make_input, keys_of = formula.formula_state, formula.make_input, formula.keys_of

describe('lunet.models against torchvision', function()
  for _, c in ipairs(cases) do
    if c.size then it(c.name, function()
      local opts = { num_classes = 10 }
      for k, v in pairs(c.opts or {}) do opts[k] = v end
      -- (the weights are replaced: skip VGG's init of its 100M-parameter classifier)
      if c.name:match('^vgg') then opts.init_weights = false end
      local model = models[c.name](opts)
      assert.are.same(c.keys, keys_of(model))
      assert.equal(c.params, model:num_parameters())
      model:load_state_dict(formula_state(model, c.keys))
      local x = make_input(c.size)
      model:eval()
      local out = lunet.no_grad(function() return model(x) end)
      assert.is_true(fx.rel(out, T[c.name .. '.eval']) < 1e-4, c.name .. ' eval ' .. fx.rel(out, T[c.name .. '.eval']))
      -- train mode in float64: batch statistics over 2 samples (and layer4's
      -- 1x1 or 2x2 maps) amplify float32 rounding well past 1e-4
      model:to('float64'):train()
      x = x:double()
      if c.train == 'features' then
        local f = lunet.no_grad(function() return model.features(x) end)
        assert.is_true(fx.rel(f, T[c.name .. '.train_features']) < 1e-6, c.name .. ' train features')
      elseif c.train == 'model' then
        local y = model(x)
        local r = fx.rel(y, T[c.name .. '.train'])
        assert.is_true(r < 1e-6, c.name .. ' train ' .. r)
        if c.grads then
          local bn
          for _, m in ipairs(model:modules()) do
            if getmetatable(m) == lunet.nn.BatchNorm2d then bn = m; break end
          end
          assert.is_true(fx.rel(bn.running_mean, T[c.name .. '.running_mean']) < 1e-9)
          y:sum():backward()
          for _, key in ipairs(c.grads) do
            local g = model:get_parameter(key).grad
            local rg = fx.rel(g, T[c.name .. '.d.' .. key])
            assert.is_true(rg < 1e-6, key .. ' ' .. rg)
          end
          for _, e in ipairs(model:named_parameters()) do
            local want = c.grad_sq[e[1]]
            local got = e[2].grad:double():pow(2):sum():item()
            assert.is_true(math.abs(got - want) <= 1e-6 * want + 1e-20, e[1] .. ' ' .. got .. ' vs ' .. want)
          end
        end
      end
    end) end
  end

  -- the big VGGs (100M parameters in their classifiers, slow to build): their
  -- features against torchvision's keys, the classifier is vgg11's
  it('vgg13, vgg16, vgg19 and their _bn: features keys and parameter counts', function()
    local vgg = models.vgg
    local classifier
    for _, c in ipairs(cases) do if c.name == 'vgg11' then classifier = c end end
    local n = 0
    for _, c in ipairs(cases) do
      if not c.size and c.name:match('^vgg') then
        local arch = ({ vgg13 = 'B', vgg16 = 'D', vgg19 = 'E' })[c.name:match('^vgg%d+')]
        local f = vgg.make_layers(vgg.cfgs[arch], c.name:match('_bn$') ~= nil)
        local want, tail, count = {}, 0, 0
        for _, e in ipairs(c.keys) do
          local k = e[1]:match('^features%.(.*)')
          if k then want[#want + 1] = { k, e[2] } end
        end
        assert.are.same(want, keys_of(f))
        for _, e in ipairs(classifier.keys) do
          if e[1]:match('^classifier') then
            local m = 1
            for _, s in ipairs(e[2]) do m = m * s end
            tail = tail + m
          end
        end
        count = f:num_parameters() + tail
        assert.equal(c.params, count, c.name)
        n = n + 1
      end
    end
    assert.equal(6, n)
  end)

  it('densenet161 and densenet201: keys and parameter counts', function()
    local n = 0
    for _, c in ipairs(cases) do
      if not c.size and c.name:match('^densenet') then
        local model = models[c.name] { num_classes = 10 }
        assert.are.same(c.keys, keys_of(model))
        assert.equal(c.params, model:num_parameters())
        n = n + 1
      end
    end
    assert.equal(2, n)
  end)

  it('resnet18 at the default 1000 classes has torchvision\'s parameter count', function()
    for _, c in ipairs(cases) do
      if c.name == 'resnet18' then assert.equal(c.params_1000, models.resnet18():num_parameters()) end
    end
  end)
end)

describe('lunet.models options and errors', function()
  it('lists the models, torchvision names', function()
    local list = models.list_models()
    assert.equal(68, #list)
    for _, n in ipairs(list) do assert.equal('function', type(models[n]), n) end
    assert.is_nil(models.resnet9)
    -- the family files, as torchvision.models.resnet
    assert.equal(models.resnet18, models.resnet.resnet18)
    assert.is_table(models.resnet.Bottleneck)
    assert.is_table(models.densenet.DenseLayer)
    -- every constructor checks its options before building anything
    for _, n in ipairs(list) do
      assert.matches("models." .. n .. ": unknown option 'zzz'", fx.err_of(models[n], { zzz = 1 }), 1, true)
      assert.matches('models.' .. n .. ': expected an options table', fx.err_of(models[n], 'x'), 1, true)
      assert.matches('models.' .. n .. ': pretrained weights are not downloaded', fx.err_of(models[n], { weights = 'DEFAULT' }), 1, true)
      assert.matches('models.' .. n .. ': num_classes must be an integer >= 1', fx.err_of(models[n], { num_classes = -1 }), 1, true)
    end
  end)

  it('refuses weights and pretrained with how to load a converted state_dict', function()
    for _, o in ipairs({ { weights = 'IMAGENET1K_V1' }, { pretrained = true }, { weights = 'DEFAULT' } }) do
      local e = fx.err_of(models.resnet18, o)
      assert.matches('models.resnet18: pretrained weights are not downloaded', e, 1, true)
      assert.matches('load_state_dict', e, 1, true)
    end
    assert.matches('models.squeezenet1_1: pretrained', fx.err_of(models.squeezenet1_1, { pretrained = true }), 1, true)
    -- (torchvision's defaults: no weights)
    assert.equal(10, models.squeezenet1_1 { weights = false, pretrained = false, progress = true, num_classes = 10 }
      .classifier[2].out_channels)
  end)

  it('raises on unknown options, bad values and extra arguments, naming the constructor', function()
    local cases = {
      { models.resnet18, { num_class = 10 }, "models.resnet18: unknown option 'num_class' (did you mean 'num_classes'?)" },
      { models.vgg11, { batch_norm = true }, "models.vgg11: unknown option 'batch_norm'" },
      { models.mobilenet_v2, { width = 1 }, "models.mobilenet_v2: unknown option 'width'" },
      { models.alexnet, { num_classes = 0 }, 'models.alexnet: num_classes must be an integer >= 1, got 0' },
      { models.resnet50, { num_classes = 2.5 }, 'models.resnet50: num_classes must be an integer >= 1, got 2.5' },
      { models.vgg11_bn, { dropout = 1.5 }, 'models.vgg11_bn: dropout must be a number in [0, 1], got 1.5' },
      { models.squeezenet1_0, { dropout = 0 / 0 }, 'models.squeezenet1_0: dropout must be a number in [0, 1]' },
      { models.resnet18, { zero_init_residual = 1 }, "models.resnet18: option 'zero_init_residual' must be a boolean" },
      { models.resnet18, 10, 'models.resnet18: expected an options table (e.g. {num_classes = 10}), got number' },
      { models.resnet18, { 10 }, 'models.resnet18: options are named' },
      { models.resnet18, { groups = 2 }, 'BasicBlock only supports groups = 1 and width_per_group = 64' },
      { models.resnet34, { replace_stride_with_dilation = { false, false, true } }, 'dilation > 1 not supported in BasicBlock' },
      { models.resnet50, { replace_stride_with_dilation = { true } }, 'replace_stride_with_dilation should be nil or a list of 3 booleans' },
      { models.resnext50_32x4d, { groups = 8 }, 'models.resnext50_32x4d: groups is fixed to 32 for this model, got 8' },
      { models.wide_resnet50_2, { width_per_group = 64 }, 'width_per_group is fixed to 128' },
      { models.mobilenet_v2, { inverted_residual_setting = {} }, 'inverted_residual_setting should be non-empty' },
      { models.densenet121, { drop_rate = -0.1 }, 'models.densenet121: drop_rate must be a number in [0, 1], got -0.1' },
      { models.densenet121, { bn_size = 0 }, 'models.densenet121: bn_size must be an integer >= 1, got 0' },
      { models.densenet121, { growth_rate = 16 }, "models.densenet121: unknown option 'growth_rate'" },
      { models.mobilenet_v2, { inverted_residual_setting = { { 1, 2, 3 } } }, 'a list of {t, c, n, s} lists' },
    }
    for _, c in ipairs(cases) do assert.matches(c[3], fx.err_of(c[1], c[2]), 1, true) end
    assert.matches('models.vgg16: expected one options table', fx.err_of(models.vgg16, {}, 3), 1, true)
  end)

  it('zero_init_residual, dilation, width_mult and init as torchvision', function()
    local m = models.resnet18 { num_classes = 3, zero_init_residual = true }
    assert.equal(0, m.layer1[1].bn2.weight:abs():sum():item())
    assert.equal(64, m.layer1[1].bn1.weight:sum():item())
    assert.equal(0, m.fc.bias:abs():max():item() > 1 and 1 or 0)
    -- conv: kaiming_normal_ fan_out relu: std sqrt(2 / (64 * 9))
    local std = m.layer1[1].conv1.weight:std():item()
    assert.is_true(math.abs(std - math.sqrt(2 / 576)) < 0.01 * 2, tostring(std))
    -- dilation in layer4: stride 1, dilation 2, so 64x64 stays 4x4 there
    local d = models.resnet50 { num_classes = 3, zero_init_residual = true,
      replace_stride_with_dilation = { false, false, true } }
    assert.equal(0, d.layer2[1].bn3.weight:abs():sum():item())
    assert.equal(2, d.layer4[2].conv2.dilation)
    d:eval()
    local y = lunet.no_grad(function() return d.layer4(d.layer3(d.layer2(d.layer1(d.maxpool(d.relu(d.bn1(d.conv1(lunet.randn(1, 3, 64, 64))))))))) end)
    assert.are.same({ 1, 2048, 4, 4 }, y:size())
    local mb = models.mobilenet_v2 { num_classes = 3, width_mult = 0.5 }
    assert.equal(16, mb.features[1][1].out_channels)
    assert.equal(1280, mb.classifier[2].in_features)
    local v = models.vgg11 { num_classes = 3 }
    assert.equal(0, v.classifier[1].bias:abs():sum():item())
    assert.is_true(math.abs(v.classifier[7].weight:std():item() - 0.01) < 0.002)
  end)

  it('prints, and the resnet as a Sequential cuts into blocks for pipelines', function()
    local m = models.resnet18 { num_classes = 4 }
    local s = tostring(m)
    assert.matches('models.ResNet', s, 1, true)
    assert.matches('(downsample): nn.Sequential', s, 1, true)
    local seq = m:sequential()
    assert.are.same(keys_of(m), keys_of(seq))
    local names = {}
    for _, a in ipairs(require('lunet.parallel.atoms').of(seq)) do names[#names + 1] = a.name end
    assert.are.same({ 'conv1', 'bn1', 'relu', 'maxpool', 'layer1.0', 'layer1.1', 'layer2.0', 'layer2.1', 'layer3.0',
      'layer3.1', 'layer4.0', 'layer4.1', 'avgpool', 'flatten', 'fc' }, names)
    m:eval()
    local x = lunet.randn(2, 3, 32, 32)
    local y1 = lunet.no_grad(function() return m(x) end)
    assert.is_true(fx.maxdiff(y1, lunet.no_grad(function() return seq(x) end)) < 1e-5)
    -- (the pipeline moves the second stage's modules to cpu:1: a clone goes there)
    lunet.set_cpu_devices(2)
    local ok, err = pcall(function()
      local pipe = lunet.parallel.Pipeline(seq:clone(), { devices = { 'cpu:0', 'cpu:1' }, chunks = 2 })
      pipe:eval()
      assert.is_true(fx.maxdiff(y1, lunet.no_grad(function() return pipe(x) end)) < 1e-4)
    end)
    collectgarbage(); collectgarbage()
    lunet.synchronize()
    lunet.set_cpu_devices(1)
    assert(ok, err)
  end)

  it('runs on empty batches and non-contiguous input', function()
    local m = models.squeezenet1_1 { num_classes = 5 }
    m:eval()
    local x = lunet.randn(2, 3, 48, 48)
    local y = lunet.no_grad(function() return m(x) end)
    local xt = x:transpose(3, 4):contiguous():transpose(3, 4)
    assert.is_true(fx.maxdiff(y, lunet.no_grad(function() return m(xt) end)) < 1e-5)
    local e = lunet.no_grad(function() return m(lunet.randn(0, 3, 48, 48)) end)
    assert.are.same({ 0, 5 }, e:size())
  end)
end)
