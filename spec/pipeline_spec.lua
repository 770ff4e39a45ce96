-- lunet.parallel.Pipeline over 2, 3 and 4 virtual CPU devices: training
-- equals the same model trained on one device (GPipe, 1F1B, interleaved 1F1B and zero-bubble, chunks 1..8,
-- an uneven last micro-batch, with and without recomputation), parameter
-- names stay the model's (state_dict, optimizers, lunet.fit), BatchNorm in
-- micro-batches (deferred running statistics), hybrid data x pipeline,
-- 1F1B's memory, and errors raised inside a stage.
local lunet = require 'lunet'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data
local Pipeline = lunet.parallel.Pipeline
local C = lunet.C
-- fault injection (ln_stream_inject_*): c/include/lunet_internal.h
if not pcall(require('ffi').typeof, 'ln_rec_stats') then require('ffi').cdef(require 'lunet.cdef_internal') end

local function cnn(seed, bn)
  lunet.manual_seed(seed or 1)
  local layers = { nn.Conv2d(3, 4, 3, { padding = 1, bias = not bn }) }
  if bn then layers[#layers + 1] = nn.BatchNorm2d(4) end
  for _, m in ipairs({ nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 8), nn.ReLU(),
    nn.Linear(8, 5) }) do layers[#layers + 1] = m end
  return nn.Sequential(layers)
end

local function rel(a, b)
  local d = (a:to(b.device) - b):abs():max():item()
  return d / math.max(b:abs():max():item(), 1e-12)
end

-- the largest relative difference over the two models' state dicts
local function sd_diff(a, b)
  local sa, sb, worst = a:state_dict(), b:state_dict(), 0
  for k, t in pairs(sb) do
    assert.truthy(sa[k], 'missing ' .. k)
    if t:is_floating_point() then worst = math.max(worst, rel(sa[k], t)) end
  end
  return worst
end

local function make_opt(kind, params)
  if kind == 'adam' then return optim.Adam(params, { lr = 0.01 }) end
  return optim.SGD(params, { lr = 0.05, momentum = 0.9 })
end

-- a few steps of the reference (one device) and of the pipeline on the same batches
local function train_both(o)
  local batches = {}
  lunet.manual_seed(7)
  for i = 1, o.steps or 3 do batches[i] = { lunet.randn(o.B or 10, 3, 8, 8), lunet.randint(1, 6, { o.B or 10 }) } end
  local crit = o.crit or nn.CrossEntropyLoss()
  local ref = cnn(1, o.bn)
  local ro = make_opt(o.opt, ref:parameters())
  for _, b in ipairs(batches) do
    ro:zero_grad()
    crit(ref(b[1]), b[2]):backward()
    ro:step()
  end
  local pipe = Pipeline(cnn(1, o.bn), { devices = o.devices, chunks = o.chunks, schedule = o.schedule,
    checkpoint = o.checkpoint, replicas = o.replicas, balance = o.balance, deferred_bn = o.deferred_bn,
    interleave = o.interleave })
  local po = make_opt(o.opt, pipe:parameters())
  local losses = {}
  for i, b in ipairs(batches) do
    po:zero_grad()
    local loss = pipe:forward_loss(crit, b[1], b[2])
    loss:backward()
    po:step()
    losses[i] = loss:item()
  end
  return ref, pipe, losses
end

local function devs(n)
  local d = {}
  for i = 1, n do d[i] = 'cpu:' .. (i - 1) end
  return d
end

local function release_devices()
  jit.flush()
  for _ = 1, 4 do collectgarbage() end
  pcall(lunet.synchronize)
  lunet.set_cpu_devices(1)
end

describe('parallel.Pipeline', function()
  setup(function() lunet.set_cpu_devices(4) end)
  teardown(release_devices)

  it('trains as one device does: GPipe and 1F1B, 2-4 stages, chunks 1..8, uneven micro-batches, recomputation',
    function()
    local cases = {
      { S = 2, chunks = 1, checkpoint = 'never' },
      { S = 2, chunks = 3, checkpoint = 'always' },        -- 4, 3, 3 rows
      { S = 3, chunks = 8, checkpoint = 'except_last' },   -- 2, 2, 1, ... rows; chunks > stages
      { S = 4, chunks = 2, checkpoint = 'never' },         -- chunks < stages
      { S = 4, chunks = 6, checkpoint = 'always', B = 9 },
    }
    for _, schedule in ipairs({ 'gpipe', '1f1b' }) do
      for _, c in ipairs(cases) do
        for _, opt in ipairs({ 'sgd', 'adam' }) do
          local ref, pipe = train_both({ devices = devs(c.S), chunks = c.chunks, schedule = schedule,
            checkpoint = c.checkpoint, opt = opt, B = c.B })
          local d = sd_diff(pipe, ref)
          assert.is_true(d < 1e-5, ('%s %s S=%d chunks=%d %s: %g'):format(schedule, opt, c.S, c.chunks,
            c.checkpoint, d))
        end
      end
    end
  end)

  it('trains as one device does with the interleaved schedule: 2 and 3 devices, 2 and 3 stages each, uneven chunks',
    function()
    local cases = {
      { P = 2, V = 2, chunks = 1 },
      { P = 2, V = 2, chunks = 3, checkpoint = 'always' },       -- a short last group of micro-batches
      { P = 2, V = 3, chunks = 4, checkpoint = 'except_last' },
      { P = 3, V = 2, chunks = 5, B = 9 },                       -- 2, 2, 2, 2, 1 rows
      { P = 2, V = 2, chunks = 8, B = 16, replicas = 2 },        -- hybrid: 2 pipelines of 2 devices
    }
    for _, c in ipairs(cases) do
      for _, opt in ipairs({ 'sgd', 'adam' }) do
        local ref, pipe, losses = train_both({ devices = devs(c.P * (c.replicas or 1)), chunks = c.chunks,
          schedule = 'interleaved', interleave = c.V, checkpoint = c.checkpoint, opt = opt, B = c.B,
          replicas = c.replicas })
        assert.equal(c.P * c.V, pipe.S)
        for s = 1, pipe.S do assert.equal('cpu:' .. ((s - 1) % c.P), pipe.stages[1][s].device) end
        assert.is_true(losses[1] > 0)
        local d = sd_diff(pipe, ref)
        assert.is_true(d < 1e-5, ('interleaved %s P=%d V=%d chunks=%d: %g'):format(opt, c.P, c.V, c.chunks, d))
      end
    end
  end)

  it('trains as one device does with the zero-bubble schedule: 2-4 stages, chunks 1..8, uneven, recomputation, hybrid',
    function()
    local cases = {
      { S = 2, chunks = 1 },
      { S = 2, chunks = 3, checkpoint = 'always' },        -- 4, 3, 3 rows
      { S = 3, chunks = 8, checkpoint = 'except_last' },   -- chunks > stages
      { S = 4, chunks = 6, B = 9 },                        -- 2, 2, 2, 1, 1, 1 rows
      { S = 2, chunks = 4, B = 16, replicas = 2 },         -- hybrid: 2 pipelines of 2 stages
    }
    for _, c in ipairs(cases) do
      for _, opt in ipairs({ 'sgd', 'adam' }) do
        local ref, pipe, losses = train_both({ devices = devs(c.S * (c.replicas or 1)), chunks = c.chunks, schedule = 'zb',
          checkpoint = c.checkpoint, opt = opt, B = c.B, replicas = c.replicas })
        assert.is_true(losses[1] > 0)
        local d = sd_diff(pipe, ref)
        assert.is_true(d < 1e-5, ('zb %s S=%d chunks=%d: %g'):format(opt, c.S, c.chunks, d))
      end
    end
  end)

  it("gives the batch's loss and outputs, for 'mean' and 'sum' criteria", function()
    lunet.manual_seed(3)
    local x, y = lunet.randn(7, 3, 8, 8), lunet.randn(7, 5)
    for _, red in ipairs({ 'mean', 'sum' }) do
      local crit = nn.MSELoss({ reduction = red })
      local ref, pipe = cnn(2), Pipeline(cnn(2), { devices = devs(3), chunks = 3 })
      local want = crit(ref(x), y)
      want:backward()
      local loss = pipe:forward_loss(crit, x, y)
      loss:backward()
      assert.near(want:item(), loss:item(), 1e-5 * math.abs(want:item()))
      assert.is_true(rel(loss:output(), ref(x)) < 1e-5)
      assert.equal('cpu:0', loss:output().device)
      for i, p in ipairs(pipe:parameters()) do assert.is_true(rel(p.grad, ref:parameters()[i].grad) < 1e-5) end
    end
  end)

  it("keeps the model's parameter names, runs pipe(x), and trains with lunet.fit", function()
    local model = cnn(4)
    local names = {}
    for i, e in ipairs(model:named_parameters()) do names[i] = e[1] end
    local pipe = Pipeline(model, { devices = devs(2), chunks = 2, balance = { 3, 4 } })
    local got = {}
    for i, e in ipairs(pipe:named_parameters()) do got[i] = e[1] end
    assert.same(names, got)
    assert.equal('cpu:0', model[1].weight.device)
    assert.equal('cpu:1', model[7].weight.device)
    -- pipe(x) in eval, and criterion(pipe(x), y):backward() as one graph across the devices
    local ref = cnn(4)
    lunet.manual_seed(5)
    local x, y = lunet.randn(6, 3, 8, 8), lunet.randint(1, 6, { 6 })
    assert.is_true(rel(pipe(x), ref(x)) < 1e-6)
    local crit = nn.CrossEntropyLoss()
    crit(pipe(x), y):backward()
    crit(ref(x), y):backward()
    for i, p in ipairs(pipe:parameters()) do assert.is_true(rel(p.grad, ref:parameters()[i].grad) < 1e-5) end
    -- state_dict round trip through a file
    local path = os.tmpname()
    lunet.save(path, pipe:state_dict())
    local fresh = cnn(9)
    fresh:load_state_dict(lunet.load(path))
    os.remove(path)
    assert.equal(0, sd_diff(fresh, ref))
    pipe:load_state_dict(cnn(9):state_dict())
    assert.equal(0, sd_diff(pipe, cnn(9)))
    -- lunet.fit: the same parameters as fit on one device
    lunet.manual_seed(11)
    local ds = data.TensorDataset(lunet.randn(20, 3, 8, 8), lunet.randint(1, 6, { 20 }))
    local a, b = cnn(6), Pipeline(cnn(6), { devices = devs(2), chunks = 4, schedule = '1f1b' })
    for _, m in ipairs({ a, b }) do
      lunet.fit(m, data.DataLoader(ds, { batch_size = 8 }), { epochs = 2, quiet = true, progress = false,
        loss = nn.CrossEntropyLoss(), optimizer = optim.SGD(m:parameters(), { lr = 0.1 }) })
    end
    assert.is_true(sd_diff(b, a) < 1e-5)
  end)

  it('under lunet.fit with accumulate, a hybrid (1F1B, zero-bubble) reduces once a group and trains as one device does', function()
    lunet.manual_seed(12)
    local ds = data.TensorDataset(lunet.randn(40, 3, 8, 8), lunet.randint(1, 6, { 40 }))
    local Reducer = require 'lunet.parallel.Reducer'
    local prepare, syncs = Reducer.prepare, 0
    Reducer.prepare = function(self, ...)
      prepare(self, ...)
      if self.step and self.step.sync then syncs = syncs + 1 end
    end
    local ok, err = pcall(function()
      -- (zero-bubble: the gradients reach .grad in W actions, and the reduction with the last one)
      for _, schedule in ipairs({ '1f1b', 'zb' }) do
        syncs = 0
        local a, b = cnn(6), Pipeline(cnn(6), { devices = devs(4), replicas = 2, chunks = 2, schedule = schedule })
        for _, m in ipairs({ a, b }) do
          lunet.fit(m, data.DataLoader(ds, { batch_size = 8 }), { epochs = 1, quiet = true, progress = false,
            accumulate = 2, loss = nn.CrossEntropyLoss(), optimizer = optim.SGD(m:parameters(), { lr = 0.1 }) })
        end
        assert.is_true(sd_diff(b, a) < 1e-5, schedule)
        -- 5 batches in groups of 2, 2 and 1: 3 reducing backwards per stage, at each stage's last micro-batch
        assert.equal(3 * 2, syncs, schedule)
        assert.has_error(function() b:sync_next('yes') end, 'Pipeline: sync_next: expected true or false, got string')
      end
    end)
    Reducer.prepare = prepare
    if not ok then error(err, 0) end
  end)

  it('prints its schedule and rejects bad options', function()
    local pipe = Pipeline(cnn(), { devices = devs(2), chunks = 2, schedule = 'gpipe' })
    assert.equal('gpipe, 2 stages, 2 micro-batches, 6 steps\nstage 1 | F1 F2 .  .  B1 B2\nstage 2 | .  F1 F2 B1 B2 . ',
      pipe:schedule_text())
    -- zero-bubble: B the input's gradient, W the weights', filling the bubble
    local zb = Pipeline(cnn(), { devices = devs(2), chunks = 2, schedule = 'zb', balance = { 4, 3 } })
    assert.equal('zb, 2 stages, 2 micro-batches, 7 steps\nstage 1 | F1 F2 .  B1 W1 B2 W2\nstage 2 | .  F1 B1 F2 B2 W1 W2',
      zb:schedule_text())
    local function rejects(opts, msg, model)
      local ok, err = pcall(Pipeline, model or cnn(), opts)
      assert.is_false(ok)
      assert.matches(msg, err, 1, true)
    end
    rejects({ devices = { 'cpu:0', 'cpu:0' } }, 'Pipeline: device cpu:0 appears twice')
    rejects({ devices = { 'cpu:0', 'cpu:9' } }, 'cpu:9')
    rejects({ devices = devs(2), chunks = 0 }, 'Pipeline: chunks must be an integer >= 1, got 0')
    rejects({ devices = devs(2), schedule = 'zero' }, "Pipeline: schedule must be 'gpipe', '1f1b'")
    rejects({ devices = devs(2), checkpoint = 'some' }, "Pipeline: checkpoint must be 'never', 'except_last' or 'always'")
    rejects({ devices = devs(2), balance = { 3, 3 } }, 'Pipeline: balance sums to 6 atoms, the model has 7')
    rejects({ devices = devs(2), balance = { 7, 0 } }, 'Pipeline: balance[2] must be an integer >= 1')
    rejects({ devices = devs(2), balance = { 7 } }, 'Pipeline: balance has 1 entries for 2 stages')
    rejects({ devices = devs(2), balance = 'speed' }, "Pipeline: balance must be 'time', 'memory', 'params' or a list")
    rejects({ devices = devs(3), replicas = 2 }, 'Pipeline: 3 devices cannot hold 2 replicas')
    rejects({ devices = devs(2), chunk = 2 }, "Pipeline: unknown option 'chunk' (did you mean 'chunks'?)")
    local ok, err = pcall(pipe.schedule_text, pipe, 1e9)   -- (a table overflow)
    assert.is_false(ok)
    assert.matches('Pipeline: schedule_text: a timeline of 1000000000 micro-batches is too wide to print; pass chunks up to 1024', err, 1, true)
    rejects({ devices = devs(3) }, 'Pipeline: the model has 2 atoms, fewer than 3 stages', nn.Sequential { nn.ReLU(), nn.ReLU() })
    rejects({ devices = devs(2), interleave = 2 }, "Pipeline: interleave needs schedule = 'interleaved'")
    rejects({ devices = devs(2), schedule = 'interleaved', interleave = 1 }, 'Pipeline: interleave must be an integer >= 2, got 1')
    rejects({ devices = devs(1), schedule = 'interleaved' }, 'Pipeline: the interleaved schedule needs at least 2 devices')
    rejects({ devices = devs(2), schedule = 'interleaved', interleave = 4 }, 'Pipeline: the model has 7 atoms, fewer than 8 stages')
    rejects({ devices = devs(2), schedule = 'interleaved', balance = { 4, 3 } }, 'Pipeline: balance has 2 entries for 4 stages')
    local inter = Pipeline(cnn(), { devices = devs(2), chunks = 2, schedule = 'interleaved', balance = { 2, 2, 2, 1 } })
    assert.equal('interleaved, 4 stages, 2 micro-batches, 10 steps\n'
      .. 'stage 1 (cpu:0) | F1 F2 .  .  .  .  .  .  B1 B2\n'
      .. 'stage 2 (cpu:1) | .  F1 F2 .  .  .  .  B1 B2 . \n'
      .. 'stage 3 (cpu:0) | .  .  F1 F2 .  B1 .  B2 .  . \n'
      .. 'stage 4 (cpu:1) | .  .  .  F1 B1 F2 B2 .  .  . ', inter:schedule_text())
    assert.matches('interleaved, 2 chunks, 4 stages on 2 devices, atoms per stage cpu:0: 2, cpu:1: 2, cpu:0: 2, cpu:1: 1',
      tostring(inter), 1, true)
    local measured = Pipeline(cnn(), { devices = devs(2), chunks = 4, schedule = 'interleaved', sample = lunet.randn(8, 3, 8, 8) })
    local report = measured:balance_report()
    assert.matches('Pipeline: 4 stages on 2 devices, balance time, interleaved, 4 micro-batches: bubble 11%', report, 1, true)
    local zbm = Pipeline(cnn(), { devices = devs(2), chunks = 4, schedule = 'zb', sample = lunet.randn(8, 3, 8, 8) })
    assert.matches('Pipeline: 2 stages, balance time, zb, 4 micro-batches: bubble 8% (idle steps, F, B and W alike)',
      zbm:balance_report(), 1, true)
    assert.matches('stage 3 on cpu:0', report, 1, true)
    local ok, err = pcall(Pipeline, 'model')
    assert.matches('Pipeline: expected an nn.Module, got string', err, 1, true)
    local bad = Pipeline(cnn(), { devices = devs(2), chunks = 1, schedule = function(S, M)
      return { { { 2, 1, 'F' } }, { { 1, 1, 'F' } }, { { 2, 1, 'B' } }, { { 1, 1, 'B' } } }
    end })
    ok, err = pcall(bad.forward_loss, bad, nn.CrossEntropyLoss(), lunet.randn(4, 3, 8, 8), lunet.randint(1, 6, { 4 }))
    assert.is_false(ok)
    assert.matches('Pipeline: schedule: deadlock: F(stage 2, micro-batch 1) at step 1 needs F(stage 1, micro-batch 1), which runs at step 2',
      err, 1, true)
    ok, err = pcall(pipe.forward_loss, pipe, function() end, lunet.randn(4, 3, 8, 8), lunet.randint(1, 6, { 4 }))
    assert.matches('Pipeline: forward_loss: criterion must be an nn loss module', err, 1, true)
    ok, err = pcall(pipe.forward_loss, pipe, nn.CrossEntropyLoss(), lunet.randn(4, 3, 8, 8), lunet.randint(1, 6, { 3 }))
    assert.matches('Pipeline: forward_loss: target has 3 rows, the input 4', err, 1, true)
    ok, err = pcall(pipe.to, pipe, 'cpu:1')
    assert.matches('Pipeline: to: the stages live on cpu:0, cpu:1', err, 1, true)
    -- a dtype: every stage in place; apply reaches the model's modules
    pipe:to('float64')
    assert.equal('float64', pipe.module[1].weight.dtype)
    assert.equal('cpu:1', pipe.module[7].weight.device)
    local loss = pipe:forward_loss(nn.CrossEntropyLoss(), lunet.randn(4, 3, 8, 8, { dtype = 'float64' }),
      lunet.randint(1, 6, { 4 }))
    loss:backward()
    assert.equal('float64', pipe.module[1].weight.grad.dtype)
    local n = 0
    pipe:apply(function(m) if m.__name == 'nn.Linear' then n = n + 1 end end)
    assert.equal(2, n)
  end)

  it("keeps deferred BatchNorm's running statistics equal to the whole batch's, and counts each batch once", function()
    lunet.manual_seed(4)
    local x, y = lunet.randn(10, 3, 8, 8), lunet.randint(1, 6, { 10 })
    local crit = nn.CrossEntropyLoss()
    for _, ck in ipairs({ 'never', 'always' }) do
      for _, schedule in ipairs({ 'gpipe', '1f1b', 'interleaved', 'zb' }) do
        local ref = cnn(3, true)
        local pipe = Pipeline(cnn(3, true), { devices = devs(2), chunks = 4, schedule = schedule, checkpoint = ck,
          deferred_bn = true })
        for _ = 1, 2 do
          crit(ref(x), y)
          pipe:forward_loss(crit, x, y):backward()
        end
        local bn, rbn = pipe.module[2], ref[2]
        assert.is_true(rel(bn.running_mean, rbn.running_mean) < 1e-5)
        assert.is_true(rel(bn.running_var, rbn.running_var) < 1e-5)
        assert.equal(2, bn.num_batches_tracked:item())
      end
      -- by default each micro-batch updates them (once, even when recomputed)
      local plain = Pipeline(cnn(3, true), { devices = devs(2), chunks = 4, checkpoint = ck })
      plain:forward_loss(crit, x, y):backward()
      assert.equal(4, plain.module[2].num_batches_tracked:item())
    end
    -- pipe(x) in training too; eval uses the running statistics as the model does
    local ref, pipe = cnn(3, true), Pipeline(cnn(3, true), { devices = devs(2), chunks = 3, deferred_bn = true })
    ref(x); pipe(x)
    assert.is_true(rel(pipe.module[2].running_var, ref[2].running_var) < 1e-5)
    ref:eval(); pipe:eval()
    assert.is_true(rel(pipe(x), ref(x)) < 1e-5)
  end)

  it('trains data parallel pipelines (2 replicas x 2 stages) as one device does', function()
    for _, schedule in ipairs({ 'gpipe', '1f1b' }) do
      for _, opt in ipairs({ 'sgd', 'adam' }) do
        local ref, pipe = train_both({ devices = devs(4), replicas = 2, chunks = 3, schedule = schedule, opt = opt,
          B = 11 })
        assert.is_true(sd_diff(pipe, ref) < 1e-5, schedule .. ' ' .. opt)
        -- the replicas stay equal to each other
        local p1, p2 = pipe.models[1]:parameters(), pipe.models[2]:parameters()
        for i = 1, #p1 do assert.is_true(rel(p2[i], p1[i]) < 1e-6) end
        assert.equal('cpu:2', p2[1].device)
        assert.equal(2 * #p1, #pipe:parameters())
      end
    end
    local pipe = Pipeline(cnn(), { devices = devs(4), replicas = 2 })
    local ok, err = pcall(pipe.forward, pipe, lunet.randn(4, 3, 8, 8))
    assert.matches('Pipeline: forward: with replicas, train with pipe:forward_loss', err, 1, true)
    assert.equal(4, lunet.no_grad(function() return pipe(lunet.randn(4, 3, 8, 8)) end):size(1))
  end)

  it("holds less activation memory per stage with 1F1B and zero-bubble than with GPipe when chunks > stages", function()
    lunet.manual_seed(6)
    -- (activations of MBs a micro-batch: a stage collects garbage once it grew by 1 MB)
    local x, y = lunet.randn(128, 3, 32, 32), lunet.randint(1, 6, { 128 })
    local crit = nn.CrossEntropyLoss()
    local function model()
      return nn.Sequential { nn.Conv2d(3, 16, 3, { padding = 1 }), nn.ReLU(), nn.Conv2d(16, 16, 3, { padding = 1 }),
        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 16 * 16, 5) }
    end
    local function peaks(schedule)
      local pipe = Pipeline(model(), { devices = devs(2), chunks = 16, schedule = schedule, balance = { 4, 3 } })
      pipe:forward_loss(crit, x, y):backward()   -- (buffers and gradients made once)
      lunet.synchronize()
      collectgarbage(); collectgarbage()
      local base = {}
      for s = 1, 2 do lunet.reset_peak_memory_stats('cpu:' .. s - 1); base[s] = lunet.memory_allocated('cpu:' .. s - 1) end
      pipe:forward_loss(crit, x, y):backward()
      lunet.synchronize()
      local p = {}
      for s = 1, 2 do p[s] = lunet.max_memory_allocated('cpu:' .. s - 1) - base[s] end
      return p
    end
    local g, f = peaks('gpipe'), peaks('1f1b')
    -- stage 1 keeps 2 micro-batches' activations with 1F1B, all 16 with GPipe
    -- (garbage waits for the stage's next collection: see Stage.lua)
    assert.is_true(f[1] < 0.6 * g[1], ('stage 1: 1F1B %d bytes, GPipe %d'):format(f[1], g[1]))
    assert.is_true(f[2] < g[2], ('stage 2: 1F1B %d bytes, GPipe %d'):format(f[2], g[2]))
    -- zero-bubble keeps a micro-batch until its W: at most 2 (the stages) on each
    local z = peaks('zb')
    for s = 1, 2 do
      assert.is_true(z[s] < 0.6 * g[s], ('stage %d: zero-bubble %d bytes, GPipe %d'):format(s, z[s], g[s]))
    end
  end)

  it('evaluates under no_grad with either schedule: every forward runs, loss and outputs as the model', function()
    lunet.manual_seed(9)
    local x, y = lunet.randn(11, 3, 8, 8), lunet.randint(1, 6, { 11 })
    local crit = nn.CrossEntropyLoss()
    local ref = cnn(5)
    local want = lunet.no_grad(function() return crit(ref(x), y):item() end)
    for _, schedule in ipairs({ 'gpipe', '1f1b', 'zb' }) do
      local pipe = Pipeline(cnn(5), { devices = devs(2), chunks = 4, schedule = schedule, balance = { 4, 3 } })
      local loss = lunet.no_grad(function() return pipe:forward_loss(crit, x, y) end)
      assert.near(want, loss:item(), 1e-5 * math.abs(want), schedule)
      assert.is_true(rel(loss:output(), lunet.no_grad(function() return ref(x) end)) < 1e-5, schedule)
    end
  end)

  it("checks the profile's split against its neighbours' measured stage times (and theirs), and leaves the model as it was", function()
    local refine = require('lunet.parallel.pipeline_balance').refine
    local list = require('lunet.parallel.atoms').of(cnn(2, true))   -- 8 atoms, BatchNorm among them
    local n = #list
    assert.equal(8, n)
    local costs = {}
    for i = 1, n do costs[i] = { time = 1, memory = 0, act = 0 } end
    -- stage times as measured: atom 3 costs 10, the others 1 (the profile thought them equal)
    local function time_of(lo, hi)
      local t = 0
      for i = lo, hi do t = t + (i == 3 and 10 or 1) end
      return t
    end
    local x = lunet.randn(2, 3, 8, 8)
    -- from {2, 6} (2 vs 15): one atom later {3, 5} (12 vs 5) beats it by more than the margin, and {1, 7}
    assert.same({ 3, 5 }, refine(list, { 2, 6 }, x, 'cpu:0', costs, { speed = { 1, 1 } }, time_of))
    -- {4, 4} (13 vs 4): {3, 5} is 12, faster by less than the 10% margin (noise could give that): kept
    assert.same({ 4, 4 }, refine(list, { 4, 4 }, x, 'cpu:0', costs, { speed = { 1, 1 } }, time_of))
    -- a second device twice as fast: {2, 6} gives 2 vs 7.5, {3, 5} 12 vs 2.5, {1, 7} 1 vs 8: kept
    assert.same({ 2, 6 }, refine(list, { 2, 6 }, x, 'cpu:0', costs, { speed = { 1, 2 } }, time_of))
    -- a profile off by more than one atom is walked back one cut at a time, each step
    -- faster by the margin: atoms 3..8 cost 4; {2,6} 24, {3,5} 20, {4,4} 16, {5,3} 14, {6,2} 18
    local function steep(lo, hi)
      local t = 0
      for i = lo, hi do t = t + (i >= 3 and 4 or 1) end
      return t
    end
    assert.same({ 5, 3 }, refine(list, { 2, 6 }, x, 'cpu:0', costs, { speed = { 1, 1 } }, steep))
    -- a neighbour over a stage's memory is not a candidate: atom 3 does not fit stage 1
    local heavy = {}
    for i = 1, n do heavy[i] = { time = 1, memory = i == 3 and 100 or 0, act = 0 } end
    assert.same({ 2, 6 }, refine(list, { 2, 6 }, x, 'cpu:0', heavy, { speed = { 1, 1 }, memory = { 50, 1000 } }, time_of))
    -- measured for real: a split of every atom, and BatchNorm's running
    -- statistics and the random state as they were
    local model = cnn(2, true)
    local al = require('lunet.parallel.atoms').of(model)
    local mean, var = model[2].running_mean:clone(), model[2].running_var:clone()
    local seed, offset = lunet.rng_state()
    local got = refine(al, { 4, 4 }, x, 'cpu:0', costs, { speed = { 1, 1 } })
    assert.equal(n, got[1] + got[2])
    assert.is_true(got[1] >= 1 and got[2] >= 1)
    assert.equal(0, (model[2].running_mean - mean):abs():max():item())
    assert.equal(0, (model[2].running_var - var):abs():max():item())
    local s2, o2 = lunet.rng_state()
    assert.equal(seed, s2)
    assert.equal(offset, o2)
    for _, p in ipairs(model:parameters()) do assert.is_nil(p.grad) end
  end)

  it('balances by measured time (the default) or memory, and reports the stages', function()
    lunet.manual_seed(1)
    -- (wide convolutions first: by time they get a stage of their own; at
    -- 32x32 they outweigh the run-to-run noise of balance's measurements)
    local x = lunet.randn(16, 3, 32, 32)
    local function model()
      lunet.manual_seed(1)
      return nn.Sequential { nn.Conv2d(3, 64, 3, { padding = 1 }), nn.Conv2d(64, 64, 3, { padding = 1 }), nn.ReLU(),
        nn.MaxPool2d(4), nn.Flatten(), nn.Linear(64 * 64, 8), nn.ReLU(), nn.Linear(8, 5) }
    end
    local lazy = Pipeline(model(), { devices = devs(2), chunks = 4 })
    assert.matches('balance by time at the first batch', tostring(lazy), 1, true)
    assert.matches('not balanced yet', lazy:balance_report(), 1, true)
    local y = lunet.no_grad(function() return lazy(x) end)
    assert.is_true(rel(y, lunet.no_grad(function() return model()(x) end)) < 1e-5)
    local pipe = Pipeline(model(), { devices = devs(2), chunks = 4, sample = x })
    assert.equal(8, pipe.counts[1] + pipe.counts[2])
    assert.is_true(pipe.counts[1] <= 3, 'stage 1 got ' .. pipe.counts[1] .. ' atoms')
    local report = pipe:balance_report()
    assert.matches('Pipeline: 2 stages, balance time, 1f1b, 4 micro-batches: bubble 20%', report, 1, true)
    assert.matches('stage 1 on cpu:0: atoms 0..', report, 1, true)
    assert.matches('stage 2 on cpu:1: atoms .-7 %(%d%): [%d.]+ ms a micro%-batch', report)
    local mem = Pipeline(model(), { devices = devs(2), chunks = 4, sample = x, balance = 'memory' })
    assert.equal(8, mem.counts[1] + mem.counts[2])
    assert.matches('balance memory', mem:balance_report(), 1, true)
    assert.matches('not measured', Pipeline(model(), { devices = devs(2), balance = 'params' }):balance_report(), 1, true)
  end)

  it('recomputes dropout with the masks of the first forward', function()
    local function model()
      lunet.manual_seed(5)
      return nn.Sequential { nn.Flatten(), nn.Linear(3 * 8 * 8, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 5) }
    end
    lunet.manual_seed(9)
    local x, y = lunet.randn(8, 3, 8, 8), lunet.randint(1, 6, { 8 })
    local crit, res = nn.CrossEntropyLoss(), {}
    for i, ck in ipairs({ 'never', 'always' }) do
      local pipe = Pipeline(model(), { devices = devs(2), chunks = 4, checkpoint = ck, balance = { 3, 2 } })
      local opt = optim.SGD(pipe:parameters(), { lr = 0.1 })
      lunet.manual_seed(10)
      for _ = 1, 2 do
        opt:zero_grad()
        pipe:forward_loss(crit, x, y):backward()
        opt:step()
      end
      res[i] = pipe
    end
    assert.is_true(sd_diff(res[2], res[1]) < 1e-6)
  end)

  it('rebalances from the times measured in training, moving atoms and their optimizer state', function()
    local function model()
      lunet.manual_seed(2)
      return nn.Sequential { nn.Conv2d(3, 32, 3, { padding = 1 }), nn.ReLU(), nn.Conv2d(32, 32, 3, { padding = 1 }),
        nn.ReLU(), nn.Conv2d(32, 32, 3, { padding = 1 }), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 8 * 8, 5) }
    end
    lunet.manual_seed(3)
    local x, y = lunet.randn(16, 3, 8, 8), lunet.randint(1, 6, { 16 })
    local crit = nn.CrossEntropyLoss()
    local ref = model()
    -- (stage 2 gets both 32-channel convolutions: ten times the first's work)
    local pipe = Pipeline(model(), { devices = devs(2), chunks = 4, balance = { 1, 7 } })
    -- (SGD with momentum: Adam's first steps turn the rounding of near-zero gradients into whole steps)
    local ro, po = make_opt('sgd', ref:parameters()), make_opt('sgd', pipe:parameters())
    local function steps(n)
      for _ = 1, n do
        ro:zero_grad(); crit(ref(x), y):backward(); ro:step()
        po:zero_grad(); pipe:forward_loss(crit, x, y):backward(); po:step()
      end
    end
    local ok, err = pcall(pipe.rebalance, pipe)
    assert.matches('Pipeline: rebalance: no training step has been timed yet', err, 1, true)
    steps(3)
    assert.matches('measured in training', pipe:balance_report(), 1, true)
    -- the measured times set by hand (a spec must not depend on the machine's
    -- speed): stage 2 ten times stage 1, as its two wide convolutions make it
    lunet.synchronize()
    pipe.timing:collect()
    pipe.timing.sum, pipe.timing.count = { 0.004, 0.04 }, { 4, 4 }
    local counts, moved = pipe:rebalance({ optimizer = po })
    assert.is_true(moved)
    assert.is_true(counts[1] > 2, 'stage 1 got ' .. counts[1] .. ' atoms')
    assert.equal(8, counts[1] + counts[2])
    assert.equal('cpu:0', pipe.module[3].weight.device)
    for _, p in ipairs(pipe:parameters()) do
      for _, v in pairs(po.state[p]) do if lunet.is_tensor(v) then assert.equal(p.device, v.device) end end
    end
    steps(2)
    assert.is_true(sd_diff(pipe, ref) < 1e-5)
    -- interleaved: 4 stages on 2 devices, the last one holding the three convolutions' share of the work
    ref = model()
    pipe = Pipeline(model(), { devices = devs(2), chunks = 4, schedule = 'interleaved', balance = { 1, 1, 1, 5 } })
    ro, po = make_opt('sgd', ref:parameters()), make_opt('sgd', pipe:parameters())
    steps(2)
    lunet.synchronize()
    pipe.timing:collect()
    pipe.timing.sum, pipe.timing.count = { 0.004, 0.001, 0.001, 0.04 }, { 4, 4, 4, 4 }
    counts, moved = pipe:rebalance({ optimizer = po, sample = x })
    assert.is_true(moved)
    assert.is_true(counts[4] < 5, 'stage 4 kept ' .. counts[4] .. ' atoms')
    assert.equal(8, counts[1] + counts[2] + counts[3] + counts[4])
    steps(2)
    assert.is_true(sd_diff(pipe, ref) < 1e-5)
    -- zero-bubble: every action of a stage timed, its W's too (3 a micro-batch)
    ref = model()
    pipe = Pipeline(model(), { devices = devs(2), chunks = 4, schedule = 'zb', balance = { 1, 7 } })
    ro, po = make_opt('sgd', ref:parameters()), make_opt('sgd', pipe:parameters())
    steps(1)
    assert.same({ 12, 12 }, pipe.timing.n)
    lunet.synchronize()
    pipe.timing:collect()
    pipe.timing.sum, pipe.timing.count = { 0.004, 0.04 }, { 4, 4 }
    counts, moved = pipe:rebalance({ optimizer = po })
    assert.is_true(moved and counts[1] > 2, 'stage 1 got ' .. counts[1] .. ' atoms')
    steps(2)
    assert.is_true(sd_diff(pipe, ref) < 1e-5)
  end)

  it('raises an error inside a stage in Lua, without a hang, and stays usable', function()
    local boom = nn.Identity()
    boom.forward = function(self, x)
      if self.fail then error('nn.Boom: exploded on purpose', 0) end
      return x
    end
    local function model()
      local m = cnn(8)
      m:add(boom)
      return m
    end
    local ref = model()
    local pipe = Pipeline(model(), { devices = devs(3), chunks = 4, balance = { 3, 3, 2 } })
    local crit = nn.CrossEntropyLoss()
    lunet.manual_seed(2)
    local x, y = lunet.randn(8, 3, 8, 8), lunet.randint(1, 6, { 8 })
    boom.fail = true
    local ok, err = pcall(pipe.forward_loss, pipe, crit, x, y)
    assert.is_false(ok)
    assert.matches('Pipeline: forward of micro-batch 1 at stage 3 (cpu:2): nn.Boom: exploded on purpose', err, 1, true)
    -- a wrong input fails at the first stage
    ok, err = pcall(pipe.forward_loss, pipe, crit, lunet.randn(8, 2, 8, 8), y)
    assert.is_false(ok)
    assert.matches('at stage 1 (cpu:0)', err, 1, true)
    -- the same pipeline then trains as the reference does
    boom.fail = false
    local loss = pipe:forward_loss(crit, x, y)
    loss:backward()
    local want = crit(ref(x), y)
    want:backward()
    assert.near(want:item(), loss:item(), 1e-5)
    for i, p in ipairs(pipe:parameters()) do assert.is_true(rel(p.grad, ref:parameters()[i].grad) < 1e-5) end
    ok, err = pcall(loss.backward, loss)
    assert.matches('Pipeline: backward: already run for this batch', err, 1, true)
  end)

  it("drops a batch whose backward has not run when the next forward_loss comes, and says so at its backward", function()
    -- (the stages hold one batch: the first batch's backward ran over the
    -- second's buffers, gradients silently wrong, or failed naming a layer)
    local crit = nn.CrossEntropyLoss()
    lunet.manual_seed(3)
    local x1, y1 = lunet.randn(8, 3, 8, 8), lunet.randint(1, 6, { 8 })
    local x2, y2 = lunet.randn(8, 3, 8, 8), lunet.randint(1, 6, { 8 })
    for _, schedule in ipairs { 'gpipe', '1f1b', 'zb' } do
      for _, between in ipairs { 'train', 'no_grad' } do
        local ref = cnn(9)
        local pipe = Pipeline(cnn(9), { devices = devs(2), chunks = 4, schedule = schedule, balance = { 4, 3 } })
        local first = pipe:forward_loss(crit, x1, y1)
        local second
        if between == 'train' then second = pipe:forward_loss(crit, x2, y2)
        else lunet.no_grad(function() pipe:forward_loss(crit, x2, y2) end) end
        local ok, err = pcall(first.backward, first)
        assert.is_false(ok, schedule .. ' ' .. between)
        assert.matches('Pipeline: backward: a later forward_loss ran before this loss\'s backward', err, 1, true)
        -- the second batch (or, after an evaluation, the first again) trains as one device does
        local x, y = x2, y2
        if between == 'train' then second:backward()
        else x, y = x1, y1; pipe:forward_loss(crit, x, y):backward() end
        crit(ref(x), y):backward()
        for i, p in ipairs(pipe:parameters()) do
          assert.is_true(rel(p.grad, ref:parameters()[i].grad) < 1e-5, schedule .. ' ' .. between .. ' parameter ' .. i)
        end
      end
    end
    -- abandon(): the pending batch dropped on request (a loss lost, or not finite); nothing pending: false
    local ref1 = cnn(9)
    local pipe1 = Pipeline(cnn(9), { devices = devs(2), chunks = 4, balance = { 4, 3 } })
    local lost = pipe1:forward_loss(crit, x1, y1)
    assert.is_true(pipe1:abandon())
    assert.is_false(pipe1:abandon())
    local ok1, err1 = pcall(lost.backward, lost)
    assert.is_false(ok1)
    assert.matches("a later forward_loss ran before this loss's backward", err1, 1, true)
    pipe1:forward_loss(crit, x2, y2):backward()
    crit(ref1(x2), y2):backward()
    for i, p in ipairs(pipe1:parameters()) do assert.is_true(rel(p.grad, ref1:parameters()[i].grad) < 1e-5) end
    -- pipe(x) between a forward_loss and its backward holds no batch of its own
    local ref = cnn(9)
    local pipe = Pipeline(cnn(9), { devices = devs(2), chunks = 4, balance = { 4, 3 } })
    local loss = pipe:forward_loss(crit, x1, y1)
    lunet.no_grad(function() pipe(x2) end)
    loss:backward()
    crit(ref(x1), y1):backward()
    for i, p in ipairs(pipe:parameters()) do assert.is_true(rel(p.grad, ref:parameters()[i].grad) < 1e-5) end
  end)

  it('raises an error in a zero-bubble weight-gradient action in Lua, and trains on afterwards', function()
    local ref, model = cnn(8), cnn(8)
    local armed = false
    -- (a hook on the last layer's weight runs when W accumulates its gradient)
    model:get(7).weight:register_post_accumulate_grad_hook(function()
      if armed then error('hook: refused on purpose', 0) end
    end)
    local pipe = Pipeline(model, { devices = devs(2), chunks = 2, schedule = 'zb', balance = { 4, 3 } })
    local crit = nn.CrossEntropyLoss()
    lunet.manual_seed(2)
    local x, y = lunet.randn(8, 3, 8, 8), lunet.randint(1, 6, { 8 })
    armed = true
    local loss = pipe:forward_loss(crit, x, y)
    local ok, err = pcall(loss.backward, loss)
    assert.is_false(ok)
    assert.matches('Pipeline: weight gradient of micro-batch 1 at stage 2 (cpu:1): ', err, 1, true)
    assert.matches('refused on purpose', err, 1, true)
    armed = false
    pipe:zero_grad()
    loss = pipe:forward_loss(crit, x, y)
    loss:backward()
    crit(ref(x), y):backward()
    for i, p in ipairs(pipe:parameters()) do assert.is_true(rel(p.grad, ref:parameters()[i].grad) < 1e-5) end
  end)

  it('raises an error on a stage\'s device (a NaN check) in Lua once, and trains on afterwards', function()
    local armed = false
    local Check = nn.Module:extend('NaNCheck')
    function Check:__init() end
    function Check:forward(x)
      if armed then C.ln_stream_inject_error(2, 'NaN check failed on cpu:2') end
      return x
    end
    local function model()
      lunet.manual_seed(12)
      return nn.Sequential { nn.Flatten(), nn.Linear(3 * 8 * 8, 16), nn.ReLU(), Check(), nn.Linear(16, 5) }
    end
    local ref, pipe = model(), Pipeline(model(), { devices = devs(3), chunks = 4, balance = { 2, 1, 2 } })
    local crit = nn.CrossEntropyLoss()
    local ro, po = optim.SGD(ref:parameters(), { lr = 0.1 }), optim.SGD(pipe:parameters(), { lr = 0.1 })
    lunet.manual_seed(13)
    local x, y = lunet.randn(8, 3, 8, 8), lunet.randint(1, 6, { 8 })
    armed = true
    local ok, err = pcall(function()
      po:zero_grad()
      local loss = pipe:forward_loss(crit, x, y)
      loss:backward()
      loss:item()
      lunet.synchronize()
    end)
    armed = false
    assert.is_false(ok)
    assert.matches('NaN check failed on cpu:2', err, 1, true)
    assert.has_no.errors(function() lunet.synchronize() end)
    for _ = 1, 2 do
      ro:zero_grad(); crit(ref(x), y):backward(); ro:step()
      po:zero_grad(); pipe:forward_loss(crit, x, y):backward(); po:step()
    end
    assert.is_true(sd_diff(pipe, ref) < 1e-5)
  end)
end)
