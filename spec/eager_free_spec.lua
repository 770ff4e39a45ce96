-- lunet.nn.eager: a container's intermediate activations freed once the
-- next layer consumed them, and saved tensors once their node ran
-- backward. Checked: a training step leaves (almost) nothing for the
-- collector where it used to leave its activations; the values are the
-- same bit for bit as with the freeing off; and nothing anyone else may
-- still hold is freed (hooks, a user's module keeping its input, views
-- written in place, the container's input, anomaly mode, create_graph,
-- retain_graph).
local lunet = require 'lunet'
local nn, optim = lunet.nn, lunet.optim
local eager = require 'lunet.nn.eager'
local fixtures = require 'support.fixtures'
local maxdiff = fixtures.maxdiff

local function lenet()
  return nn.Sequential { nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5),
    nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
    nn.Linear(84, 10) }
end
local function resnet()
  return nn.Sequential { nn.Conv2d(3, 8, 3, { padding = 1, bias = false }), nn.BatchNorm2d(8), nn.ReLU(),
    nn.BasicBlock(8, 8, 1), nn.BasicBlock(8, 16, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10) }
end

-- with eager freeing on or off: f()
local function with_eager(on, f, ...)
  local was = eager.enabled
  eager.enabled = on
  local ok, a, b, c = pcall(f, ...)
  eager.enabled = was
  if not ok then error(a, 0) end
  return a, b, c
end

-- the training loss of a model's output: with aux heads (GoogLeNet's,
-- Inception3's in train mode: a table) the logits' plus 0.3 of each aux
-- head's, as torchvision's reference training
local AUX = { 'aux_logits', 'aux_logits1', 'aux_logits2' }
local function train_loss(crit, out, y)
  if lunet.is_tensor(out) then return crit(out, y) end
  local loss = crit(out.logits, y)
  for _, k in ipairs(AUX) do
    if out[k] then loss = loss + crit(out[k], y) * 0.3 end
  end
  return loss
end

-- bytes a device's tensors grew by over `steps` training steps, the Lua
-- collector stopped (what a step leaves for it); split: each backward as a
-- zero-bubble pipeline's, the weights' gradients deferred and run after
local function growth(build, shape, steps, split)
  lunet.manual_seed(1)
  local model = build()
  local x, y = lunet.randn(shape), lunet.randint(1, 11, { shape[1] })
  local opt = optim.SGD(model:parameters(), { lr = 0.01 })
  local crit = nn.CrossEntropyLoss()
  local ps, one = model:parameters(), lunet.ones({})
  local function backward(loss)
    if split then lunet.autograd.backward({ loss }, { one }, { defer = ps }):run() else loss:backward() end
  end
  local function step() opt:zero_grad(); backward(train_loss(crit, model(x), y)); opt:step() end
  step()
  collectgarbage(); collectgarbage()
  collectgarbage('stop')
  local ok, err = pcall(function()
    local a0 = lunet.memory_allocated('cpu:0')
    for _ = 1, steps do step() end
    return lunet.memory_allocated('cpu:0') - a0
  end)
  collectgarbage('restart')
  if not ok then error(err, 0) end
  return err
end

