-- lunet.parallel.DataParallel over 2, 3 and 4 virtual CPU devices: after a
-- few optimizer steps the parameters equal those of one device trained on the
-- same global batches (the reference is the plain module on cpu:0), and the
-- replicas stay bit-identical to each other.
local lunet = require 'lunet'
local nn, optim = lunet.nn, lunet.optim
local ffi = require 'ffi'
local fixtures = require 'support.fixtures'
local C = lunet.C
-- fault injection (ln_stream_inject_*): c/include/lunet_internal.h
if not pcall(ffi.typeof, 'ln_rec_stats') then ffi.cdef(require 'lunet.cdef_internal') end

local function cnn(bn)
  -- (no conv bias before BatchNorm: its true gradient is 0, and Adam would amplify the rounding noise)
  local layers = { nn.Conv2d(3, 4, 3, { padding = 1, bias = not bn }) }
  if bn then layers[#layers + 1] = nn.BatchNorm2d(4) end
  for _, m in ipairs({ nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 6), nn.ReLU(),
    nn.Linear(6, 5) }) do layers[#layers + 1] = m end
  return nn.Sequential(layers)
end

-- targets: class ids 1..5, or (kind 'ignore') with every third one
-- ignore_index, or (kind 'regression') 5 floats per sample
local function batches(count, B, kind)
  local list = {}
  for i = 1, count do
    local y
    if kind == 'regression' then y = lunet.randn(B, 5)
    elseif kind == 'binary' then y = lunet.rand(B, 5):gt(0.5):to('float32')
    elseif kind == 'ignore' then
      local t = lunet.randint(1, 6, { B }):totable()
      for j = 1, B, 3 do t[j] = -100 end
      y = lunet.tensor(t, { dtype = 'int64' })
    else y = lunet.randint(1, 6, { B }) end
    list[i] = { lunet.randn(B, 3, 8, 8), y }
  end
  return list
end

-- largest |a - b| / largest |b| over a tensor (a may live on another device)
local rel, max_rel = fixtures.rel, fixtures.max_rel

-- every replica's parameters (and buffers, unless they are broadcast at the
-- next forward) equal replica 1's bit for bit
local function assert_identical(dp, params_only)
  for _, which in ipairs(params_only and { 'params' } or { 'params', 'bufs' }) do
    local first = dp[which][1]
    for k = 2, dp.n do
      for i, t in ipairs(dp[which][k]) do
        local same = t:to('cpu:0'):eq(first[i]):all():item()
        assert.is_true(same, ('%s %d of replica %d differs from replica 1'):format(which, i, k))
      end
    end
  end
end

-- back to one device: everything on the others must be freed first (JIT
-- traces can keep the last tensors they touched alive: flush them)
local function release_devices()
  jit.flush()
  for _ = 1, 4 do collectgarbage() end
  pcall(lunet.synchronize)
  lunet.set_cpu_devices(1)
end

local function make_opt(kind, params)
  if kind == 'adam' then return optim.Adam(params, { lr = 0.01 }) end
  return optim.SGD(params, { lr = 0.1, momentum = 0.9 })
end

