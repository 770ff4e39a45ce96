-- lunet.models against torchvision 0.14 (spec/fixtures/models.safetensors,
-- tools/gen_models_fixtures.py): the state_dict keys, order and shapes,
-- parameter counts, and with every parameter and buffer set by a formula of
-- its position (no weight files), the outputs in eval and train mode and
-- some gradients; options, errors, printing, pipelines.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local models = lunet.models

local T, cases = fx.load_fixture('models')

-- the formula of tools/gen_models_fixtures.py, as a state dict for keys
local function formula_state(model, keys)
  local own, sd = model:state_dict(), {}
  for k0, e in ipairs(keys) do
    local key, k = e[1], k0 - 1
    if key:match('num_batches_tracked$') then sd[key] = own[key]:clone()
    else
      local n = 1
      for _, s in ipairs(e[2]) do n = n * s end
      local a = lunet.arange(n, { dtype = 'float64' }):mul(0.37):add(1.3 * k)
      local v = key:match('running_var$') and a:cos():mul(0.1):add(1) or a:sin():mul(0.05)
      sd[key] = v:float():view(#e[2] > 0 and e[2] or {})
    end
  end
  return sd
end

local function make_input(size)
  local i = lunet.arange(2 * 3 * size * size, { dtype = 'float64' })
  return (i:mul(0.7):sin() + i:mul(0.031):cos():mul(0.5)):float():view(2, 3, size, size)
end

local function keys_of(model)
  local out = {}
  for _, e in ipairs(model._state_entries(model, '')) do out[#out + 1] = { e[1], e[2]:size() } end
  return out
end

describe('lunet.models against torchvision', function()
  for _, c in ipairs(cases) do
    if c.size then it(c.name, function()
      local opts = { num_classes = 10 }
      for k, v in pairs(c.opts or {}) do opts[k] = v end
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
      if not c.size then
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

  it('resnet18 at the default 1000 classes has torchvision\'s parameter count', function()
    for _, c in ipairs(cases) do
      if c.name == 'resnet18' then assert.equal(c.params_1000, models.resnet18():num_parameters()) end
    end
  end)
end)