describe('eager freeing of activations', function()
  it('a training step leaves little for the collector (LeNet-5, a ResNet with BasicBlocks)', function()
    for _, case in ipairs({ { lenet, { 16, 1, 28, 28 } }, { resnet, { 8, 3, 32, 32 } } }) do
      local plain = with_eager(false, growth, case[1], case[2], 3)
      local freed = with_eager(true, growth, case[1], case[2], 3)
      assert.is_true(plain > 1e6, 'the steps left ' .. plain .. ' bytes with the freeing off')
      assert.is_true(freed < plain / 4, ('left %d bytes with the freeing on, %d off'):format(freed, plain))
    end
  end)

  it('a backward with deferred weight gradients (zero-bubble) leaves no more than a whole backward', function()
    for _, case in ipairs({ { lenet, { 16, 1, 28, 28 } }, { resnet, { 8, 3, 32, 32 } } }) do
      local whole = with_eager(true, growth, case[1], case[2], 3)
      local split = with_eager(true, growth, case[1], case[2], 3, true)
      local plain = with_eager(false, growth, case[1], case[2], 3, true)
      assert.is_true(plain > 1e6, 'the steps left ' .. plain .. ' bytes with the freeing off')
      -- (the gradients the deferred nodes kept for W are freed after it)
      assert.is_true(split <= whole + 1024, ('left %d bytes split, %d whole'):format(split, whole))
    end
  end)

  it('gives the same outputs, gradients and steps bit for bit', function()
    for _, build in ipairs({ lenet, resnet }) do
      local shape = build == lenet and { 4, 1, 28, 28 } or { 4, 3, 16, 16 }
      local function run()
        lunet.manual_seed(7)
        local model = build()
        local x, y = lunet.randn(shape), lunet.randint(1, 11, { shape[1] })
        local opt = optim.Adam(model:parameters(), { lr = 0.01 })
        local crit = nn.CrossEntropyLoss()
        local out
        for _ = 1, 3 do
          opt:zero_grad()
          out = model(x)
          crit(out, y):backward()
          opt:step()
        end
        model:eval()
        local ev = lunet.no_grad(function() return model(x) end)
        return out:clone(), model:parameters()[1].grad:clone(), model:parameters()[1]:clone(), ev
      end
      local a = { with_eager(false, run) }
      local b = { with_eager(true, run) }
      for i = 1, 3 do assert.are.equal(0, maxdiff(a[i], b[i])) end
    end
  end)

  it('keeps what a forward hook captured', function()
    with_eager(true, function()
      local model = lenet()
      local seen = {}
      model[2]:register_forward_hook(function(_, _, out) seen[#seen + 1] = out end)
      local x = lunet.randn(2, 1, 28, 28)
      model(x):sum():backward()
      local ref = lunet.no_grad(function() return model[1](x):relu() end)
      assert.are.equal(0, maxdiff(seen[1], ref))
    end)
  end)

  it('keeps the input and output a user module holds', function()
    with_eager(true, function()
      local Keep = nn.Module:extend('spec.Keep')
      function Keep:forward(x) self.seen = x; return x * 2 end
      local keep = Keep()
      local model = nn.Sequential { nn.Linear(4, 5), keep, nn.ReLU(), nn.Linear(5, 3) }
      local x = lunet.randn(3, 4)
      model(x):sum():backward()
      local ref = lunet.no_grad(function() return model[1](x) end)
      assert.are.equal(0, maxdiff(keep.seen, ref))
      -- a nn.Sequential subclass's children are not lunet.nn's own either
      assert.is_false(eager.pure(keep))
      assert.is_true(eager.pure(model[1]))
      assert.is_false(eager.pure(model))
    end)
  end)

  it('never frees the container\'s input, nor what an in-place op on a view still needs', function()
    local function run()
      lunet.manual_seed(3)
      local model = nn.Sequential { nn.Identity(), nn.Conv2d(1, 2, 3), nn.Flatten(), nn.ReLU({ inplace = true }),
        nn.Linear(2 * 6 * 6, 3) }
      local x = lunet.randn({ 2, 1, 8, 8 }, { requires_grad = true })
      model(x):sum():backward()
      return x:sum():item(), x.grad:clone(), model[2].weight.grad:clone()
    end
    local a = { with_eager(false, run) }
    local b = { with_eager(true, run) }
    assert.are.equal(a[1], b[1])
    assert.are.equal(0, maxdiff(a[2], b[2]))
    assert.are.equal(0, maxdiff(a[3], b[3]))
  end)

  it('leaves anomaly mode, create_graph and retain_graph as they were', function()
    local function run()
      lunet.manual_seed(5)
      local model = lenet()
      local x = lunet.randn({ 2, 1, 28, 28 }, { requires_grad = true })
      -- a gradient penalty (create_graph), then a second backward of a retained graph
      local out = model(x):pow(2):sum()
      local gx = require('lunet.autograd').grad(out, x, { create_graph = true })[1]
      gx:pow(2):sum():backward()
      local loss = model(x):sum()
      loss:backward({ retain_graph = true })
      loss:backward()
      local anomaly = lunet.detect_anomaly(function()
        local l = model(x):sum()
        l:backward()
        return l:item()
      end)
      return model[1].weight.grad:clone(), x.grad:clone(), anomaly
    end
    local a = { with_eager(false, run) }
    local b = { with_eager(true, run) }
    assert.are.equal(0, maxdiff(a[1], b[1]))
    assert.are.equal(0, maxdiff(a[2], b[2]))
    assert.are.equal(a[3], b[3])
  end)
end)

describe('eager freeing in lunet.models', function()
  local models = require 'lunet.models'
  local CASES = {
    { 'resnet18', function() return models.resnet18({ num_classes = 10 }) end },
    { 'resnet50', function() return models.resnet50({ num_classes = 10 }) end },
    { 'mobilenet_v2', function() return models.mobilenet_v2({ num_classes = 10, width_mult = 0.25 }) end },
    { 'mobilenet_v3_small', function() return models.mobilenet_v3_small({ num_classes = 10 }) end },
    { 'efficientnet_b0', function() return models.efficientnet_b0({ num_classes = 10 }) end },
    { 'vgg11', function() return models.vgg11({ num_classes = 10 }) end },
    -- (AlexNet's pools need 63x63 at least)
    { 'alexnet', function() return models.alexnet({ num_classes = 10 }) end, shape = { 2, 3, 64, 64 } },
    { 'squeezenet1_1', function() return models.squeezenet1_1({ num_classes = 10 }) end },
    { 'densenet121', function() return models.densenet121({ num_classes = 10 }) end },
    -- (in train mode with its aux heads, on transform_input's map)
    { 'googlenet', function() return models.googlenet({ num_classes = 10, transform_input = true }) end },
    -- (with its aux head, which needs 299x299 inputs)
    { 'inception_v3', function() return models.inception_v3({ num_classes = 10, transform_input = true }) end,
      shape = { 2, 3, 299, 299 } },
    { 'shufflenet_v2_x0_5', function() return models.shufflenet_v2_x0_5({ num_classes = 10 }) end },
    { 'mnasnet0_5', function() return models.mnasnet0_5({ num_classes = 10 }) end },
    -- (most of what ConvNeXt's blocks leave is lunet.nn's, not theirs: nn.Linear on NHWC maps gives
    -- a view of its 2-D product, and Permute a view of the depthwise conv's output, bases nn.Sequential
    -- cannot free while it frees the views; F.layer_norm's own intermediates, a composition of tensor
    -- ops; the backward's gradient temporaries (sub's negation, sum_to) as with the freeing off)
    { 'convnext_tiny', function() return models.convnext_tiny({ num_classes = 10 }) end, ratio = 0.9 },
    { 'regnet_y_400mf', function() return models.regnet_y_400mf({ num_classes = 10 }) end },
  }
  for _, case in ipairs(CASES) do
    it(case[1] .. ': a training step leaves little for the collector, with the same results', function()
      local shape = case.shape or { 2, 3, 32, 32 }
      local plain = with_eager(false, growth, case[2], shape, 2)
      local freed = with_eager(true, growth, case[2], shape, 2)
      assert.is_true(plain > 1e6, 'the steps left ' .. plain .. ' bytes with the freeing off')
      local ratio = case.ratio or 1 / 4
      assert.is_true(freed < plain * ratio, ('left %d bytes with the freeing on, %d off'):format(freed, plain))
      local function run()
        lunet.manual_seed(4)
        local model = case[2]()
        local x, y = lunet.randn(shape), lunet.randint(1, 11, { shape[1] })
        local loss = train_loss(nn.CrossEntropyLoss(), model(x), y)
        loss:backward()
        model:eval()
        local ev = lunet.no_grad(function() return model(x) end)
        return loss:item(), model:parameters()[1].grad:clone(), ev
      end
      local a = { with_eager(false, run) }
      local b = { with_eager(true, run) }
      assert.are.equal(a[1], b[1])
      assert.are.equal(0, maxdiff(a[2], b[2]))
      assert.are.equal(0, maxdiff(a[3], b[3]))
    end)
  end

  it('never frees a block\'s input that a child gives back (an nn.Identity in place of a part)', function()
    local function with_identity(block, ...)
      for _, name in ipairs({ ... }) do block[name] = nn.Identity() end
      return block
    end
    local BLOCKS = {
      function() return with_identity(require('lunet.models.mnasnet').InvertedResidual(8, 8, 3, 1, 3), 'layers') end,
      function() return with_identity(require('lunet.models.mobilenetv2').InvertedResidual(8, 8, 1, 6), 'conv') end,
      function() return with_identity(require('lunet.models.resnet').BasicBlock(8, 8, 1, nn.Identity()), 'downsample') end,
      function() return with_identity(require('lunet.models.regnet').ResBottleneckBlock(8, 8, 2, 8, 1), 'proj', 'f') end,
      function()
        return with_identity(require('lunet.models.googlenet').Inception(8, 2, 2, 2, 2, 2, 2), 'branch1', 'branch2',
          'branch3', 'branch4')
      end,
      function() return with_identity(require('lunet.models.convnext').CNBlock(8, 1e-6, 0), 'block') end,
      function() return with_identity(require('lunet.models.shufflenetv2').InvertedResidual(8, 8, 2), 'branch1', 'branch2') end,
    }
    with_eager(true, function()
      for i, build in ipairs(BLOCKS) do
        lunet.manual_seed(i)
        local block = build()
        assert.is_true(eager.pure(block))
        local x = lunet.randn({ 2, 8, 4, 4 }, { requires_grad = true })
        local ref = x:detach():clone()
        block(x):sum():backward()
        assert.is_true(lunet.is_tensor(x), 'block ' .. i .. ' freed its input')
        assert.are.equal(0, maxdiff(x:detach(), ref))
        assert.is_true(lunet.is_tensor(x.grad))
      end
    end)
  end)
end)

describe('eager freeing in a pipeline', function()
  it('a 2-stage pipeline step leaves little for the collector on either device, with the same results', function()
    local before = #lunet.devices('cpu')
    lunet.set_cpu_devices(2)
    local ok, err = pcall(function()
      local Pipeline = require 'lunet.parallel.Pipeline'
      local function run(steps)
        lunet.manual_seed(6)
        local model = nn.Sequential { nn.Conv2d(3, 8, 3, { padding = 1, bias = false }), nn.BatchNorm2d(8), nn.ReLU(),
          nn.BasicBlock(8, 8, 1), nn.BasicBlock(8, 16, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10) }
        local pipe = Pipeline(model, { devices = { 'cpu:0', 'cpu:1' }, chunks = 4, schedule = '1f1b', balance = { 4, 4 } })
        local x, y = lunet.randn({ 16, 3, 32, 32 }), lunet.randint(1, 11, { 16 })
        local opt = optim.SGD(pipe:parameters(), { lr = 0.01, momentum = 0.9 })
        local crit = nn.CrossEntropyLoss()
        local function step() opt:zero_grad(); pipe:forward_loss(crit, x, y):backward(); opt:step() end
        step()
        lunet.synchronize()
        collectgarbage(); collectgarbage()
        collectgarbage('stop')
        -- (what a collection then frees; the stages' own trigger, which may
        -- collect during the steps when the freeing is off, held off, and no
        -- other collection ran in the steps)
        for _, row in ipairs(pipe.stages) do
          for _, stage in ipairs(row) do stage.gc_at = math.huge end
        end
        local ok2, r = pcall(function()
          local runs = lunet.collection_stats().count
          for _ = 1, steps do step() end
          lunet.synchronize()
          assert.are.equal(runs, lunet.collection_stats().count, 'no collection during the measured steps')
          local w = pipe:parameters()[1]:clone()
          local a0, a1 = lunet.memory_allocated('cpu:0'), lunet.memory_allocated('cpu:1')
          collectgarbage(); collectgarbage()
          return { a0 - lunet.memory_allocated('cpu:0'), a1 - lunet.memory_allocated('cpu:1'), w }
        end)
        collectgarbage('restart')
        if not ok2 then error(r, 0) end
        return r
      end
      local plain = with_eager(false, run, 2)
      local freed = with_eager(true, run, 2)
      for d = 1, 2 do
        assert.is_true(plain[d] > 1e5, ('cpu:%d: the steps left %d bytes with the freeing off'):format(d - 1, plain[d]))
        -- (a stage's outputs and the gradients it sends back are freed too: a tenth at most)
        assert.is_true(freed[d] < plain[d] / 10, ('cpu:%d: left %d bytes with the freeing on, %d off'):format(d - 1,
          freed[d], plain[d]))
      end
      assert.are.equal(0, maxdiff(plain[3], freed[3]))
    end)
    lunet.set_cpu_devices(before)
    if not ok then error(err, 0) end
  end)
end)