-- one device: micro-batches accumulated, then a step. With per_shard sizes the
-- reference runs each shard through the model separately (BatchNorm with
-- per-replica statistics) and keeps the running stats of shard 1 only, as
-- DataParallel broadcasts replica 1's buffers.
local function ref_step(model, opt, crit, micro, sizes)
  opt:zero_grad()
  local loss_sum = 0
  for _, b in ipairs(micro) do
    local x, y = b[1], b[2]
    local out
    if sizes then
      local outs, pos, keep = {}, 1, nil
      for k = 1, #sizes do
        if sizes[k] > 0 then
          outs[#outs + 1] = model(x:narrow(1, pos, sizes[k]))
          pos = pos + sizes[k]
          if k == 1 then keep = lunet.no_grad(function()
            local c = {}
            for i, t in ipairs(model:buffers()) do c[i] = t:clone() end
            return c
          end) end
        end
      end
      lunet.no_grad(function() for i, t in ipairs(model:buffers()) do t:copy_(keep[i]) end end)
      out = lunet.cat(outs, 1)
    else
      out = model(x)
    end
    local loss = crit(out, y)
    loss:backward()
    loss_sum = loss_sum + loss:item()
  end
  opt:step()
  return loss_sum
end

local function dp_step(dp, opt, crit, micro, use_no_sync, floss)
  opt:zero_grad()
  local loss_sum = 0
  for j, b in ipairs(micro) do
    local function go()
      local loss
      if floss then loss = dp:forward_loss(crit, b[1], b[2]) else loss = crit(dp(b[1]), b[2]) end
      loss:backward()
      loss_sum = loss_sum + loss:item()
    end
    if use_no_sync and j < #micro then dp:no_sync(go) else go() end
  end
  opt:step()
  return loss_sum
end

-- train a reference and a DataParallel copy side by side; returns the worst
-- relative parameter difference (and buffer difference) after `steps` steps
local function compare(N, o)
  lunet.manual_seed(o.seed or 7)
  local model = o.model and o.model() or cnn(o.bn)
  local ref = model:clone()
  local dp = lunet.parallel.DataParallel(model, { devices = o.devices, balance = o.balance,
    accumulate = o.accumulate, compress = o.compress, sync_bn = o.sync_bn, bucket_mb = o.bucket_mb or 0.0005,
    overlap = o.overlap })
  assert.are.equal(N, dp.n)
  local ro, dpo = make_opt(o.optim, ref:parameters()), make_opt(o.optim, dp:parameters())
  local crit = o.crit or nn.CrossEntropyLoss()
  local k = o.accumulate or o.micro or 1
  local p0 = lunet.no_grad(function()
    local c = {}
    for i, p in ipairs(ref:parameters()) do c[i] = p:clone() end
    return c
  end)
  for _ = 1, o.steps or 3 do
    local micro = batches(k, o.B or 10, o.targets)
    local sizes = (o.bn and not o.sync_bn) and dp:split_sizes(o.B or 10) or nil
    local l1 = ref_step(ref, ro, crit, micro, sizes)
    local l2 = dp_step(dp, dpo, crit, micro, o.no_sync, o.forward_loss)
    assert.is_true(math.abs(l1 - l2) <= 1e-4 * math.abs(l1) + 1e-6, ('loss %g vs %g'):format(l2, l1))
  end
  assert_identical(dp, o.bn and not o.sync_bn)
  if o.bn and not o.sync_bn then
    -- in eval mode every replica normalises with replica 1's running stats (broadcast)
    local x = lunet.randn(o.B or 10, 3, 8, 8)
    ref:eval(); dp:eval()
    local w = rel(dp(x), ref(x))
    ref:train(); dp:train()
    assert.is_true(w <= 1e-5, 'eval outputs: relative difference ' .. w)
    assert_identical(dp)
  end
  local pr, pd = ref:parameters(), dp.module:parameters()
  local worst
  if o.compress then
    -- compare the updates (bf16 carries ~3 significant digits)
    worst = 0
    for i = 1, #pr do
      local dref = pr[i] - p0[i]
      local ddp = pd[i]:to('cpu:0') - p0[i]
      worst = math.max(worst, rel(ddp, dref))
    end
  else
    worst = max_rel(pd, pr)
  end
  local bworst = max_rel(dp.module:buffers(), ref:buffers())
  return worst, bworst, dp
end

describe('parallel.DataParallel', function()
  for _, N in ipairs({ 2, 3, 4 }) do
    describe(('over %d devices'):format(N), function()
      setup(function() lunet.set_cpu_devices(N) end)
      teardown(release_devices)

      it('SGD with momentum, even split: same parameters as one device', function()
        local w = compare(N, { B = 12 })
        assert.is_true(w <= 1e-5, 'relative difference ' .. w)
      end)

      it('Adam, uneven split (batch 11): same parameters as one device', function()
        local w = compare(N, { B = 11, optim = 'adam' })
        assert.is_true(w <= 1e-5, 'relative difference ' .. w)
      end)

      it('weighted split (balance = {1, 2, ...}) and a batch smaller than the device count', function()
        local weights = {}
        for k = 1, N do weights[k] = k end
        local w = compare(N, { B = 13, balance = weights })
        assert.is_true(w <= 1e-5, 'relative difference ' .. w)
        local w2 = compare(N, { B = N - 1, optim = 'adam' })
        assert.is_true(w2 <= 1e-5, 'relative difference (small batch) ' .. w2)
      end)

      it('accumulate = 2 and 4, and no_sync, equal accumulation on one device', function()
        for _, acc in ipairs({ 2, 4 }) do
          local w = compare(N, { B = 9, accumulate = acc, steps = 2 })
          assert.is_true(w <= 1e-5, ('accumulate %d: relative difference %g'):format(acc, w))
        end
        local w = compare(N, { B = 9, micro = 3, no_sync = true, steps = 2, optim = 'adam' })
        assert.is_true(w <= 1e-5, 'no_sync: relative difference ' .. w)
        -- two synchronised backward passes without zero_grad between them: the
        -- reduced gradient left in .grad is not counted again
        w = compare(N, { B = 9, micro = 2, steps = 2 })
        assert.is_true(w <= 1e-5, 'synchronised accumulation: relative difference ' .. w)
      end)

      it('BatchNorm with buffers broadcast from replica 1 (per-replica batch statistics)', function()
        local w, b = compare(N, { B = 10, bn = true })
        assert.is_true(w <= 1e-5, 'relative difference ' .. w)
        assert.is_true(b <= 1e-5, 'buffers: relative difference ' .. b)
      end)

      it('BatchNorm with sync_bn: global batch statistics, as one device', function()
        local w, b = compare(N, { B = 11, bn = true, sync_bn = true, optim = 'adam' })
        assert.is_true(w <= 1e-5, 'relative difference ' .. w)
        assert.is_true(b <= 1e-5, 'running stats: relative difference ' .. b)
        -- fewer samples than devices: idle replicas still end with the same running stats
        w, b = compare(N, { B = N - 1, bn = true, sync_bn = true, steps = 2 })
        assert.is_true(w <= 1e-5, 'small batch: relative difference ' .. w)
        assert.is_true(b <= 1e-5, 'small batch: running stats relative difference ' .. b)
      end)

      it('forward_loss (the criterion on each shard): same parameters and loss as one device', function()
        local cases = {
          { B = 12 },                                           -- even split, mean
          { B = 11, optim = 'adam' },                           -- uneven split
          { B = N - 1 },                                        -- fewer samples than devices
          { B = 10, crit = nn.CrossEntropyLoss({ reduction = 'sum' }) },
          { B = 10, targets = 'ignore', optim = 'adam' },       -- the mean over the targets not ignored
          { B = 10, crit = nn.NLLLoss(), model = function()     -- NLLLoss after LogSoftmax
            local m = cnn(); m:add(nn.LogSoftmax(2)); return m end },
          { B = 9, crit = nn.MSELoss(), targets = 'regression' },   -- the mean over elements
          { B = 7, crit = nn.BCEWithLogitsLoss(), targets = 'binary', optim = 'adam' },
          { B = 9, accumulate = 2, steps = 2 },
          { B = 9, micro = 3, no_sync = true, steps = 2 },
          { B = 10, bn = true },                                -- per-replica statistics
          { B = 11, bn = true, sync_bn = true },                -- global statistics
          { B = 12, balance = 'auto', steps = 4 },              -- the split measured as it goes
        }
        for i, c in ipairs(cases) do
          c.forward_loss = true
          local w, b = compare(N, c)
          assert.is_true(w <= 1e-5, ('case %d: relative difference %g'):format(i, w))
          assert.is_true(b <= 1e-5, ('case %d: buffers: relative difference %g'):format(i, b))
        end
      end)

      it("compress = 'bf16': updates within bf16's precision", function()
        local w = compare(N, { B = 12, compress = 'bf16', optim = 'sgd' })
        -- bf16 keeps 8 significant bits: each summed gradient is within ~2^-8 of
        -- its value, measured ~2^-7 of the largest update; allow 2^-6
        assert.is_true(w <= 2 ^ -6, 'relative difference of the updates ' .. w)
        assert.is_true(w > 0, 'bf16 rounding should show')
      end)
    end)
  end

  -- lunet.fit with accumulate = k: one optimizer step per k batches on the
  -- mean of their gradients, an epoch's last shorter group stepped too
  -- (26 samples in batches of 4: 7 batches, groups of 3, 3 and 1)
  local function accum_loader()
    local ds = lunet.data.Synthetic { n = 26, shape = { 3, 8, 8 }, classes = 5, seed = 3 }
    return lunet.data.DataLoader(ds, { batch_size = 4 })
  end

  -- PyTorch's accumulation loop on one device: (loss / r):backward() for the r
  -- batches of each group, then a step
  local function manual_accumulate(model, opt, loader, k, epochs)
    local crit = nn.CrossEntropyLoss()
    local nb = #loader
    for _ = 1, epochs do
      local i = 0
      for x, y in loader:iter() do
        local pos = i % k
        local r = math.min(k, nb - (i - pos))
        if pos == 0 then opt:zero_grad() end
        (crit(model(x), y) / r):backward()
        i = i + 1
        if pos + 1 == r then opt:step() end
      end
    end
  end

  for _, N in ipairs({ 2, 3 }) do
    describe(('lunet.fit with accumulate over %d devices'):format(N), function()
      setup(function() lunet.set_cpu_devices(N) end)
      teardown(release_devices)

      local fit_opts = { epochs = 2, quiet = true, progress = false }
      local function run_fit(model, o)
        local opts = { optimizer = o.optimizer }
        for key, v in pairs(fit_opts) do opts[key] = v end
        opts.accumulate = o.accumulate
        return lunet.fit(model, accum_loader(), opts)
      end

      it('one step per k batches, replicas identical, equal to one device accumulating', function()
        for _, case in ipairs({ { k = 3, optim = 'sgd' }, { k = 2, optim = 'adam' }, { k = 3, optim = 'adam', fit_k = true } }) do
          lunet.manual_seed(11)
          local model = cnn()
          local one, manual = model:clone(), model:clone()
          -- the DataParallel's own accumulate, or fit's option over a DataParallel of accumulate 1
          local dp = lunet.parallel.DataParallel(model, { bucket_mb = 0.0005,
            accumulate = not case.fit_k and case.k or nil })
          local opt = make_opt(case.optim, dp:parameters())
          local hist = run_fit(dp, { optimizer = opt, accumulate = case.fit_k and case.k or nil })
          local want = run_fit(one, { optimizer = make_opt(case.optim, one:parameters()), accumulate = case.k })
          manual_accumulate(manual, make_opt(case.optim, manual:parameters()), accum_loader(), case.k, 2)
          local steps = math.ceil(7 / case.k)
          assert.are.same({ steps, 2 * steps }, { hist[1].step, hist[2].step })
          assert.are.same({ steps, 2 * steps }, { want[1].step, want[2].step })
          assert_identical(dp)
          local w = max_rel(dp.module:parameters(), one:parameters())
          assert.is_true(w <= 1e-5, ('k = %d, %s: DataParallel vs one device: relative difference %g'):format(
            case.k, case.optim, w))
          w = max_rel(one:parameters(), manual:parameters())
          assert.is_true(w <= 1e-5, ('k = %d, %s: fit vs the manual loop: relative difference %g'):format(
            case.k, case.optim, w))
          for e = 1, 2 do
            assert.is_true(math.abs(hist[e].train_loss - want[e].train_loss) <= 1e-5 * want[e].train_loss)
          end
        end
      end)

      it('a run stopped at a step checkpoint and resumed ends bit for bit as an uninterrupted one', function()
        local path = os.tmpname()
        local function run(max_steps, resume)
          lunet.manual_seed(13)
          local dp = lunet.parallel.DataParallel(cnn(), { accumulate = 3 })
          local opt = make_opt('adam', dp:parameters())
          local hist = lunet.fit(dp, accum_loader(), { epochs = 2, optimizer = opt, quiet = true, progress = false,
            checkpoint = path, checkpoint_every = { steps = 2 }, max_steps = max_steps, resume = resume })
          return dp, hist
        end
        local whole = run()
        os.remove(path)
        run(4)   -- stops after the first group of epoch 2, with a checkpoint there
        local resumed, hist = run(nil, true)
        os.remove(path)
        assert.are.equal(6, hist[#hist].step)
        assert_identical(resumed)
        for i, p in ipairs(resumed.module:parameters()) do
          assert.is_true(p:eq(whole.module:parameters()[i]):all():item(), 'parameter ' .. i .. ' differs')
        end
      end)

      it('a per-step scheduler and max_steps count optimizer steps', function()
        lunet.manual_seed(12)
        local dp = lunet.parallel.DataParallel(cnn(), { accumulate = 3 })
        local opt = optim.SGD(dp:parameters(), { lr = 0.1 })
        local sched = optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 })
        local hist = lunet.fit(dp, accum_loader(), { epochs = 2, optimizer = opt, scheduler = sched,
          scheduler_step = 'step', quiet = true, progress = false })
        assert.are.equal(6, hist[2].step)
        assert.is_true(math.abs(opt.param_groups[1].lr - 0.1 * 0.5 ^ 6) < 1e-12, 'lr ' .. opt.param_groups[1].lr)
        hist = lunet.fit(dp, accum_loader(), { epochs = 3, optimizer = opt, max_steps = 4, quiet = true, progress = false })
        assert.are.equal(4, hist[#hist].step)
        assert_identical(dp)
      end)
    end)
  end

  describe('pacing (3 devices: DataParallel on cpu:0-1, cpu:2 opens a gate)', function()
    setup(function() lunet.set_cpu_devices(3) end)
    teardown(release_devices)

    it('the host queues up to two steps ahead of the devices, and no further', function()
      lunet.manual_seed(6)
      local ffi = require 'ffi'
      local dp = lunet.parallel.DataParallel(cnn(), { devices = { 'cpu:0', 'cpu:1' } })
      local opt, crit = optim.SGD(dp:parameters(), { lr = 0.1 }), nn.CrossEntropyLoss()
      local data = batches(3, 6)
      local gate, gate2, fwd1, fwd2 = ffi.new('int[1]'), ffi.new('int[1]'), ffi.new('ln_event[1]'), ffi.new('ln_event[1]')
      local function finish(out, i)
        crit(out, data[i][2]):backward()
        opt:step()
      end
      lunet.synchronize()
      -- cpu:1 holds until cpu:2 opens the gate, 2 s from now: the host queues
      -- steps 1 and 2 long before that; step 3 must wait for step 1's forward
      -- (a host that waited too early or not at all fails the checks below)
      assert.equal(0, C.ln_stream_inject_gate(1, gate))
      assert.equal(0, C.ln_stream_inject_opener(2, gate, 2))
      opt:zero_grad()
      local out = dp(data[1][1])
      assert.equal(0, C.ln_event_record(1, fwd1))         -- step 1's forward on cpu:1 ends here
      finish(out, 1)
      -- a second gate holds step 2 on cpu:1 another second
      assert.equal(0, C.ln_stream_inject_gate(1, gate2))
      assert.equal(0, C.ln_stream_inject_opener(2, gate2, 1))
      opt:zero_grad()
      out = dp(data[2][1])
      assert.equal(0, C.ln_event_record(1, fwd2))         -- and step 2's here
      finish(out, 2)
      assert.equal(0, C.ln_event_query(fwd1))              -- step 1 is still held on cpu:1
      opt:zero_grad()
      out = dp(data[3][1])
      -- having to wait, the host slept until the devices were one forward
      -- behind, not two: step 2's forward is done too (one wake-up per two
      -- steps), which a host waiting for step 1's alone would not see
      assert.equal(1, C.ln_event_query(fwd1))
      assert.equal(1, C.ln_event_query(fwd2))
      finish(out, 3)
      lunet.synchronize()
      assert_identical(dp)
    end)

    it('stays within one step once the first device holds more than dp.ahead_bytes', function()
      lunet.manual_seed(6)
      local ffi = require 'ffi'
      local dp = lunet.parallel.DataParallel(cnn(), { devices = { 'cpu:0', 'cpu:1' } })
      dp.ahead_bytes = 0                                   -- every step counts as large
      local opt, crit = optim.SGD(dp:parameters(), { lr = 0.1 }), nn.CrossEntropyLoss()
      local data = batches(2, 6)
      local gate, fwd1 = ffi.new('int[1]'), ffi.new('ln_event[1]')
      lunet.synchronize()
      assert.equal(0, C.ln_stream_inject_gate(1, gate))
      assert.equal(0, C.ln_stream_inject_opener(2, gate, 1))
      opt:zero_grad()
      local out = dp(data[1][1])
      assert.equal(0, C.ln_event_record(1, fwd1))
      crit(out, data[1][2]):backward()
      opt:step()
      assert.equal(0, C.ln_event_query(fwd1))              -- held on cpu:1
      opt:zero_grad()
      out = dp(data[2][1])                                 -- waits for step 1's forward
      assert.equal(1, C.ln_event_query(fwd1))
      assert.equal(1, gate[0])
      crit(out, data[2][2]):backward()
      opt:step()
      lunet.synchronize()
      assert_identical(dp)
    end)
  end)

  describe('errors and the Module interface (2 devices)', function()
    setup(function() lunet.set_cpu_devices(2) end)
    teardown(release_devices)

    it('forward_loss: clear errors for what it cannot split; training goes on after them', function()
      lunet.manual_seed(3)
      local dp = lunet.parallel.DataParallel(cnn(), { devices = { 'cpu:0', 'cpu:1' } })
      local x, y = lunet.randn(6, 3, 8, 8), lunet.randint(1, 6, { 6 })
      local function err_of(...)
        local ok, e = pcall(dp.forward_loss, dp, ...)
        assert.is_false(ok)
        return tostring(e)
      end
      assert.matches('forward_loss: criterion must be an nn loss module', err_of(function() end, x, y), 1, true)
      assert.matches("reduction must be 'mean' or 'sum', got 'none'",
        err_of(nn.CrossEntropyLoss({ reduction = 'none' }), x, y), 1, true)
      assert.matches('class-weighted mean is not supported',
        err_of(nn.CrossEntropyLoss({ weight = lunet.ones(5) }), x, y), 1, true)
      assert.matches('target has 5 rows, the input 6', err_of(nn.CrossEntropyLoss(), x, y:narrow(1, 1, 5)), 1, true)
      assert.matches('conv2d', err_of(nn.CrossEntropyLoss(), lunet.randn(6, 4, 8, 8), y), 1, true)
      -- the loss: item, tensor, printing, one backward only
      local crit = nn.CrossEntropyLoss()
      local ref = dp.module:clone()
      local loss, outs = dp:forward_loss(crit, x, y)
      assert.equal(2, #outs)
      assert.equal('cpu:1', outs[2].device)
      local want = crit(ref(x), y):item()
      assert.is_true(math.abs(loss:item() - want) <= 1e-5 * want, ('loss %g vs %g'):format(loss:item(), want))
      assert.is_true(math.abs(loss:tensor():item() - want) <= 1e-5 * want)
      assert.matches('^parallel%.Loss%(mean, 2 replicas%): %d', tostring(loss))
      loss:backward()
      local ok, e = pcall(loss.backward, loss)
      assert.is_false(ok)
      assert.matches('second time', tostring(e), 1, true)
      -- then training goes on, as one device
      local ro, dpo = optim.SGD(ref:parameters(), { lr = 0.1 }), optim.SGD(dp:parameters(), { lr = 0.1 })
      for _ = 1, 2 do
        local micro = batches(1, 6)
        ref_step(ref, ro, crit, micro)
        dp_step(dp, dpo, crit, micro, false, true)
      end
      assert.is_true(max_rel(dp.module:parameters(), ref:parameters()) <= 1e-5)
      assert_identical(dp)
      -- float64, and in eval mode without gradients
      dp:to('float64')
      ref = dp.module:clone()   -- (the same float64 values as every replica)
      local x64 = x:to('float64')
      for _, p in ipairs(dp:parameters()) do p.grad = nil end
      dp:forward_loss(crit, x64, y):backward()
      crit(ref(x64), y):backward()
      for i, p in ipairs(ref:parameters()) do
        assert.are.equal('float64', dp.module:parameters()[i].grad.dtype)
        assert.is_true(rel(dp.module:parameters()[i].grad, p.grad) <= 1e-12, 'float64 gradient ' .. i)
      end
      dp:eval(); ref:eval()
      local l = lunet.no_grad(function() return dp:forward_loss(crit, x64, y):item() end)
      local w = lunet.no_grad(function() return crit(ref(x64), y):item() end)
      assert.is_true(math.abs(l - w) <= 1e-12 * w, ('eval loss %g vs %g'):format(l, w))
    end)

    it('a shape error in forward reaches Lua; training goes on after it', function()
      lunet.manual_seed(3)
      local dp = lunet.parallel.DataParallel(cnn(), { devices = { 'cpu:0', 'cpu:1' } })
      local ok, err = pcall(dp, lunet.randn(6, 4, 8, 8))
      assert.is_false(ok)
      assert.truthy(tostring(err):find('conv2d', 1, true), err)
      local ref = dp.module:clone()
      local ro, dpo = optim.SGD(ref:parameters(), { lr = 0.1 }), optim.SGD(dp:parameters(), { lr = 0.1 })
      local crit = nn.CrossEntropyLoss()
      for _ = 1, 2 do
        local micro = batches(1, 6)
        ref_step(ref, ro, crit, micro)
        dp_step(dp, dpo, crit, micro)
      end
      assert.is_true(max_rel(dp.module:parameters(), ref:parameters()) <= 1e-5)
      assert_identical(dp)
    end)

    it('an error on the second replica (a NaN check) reaches Lua; no worker hangs', function()
      lunet.manual_seed(4)
      local armed = false
      local Check = nn.Module:extend('NaNCheck')
      function Check:__init() end
      function Check:forward(x)
        if armed and x.device == 'cpu:1' then C.ln_stream_inject_error(1, 'NaN check failed on cpu:1') end
        return x
      end
      local model = nn.Sequential { nn.Conv2d(3, 4, 3, { padding = 1 }), Check(), nn.Flatten(), nn.Linear(256, 5) }
      local ref = model:clone()
      local dp = lunet.parallel.DataParallel(model, { devices = { 'cpu:0', 'cpu:1' }, bucket_mb = 0.001 })
      local ro, dpo = optim.SGD(ref:parameters(), { lr = 0.1 }), optim.SGD(dp:parameters(), { lr = 0.1 })
      local crit = nn.CrossEntropyLoss()
      armed = true
      local ok, err = pcall(function()
        dpo:zero_grad()
        local loss = crit(dp(lunet.randn(6, 3, 8, 8)), lunet.randint(1, 6, { 6 }))
        loss:backward()
        loss:item()
        lunet.synchronize()
      end)
      armed = false
      assert.is_false(ok)
      assert.truthy(tostring(err):find('NaN check failed on cpu:1', 1, true), err)
      assert.has_no.errors(function() lunet.synchronize() end)   -- raised once: no device holds a copy
      for _ = 1, 2 do
        local micro = batches(1, 6)
        ref_step(ref, ro, crit, micro)
        dp_step(dp, dpo, crit, micro)
      end
      assert.is_true(max_rel(dp.module:parameters(), ref:parameters()) <= 1e-5)
      assert_identical(dp)
    end)

    it('state_dict is the inner module\'s; load_state_dict reaches every replica; save and load', function()
      lunet.manual_seed(5)
      local model = cnn(true)
      local dp = lunet.parallel.DataParallel(model, { devices = { 'cpu:0', 'cpu:1' } })
      local sd = dp:state_dict()
      local own = model:state_dict()
      local n1, n2 = 0, 0
      for k in pairs(sd) do n1 = n1 + 1; assert.truthy(own[k], k) end
      for _ in pairs(own) do n2 = n2 + 1 end
      assert.are.equal(n2, n1)
      local other = cnn(true)
      local path = os.tmpname()
      lunet.save(path, other:state_dict())
      dp:load_state_dict(lunet.load(path))
      os.remove(path)
      assert.is_true(max_rel(dp.module:parameters(), other:parameters()) == 0)
      assert_identical(dp)
      assert.has_error(function() dp:to('cpu:1') end)
      dp:to('float64')
      assert.are.equal('float64', dp.replicas[2]:parameters()[1].dtype)
      local out = dp(lunet.randn(5, 3, 8, 8, { dtype = 'float64' }))
      assert.are.same({ 5, 5 }, out:size())
      assert.are.equal('cpu:0', out.device)
      assert.truthy(tostring(dp):find('DataParallel', 1, true))
    end)

    it('lunet.fit trains through it', function()
      lunet.manual_seed(6)
      local data = lunet.data
      local ds = data.Synthetic { n = 32, shape = { 3, 8, 8 }, classes = 5, seed = 1 }
      local loader = data.DataLoader(ds, { batch_size = 8 })
      local model = cnn()
      local ref = model:clone()
      local dp = lunet.parallel.DataParallel(model, { devices = { 'cpu:0', 'cpu:1' } })
      assert.is_true(dp:forward_loss_ok(nn.CrossEntropyLoss()))   -- so fit takes forward_loss
      local hist = lunet.fit(dp, loader, { epochs = 2, lr = 0.05, quiet = true, progress = false })
      local want = lunet.fit(ref, loader, { epochs = 2, lr = 0.05, quiet = true, progress = false })
      assert.are.equal(2, #hist)
      for e = 1, 2 do
        assert.is_true(math.abs(hist[e].train_loss - want[e].train_loss) <= 1e-5 * want[e].train_loss,
          ('epoch %d: loss %g vs %g'):format(e, hist[e].train_loss, want[e].train_loss))
        assert.are.equal(want[e].train_acc, hist[e].train_acc)
      end
      assert.is_true(max_rel(dp.module:parameters(), ref:parameters()) <= 1e-5)
      assert_identical(dp)
    end)

    it('balance = auto moves samples toward the faster device', function()
      local dp = lunet.parallel.DataParallel(cnn(), { devices = { 'cpu:0', 'cpu:1' }, balance = 'auto' })
      assert.are.same({ 8, 8 }, dp:split_sizes(16))
      -- measured: cpu:0 processed 8 samples in 1 s, cpu:1 8 samples in 3 s
      dp:observe({ 1, 3 }, { 8, 8 })
      assert.are.same({ 12, 4 }, dp:split_sizes(16))
      -- and from real timings: a few steps run and keep a valid split
      local crit = nn.CrossEntropyLoss()
      for _ = 1, 3 do
        local loss = crit(dp(lunet.randn(16, 3, 8, 8)), lunet.randint(1, 6, { 16 }))
        loss:backward()
      end
      local s = dp:split_sizes(16)
      assert.are.equal(16, s[1] + s[2])
      assert.is_true(s[1] >= 1 and s[2] >= 1)
    end)

    it('balance = auto gives a really slower device a smaller share', function()
      -- cpu:1 made slow by real work on its stream: per sample, 64x64 matrix
      -- products that cpu:0 does not do (a ~30x slower device, far beyond
      -- timing noise; the speed estimate is smoothed over steps)
      local Slow = nn.Module:extend('SlowOnCpu1')
      function Slow:__init() end
      function Slow:forward(x)
        if x.device == 'cpu:1' then
          lunet.no_grad(function()
            local w = lunet.randn(64, 64, { device = x.device })
            for _ = 1, 8 * x:size(1) do w = w:matmul(w) * 0.01 end
          end)
        end
        return x
      end
      local model = nn.Sequential { nn.Conv2d(3, 4, 3, { padding = 1 }), Slow(), nn.Flatten(), nn.Linear(256, 5) }
      local dp = lunet.parallel.DataParallel(model, { devices = { 'cpu:0', 'cpu:1' }, balance = 'auto' })
      local crit = nn.CrossEntropyLoss()
      for _ = 1, 10 do
        local loss = crit(dp(lunet.randn(16, 3, 8, 8)), lunet.randint(1, 6, { 16 }))
        loss:backward()
        loss:item()
      end
      local s = dp:split_sizes(16)
      assert.are.equal(16, s[1] + s[2])
      assert.is_true(s[2] >= 1 and s[2] <= 4, ('split %d/%d'):format(s[1], s[2]))
    end)

    it('launches each bucket during backward, replicas interleaved', function()
      local dp = lunet.parallel.DataParallel(cnn(), { devices = { 'cpu:0', 'cpu:1' }, bucket_mb = 0.0002 })
      local log = {}
      local r = dp.reducer
      local on, launch, finish = r._on_grad, r._launch, r._end_backward
      r._on_grad = function(self, k, i) log[#log + 1] = 'g' .. k; return on(self, k, i) end
      r._launch = function(self, b) log[#log + 1] = 'L'; return launch(self, b) end
      r._end_backward = function(self, ok) log[#log + 1] = 'E'; return finish(self, ok) end
      nn.CrossEntropyLoss()(dp(lunet.randn(6, 3, 8, 8)), lunet.randint(1, 6, { 6 })):backward()
      local s = table.concat(log)
      assert.is_true(#r.buckets >= 3, 'buckets: ' .. #r.buckets)
      local _, launches = s:gsub('L', '')
      assert.are.equal(#r.buckets, launches)
      -- every bucket started from a hook, the first one before the last gradient of replica 1
      assert.truthy(s:match('L.*g1.*E$'), s)
      assert.falsy(s:match('EL'), s)
      assert.truthy(s:find('g1g1g2g2', 1, true) or s:find('g1g2', 1, true), s)
    end)

    it('all-reduces every bucket on the comm streams but the last, which runs on the compute streams', function()
      local dp = lunet.parallel.DataParallel(cnn(), { devices = { 'cpu:0', 'cpu:1' }, bucket_mb = 0.0002 })
      local ref = lunet.parallel.DataParallel(cnn(), { devices = { 'cpu:0', 'cpu:1' }, overlap = false })
      ref:load_state_dict(dp:state_dict())
      local modes = {}
      local allreduce = dp.comm.allreduce
      dp.comm.allreduce = function(cm, ts, opts)
        modes[#modes + 1] = opts.async and 'a' or 's'
        return allreduce(cm, ts, opts)
      end
      local x, y = lunet.randn(6, 3, 8, 8), lunet.randint(1, 6, { 6 })
      for _ = 1, 2 do
        for _, m in ipairs { dp, ref } do
          m:zero_grad()
          nn.CrossEntropyLoss()(m(x), y):backward()
        end
      end
      local buckets = dp.reducer.buckets
      assert.is_true(#buckets >= 3, 'buckets: ' .. #buckets)
      local per_step = ('a'):rep(#buckets - 1) .. 's'
      assert.are.equal(per_step .. per_step, table.concat(modes))
      -- the same reduced gradients as one all-reduce after backward
      local pa, pb = dp:parameters(), ref:parameters()
      for i = 1, #pa do
        assert.is_true((pa[i].grad - pb[i].grad):abs():max():item() <= 1e-6 * (1 + pb[i].grad:abs():max():item()))
      end
    end)

    it('a second backward through a reduced forward is an error', function()
      local dp = lunet.parallel.DataParallel(cnn(), { devices = { 'cpu:0', 'cpu:1' } })
      local loss = nn.CrossEntropyLoss()(dp(lunet.randn(6, 3, 8, 8)), lunet.randint(1, 6, { 6 }))
      loss:backward({ retain_graph = true })
      local ok, err = pcall(function() loss:backward() end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find('second backward after the gradients were reduced', 1, true), err)
      -- a new forward starts afresh
      nn.CrossEntropyLoss()(dp(lunet.randn(6, 3, 8, 8)), lunet.randint(1, 6, { 6 })):backward()
    end)

    it("frozen parameters are left alone; compress = 'fp16'", function()
      lunet.manual_seed(8)
      local model = cnn()
      local frozen = model:get(1).weight
      frozen.requires_grad = false
      local before = lunet.no_grad(function() return frozen:clone() end)
      local ref = model:clone()
      local dp = lunet.parallel.DataParallel(model, { devices = { 'cpu:0', 'cpu:1' }, compress = 'fp16' })
      local ro, dpo = optim.SGD(ref:parameters(), { lr = 0.1 }), optim.SGD(dp:parameters(), { lr = 0.1 })
      local crit = nn.CrossEntropyLoss()
      for _ = 1, 2 do
        local micro = batches(1, 8)
        ref_step(ref, ro, crit, micro)
        dp_step(dp, dpo, crit, micro)
      end
      assert.is_true(frozen:eq(before):all():item())
      assert.is_nil(frozen.grad)
      assert.is_true(max_rel(dp.module:parameters(), ref:parameters()) <= 2e-3)
      assert_identical(dp)
    end)

    it('rejects bad options with clear errors', function()
      local m = cnn()
      assert.has_error(function() lunet.parallel.DataParallel(m, { accumulate = 0 }) end,
        'DataParallel: accumulate must be an integer >= 1, got 0')
      assert.has_error(function() lunet.parallel.DataParallel(m, { compress = 'int8' }) end,
        "DataParallel: compress must be nil, 'fp16' or 'bf16', got int8")
      assert.has_error(function() lunet.parallel.DataParallel(m, { devices = { 'cpu:0', 'cpu:1' }, balance = { 1 } }) end,
        'DataParallel: balance has 1 weights for 2 devices')
      assert.has_error(function() lunet.parallel.DataParallel('x') end)
    end)
  end)
end)
