-- The planner (issue 19, items 5, 7, 8): partition.split is exact (against
-- brute force), gives faster devices more work and respects memory; the plan
-- picks a pipeline when data parallel does not fit and data parallel for a
-- small model with a large batch (stated costs, so nothing depends on the
-- machine's speed); simulate's formulas equal hand computations; the
-- profile's fields are what the allocator and the model say.
local lunet = require 'lunet'
local nn = lunet.nn
local parallel = lunet.parallel
local partition = parallel.partition

local MB = 2 ^ 20

-- every split of n atoms into p non-empty contiguous stages
local function compositions(n, p, f, acc)
  acc = acc or {}
  if p == 1 then acc[#acc + 1] = n; f(acc); acc[#acc] = nil; return end
  for k = 1, n - p + 1 do
    acc[#acc + 1] = k
    compositions(n - k, p - 1, f, acc)
    acc[#acc] = nil
  end
end

local function brute(costs, p, opts)
  local best
  compositions(#costs, p, function(counts)
    local times, mems = partition.evaluate(costs, counts, opts)
    for j = 1, p do if mems[j] > ((opts.memory or {})[j] or math.huge) then return end end
    local slow = 0
    for j = 1, p do slow = math.max(slow, times[j]) end
    if not best or slow < best then best = slow end
  end)
  return best
end

describe('partition.split', function()
  it('finds the slowest stage of the best split (brute force on random costs, speeds and memory)', function()
    math.randomseed(19)
    local tried, infeasible = 0, 0
    for _ = 1, 300 do
      local n, p = math.random(1, 9), math.random(1, 4)
      if p <= n then
        local costs = {}
        for i = 1, n do costs[i] = { time = math.random(1, 100) / 10, memory = math.random(0, 5), act = math.random(0, 3) } end
        local opts = { speed = {}, memory = {}, inflight = {} }
        for j = 1, p do
          opts.speed[j] = math.random(1, 4) / 2
          opts.memory[j] = math.random(4, 30)
          opts.inflight[j] = math.random(1, 3)
        end
        local want = brute(costs, p, opts)
        local ok, counts, slow = pcall(partition.split, costs, p, opts)
        tried = tried + 1
        if want == nil then
          infeasible = infeasible + 1
          assert.is_false(ok)
          assert.matches('partition.split: ', counts, 1, true)
        else
          assert.is_true(ok, counts)
          assert.equal(p, #counts)
          local total = 0
          for j = 1, p do assert.is_true(counts[j] >= 1); total = total + counts[j] end
          assert.equal(n, total)
          local times, mems = partition.evaluate(costs, counts, opts)
          local got = 0
          for j = 1, p do
            got = math.max(got, times[j])
            assert.is_true(mems[j] <= opts.memory[j])
          end
          assert.near(want, got, 1e-12)
          assert.near(want, slow, 1e-12)
        end
      end
    end
    assert.is_true(tried > 200 and infeasible > 5 and infeasible < tried - 100)
  end)

  it('gives a faster device more atoms', function()
    local costs = {}
    for i = 1, 12 do costs[i] = 1 end
    assert.same({ 6, 6 }, partition.split(costs, 2))
    assert.same({ 9, 3 }, partition.split(costs, 2, { speed = { 3, 1 } }))
    assert.same({ 2, 4, 6 }, partition.split(costs, 3, { speed = { 1, 2, 3 } }))
  end)

  it('keeps each stage within its device memory, or says what does not fit', function()
    local costs = {}
    for i = 1, 6 do costs[i] = { time = 1, memory = 10, act = 1 } end
    -- time alone would split 3 + 3; 2 + 4 is forced by stage 1's memory
    assert.same({ 3, 3 }, partition.split(costs, 2))
    assert.same({ 2, 4 }, partition.split(costs, 2, { memory = { 25, 100 } }))
    -- 1F1B's stage 1 keeps 2 micro-batches: 3 atoms need 33 + 3 = 36
    assert.same({ 2, 4 }, partition.split(costs, 2, { memory = { 35, 100 }, inflight = { 2, 1 } }))
    local ok, err = pcall(partition.split, { 1, { time = 1, memory = 50 }, 1 }, 2, { memory = { 40, 40 } })
    assert.is_false(ok)
    assert.matches('atom 2 alone needs 50 B (1 micro-batch in flight), more than any of the 2 devices holds (the most: 40 B)', err, 1, true)
    ok, err = pcall(partition.split, costs, 2, { memory = { 30, 30 } })
    assert.is_false(ok)
    assert.matches("no split of 6 atoms into 2 stages fits the devices' memory", err, 1, true)
    ok, err = pcall(partition.split, costs, 7)
    assert.matches('7 stages for 6 atoms', err, 1, true)
    ok, err = pcall(partition.split, { 1, 'x' }, 1)
    assert.matches('costs[2] must be a number or a table', err, 1, true)
    ok, err = pcall(partition.split, { 1, 2 }, 2, { speed = { 1 } })
    assert.matches('speed has 1 entries for 2 stages', err, 1, true)
    ok, err = pcall(partition.split, { 1, { time = -1 } }, 1)
    assert.matches('costs[2].time must be a number >= 0', err, 1, true)
  end)

  it('splits stages that loop over the devices for the best score (brute force), within each device\'s memory', function()
    -- (the score: the slowest device, its stages' times added)
    local function score_of(P) return function(times)
      local load = {}
      for j, t in ipairs(times) do local d = (j - 1) % P + 1; load[d] = (load[d] or 0) + t end
      local worst = 0
      for _, l in pairs(load) do worst = math.max(worst, l) end
      return worst
    end end
    math.randomseed(11)
    for _ = 1, 40 do
      local n, P = math.random(4, 10), 2
      local S = 2 * P
      if n >= S then
        local costs = {}
        for i = 1, n do costs[i] = { time = math.random(1, 20), memory = math.random(0, 3), act = 0 } end
        local opts = { score = score_of(P), memory = ({ nil, 12, 7 })[math.random(1, 3)] }
        local function fits(mems)
          local held = { 0, 0 }
          for j = 1, S do held[(j - 1) % P + 1] = held[(j - 1) % P + 1] + mems[j] end
          return held[1] <= (opts.memory or math.huge) and held[2] <= (opts.memory or math.huge)
        end
        local best
        compositions(n, S, function(c)
          local times, mems = partition.evaluate(costs, c)
          if not fits(mems) then return end
          local v = opts.score(times)
          if not best or v < best then best = v end
        end)
        local ok, counts = pcall(partition.split_looped, costs, S, P, opts)
        assert.equal(best ~= nil, ok, tostring(counts))
        if ok then
          local times, mems = partition.evaluate(costs, counts)
          assert.is_true(fits(mems))
          assert.equal(best, opts.score(times))
        else
          assert.matches('fits the devices\' memory', counts, 1, true)
        end
      end
    end
    local ok, err = pcall(partition.split_looped, { 1, 2, 3, 4 }, 4, 2, {})
    assert.is_false(ok)
    assert.matches('opts.score must be a function', err, 1, true)
  end)
end)

-- a stated profile: n equal atoms (time at batch `batch`)
local function stated(n, o)
  local list = {}
  for i = 1, n do
    list[i] = { fwd = o.fwd, bwd = o.bwd, act_bytes = o.act or 0, param_bytes = o.params or 0,
      out_bytes = o.out or 0, batch = o.batch }
  end
  return list
end

describe('parallel.plan', function()
  setup(function() lunet.set_cpu_devices(2) end)
  teardown(function() collectgarbage(); collectgarbage(); lunet.set_cpu_devices(1) end)
  local fast = { copy = { alpha = 1e-5, beta = 1e-10 }, allreduce = { alpha = 1e-5, beta = 1e-10 }, overlap = 1 }

  it('picks a pipeline when data parallel does not fit the memory limit', function()
    -- 4 atoms of 100 MB of parameters: with Adam 1.6 GB in all, 1 GB a device
    local prof = stated(4, { fwd = 0.01, bwd = 0.02, batch = 32, params = 100 * MB, act = MB, out = MB / 4 })
    local p = parallel.plan(nil, nil, { devices = { 'cpu:0', 'cpu:1' }, batch = 32, profile = prof, link = fast,
      memory = 2 ^ 30, speed = { 1, 1 } })
    assert.equal('pipeline', p.chosen.kind)
    assert.equal(2, p.chosen.stages)
    assert.same({ 2, 2 }, p.chosen.balance)
    assert.is_true(p.chosen.fits)
    for _, c in ipairs(p.candidates) do
      if c.kind == 'data' or c.kind == 'single' then assert.is_false(c.fits) end
      for _, m in ipairs(c.memory) do
        if c.fits then assert.is_true(m <= 0.9 * 2 ^ 30) end
      end
    end
    assert.matches('the model and its Adam state need 1.56 GB', p.reason, 1, true)
    assert.matches('each device holds 1.00 GB: 2-stage pipeline', p.reason, 1, true)
    assert.matches('(data parallel x2 does not fit: cpu:0 needs 1.57 GB, holds 1.00 GB)', p.reason, 1, true)
    local text = tostring(p)
    assert.matches('<- chosen', text, 1, true)
    assert.matches('data parallel x2', text, 1, true)
  end)

  it('predicts the interleaved schedule faster than 1F1B with few micro-batches, and auto builds it', function()
    local prof = stated(8, { fwd = 0.01, bwd = 0.02, batch = 32, params = 1024, act = MB, out = MB / 4 })
    local cm = parallel.cost.new(prof, { link = fast })
    local plain, inter = cm:pipeline(2, 1, 32, 2, '1f1b'), cm:pipeline(2, 1, 32, 2, 'interleaved')
    assert.same({ 4, 4 }, plain.balance)
    assert.same({ 2, 2, 2, 2 }, inter.balance)
    assert.equal(2, inter.interleave)
    assert.equal(2, inter.stages)
    assert.is_true(inter.step < plain.step, ('%g %g'):format(inter.step, plain.step))
    assert.is_true(inter.bubble < plain.bubble)
    assert.equal('pipeline 2 stages, 2 chunks, interleaved 1F1B x2', parallel.cost.label(inter))
    local p = parallel.plan(nil, nil, { devices = { 'cpu:0', 'cpu:1' }, batch = 32, profile = prof, link = fast,
      memory = 2 ^ 30, speed = { 1, 1 }, kinds = { 'pipeline' }, chunks = { 2 } })
    assert.equal('interleaved', p.chosen.schedule)
    assert.matches('interleaved 1F1B x2 (stages a device)', p.reason, 1, true)
    local model = nn.Sequential { nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU(),
      nn.Linear(4, 4), nn.Linear(4, 2) }
    local pipe = parallel.wrap(model, p, p.chosen)
    assert.equal(4, pipe.S)
    assert.equal('cpu:1', pipe.stages[1][4].device)
    assert.same({ 2, 2, 2, 2 }, pipe.counts)
  end)

  it('predicts zero-bubble faster than 1F1B by the weights\' share of backward (w_share), and auto builds it', function()
    local prof = stated(4, { fwd = 0.01, bwd = 0.02, batch = 32, params = 1024, act = MB, out = MB / 4 })
    for _, a in ipairs(prof) do a.w_share = 0.5 end
    local cm = parallel.cost.new(prof, { link = fast })
    local plain, zb = cm:pipeline(2, 1, 32, 4, '1f1b'), cm:pipeline(2, 1, 32, 4, 'zb')
    -- micro-batches of 8: F, B and W of 5 ms a stage; 1F1B (m + p - 1) 3 of them, zero-bubble 3m + 1
    -- (and the boundary copies' 10 us each)
    assert.near(5 * 3 * 0.005, plain.step, 1e-4)
    assert.near(13 * 0.005, zb.step, 1e-4)
    assert.equal('pipeline 2 stages, 4 chunks, zero-bubble', parallel.cost.label(zb))
    -- a micro-batch is held until its W: the last stage holds as many as the first
    assert.is_true(zb.memory[2] > plain.memory[2])
    -- without a weights' share (w_share 0) nothing fills the bubble
    for _, a in ipairs(prof) do a.w_share = nil end
    assert.is_true(parallel.cost.new(prof, { link = fast }):pipeline(2, 1, 32, 4, 'zb').step >= plain.step - 1e-12)
    for _, a in ipairs(prof) do a.w_share = 0.5 end
    local p = parallel.plan(nil, nil, { devices = { 'cpu:0', 'cpu:1' }, batch = 32, profile = prof, link = fast,
      memory = 2 ^ 30, speed = { 1, 1 }, kinds = { 'pipeline' }, chunks = { 4 }, schedules = { '1f1b', 'zb' } })
    assert.equal('zb', p.chosen.schedule)
    assert.matches('4 micro-batches, zero-bubble', p.reason, 1, true)
    local model = nn.Sequential { nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Linear(4, 2) }
    local pipe = parallel.wrap(model, p, p.chosen)
    assert.equal('zb', pipe.kind)
    assert.same({ 2, 2 }, pipe.counts)
  end)

  it('picks data parallel for a small model with a large batch', function()
    local prof = stated(4, { fwd = 0.01, bwd = 0.02, batch = 64, params = 1024, act = MB, out = MB / 4 })
    local p = parallel.plan(nil, nil, { devices = { 'cpu:0', 'cpu:1' }, batch = 256, profile = prof, link = fast,
      memory = 2 ^ 30, speed = { 1, 1 } })
    assert.equal('data', p.chosen.kind)
    assert.equal(2, p.chosen.devices)
    assert.equal(1, p.chosen.accumulate)
    -- 128 samples a device: 4 atoms x 30 ms x 2, and a 4 KB all-reduce not hidden by backward: 2 alpha + S beta
    assert.near(0.24 + 2e-5 + 4096 * 1e-10, p.chosen.step, 1e-12)
    assert.matches('data parallel over 2 devices, 128 samples a device', p.reason, 1, true)
  end)

  it('slows virtual devices down together when their shares exceed the cores', function()
    local prof = stated(2, { fwd = 0.01, bwd = 0.02, batch = 8 })
    local cm = parallel.cost.new(prof, { threads = { 1, 1, 1, 1 }, cores = 2 })
    assert.near(0.06, cm:data_parallel(1, 8).step, 1e-12)
    assert.near(0.06, cm:data_parallel(2, 16).step, 1e-12)
    assert.near(0.12, cm:data_parallel(4, 32).step, 1e-12)   -- 4 threads on 2 cores: half speed
  end)

  it("counts the host's queueing as the cores' work when the host thread shares them", function()
    local prof = stated(2, { fwd = 0.01, bwd = 0.02, batch = 8 })
    -- 2 one-thread devices on 2 cores: the host needs a core too
    local shared = parallel.cost.new(prof, { threads = { 1, 1 }, cores = 2, host = 0.01 })
    assert.near((2 * 0.06 + 2 * 0.01) / 2, shared:data_parallel(2, 16).step, 1e-12)
    -- a core to spare: the host's queueing only bounds the step from below
    local spare = parallel.cost.new(prof, { threads = { 1, 1 }, cores = 4, host = 0.01 })
    assert.near(0.06, spare:data_parallel(2, 16).step, 1e-12)
    assert.equal(0, spare:host_work(1, 2, 1))
    assert.equal(1, shared:host_work(1, 2, 1))
    assert.equal(0, parallel.cost.new(prof, { host = 0.01 }):host_work(1, 2, 1))   -- no thread shares known (a GPU)
    -- DataParallel's own cost a replica (link.pipeline.replica) is host time too: 2 replicas x (0.01 + 0.02)
    local dp = parallel.cost.new(prof, { threads = { 1, 1 }, cores = 2, host = 0.01,
      link = { pipeline = { fixed = 0, action = {}, replica = 0.02 } } })
    assert.near((2 * 0.06 + 2 * 0.03) / 2, dp:data_parallel(2, 16).step, 1e-12)
    assert.near(0.06, dp:data_parallel(1, 8).step, 1e-12)   -- one device: no replicas to run
    -- accumulate 2: each replica queues 2 micro-batches, its machinery's whole
    -- cost once and a further micro-batch's (link.pipeline.replica_micro) once
    local acc = parallel.cost.new(prof, { threads = { 1, 1 }, cores = 2, host = 0.01,
      link = { pipeline = { fixed = 0, action = {}, replica = 0.02, replica_micro = 0.005 } } })
    assert.near((2 * 0.06 + 2 * (2 * 0.01 + 0.02 + 0.005)) / 2, acc:data_parallel(2, 16, 2).step, 1e-12)
  end)

  it("takes a hybrid's own work an action and a step from link.pipeline.hybrid where the link has it", function()
    local prof = stated(4, { fwd = 0.01, bwd = 0.02, batch = 8 })
    local plain = { fixed = 0.005, action = { gpipe = 0.1, ['1f1b'] = 0.1 } }
    local without = parallel.cost.new(prof, { link = { pipeline = plain } })
    local with = parallel.cost.new(prof, { link = { pipeline = { fixed = 0.005, action = plain.action,
      hybrid = { fixed = 0.025, action = { gpipe = 0.3, ['1f1b'] = 0.3 } } } } })
    -- host-bound: 2 replicas x 4 micro-batches x 4 actions, 0.2 s more each, and 0.02 s more a step
    assert.near(2 * 4 * 4 * 0.2 + 0.02, with:pipeline(2, 2, 16, 4, 'gpipe').step - without:pipeline(2, 2, 16, 4, 'gpipe').step, 1e-9)
    -- a pipeline of one replica keeps the pipeline's figures
    assert.near(without:pipeline(4, 1, 16, 4, 'gpipe').step, with:pipeline(4, 1, 16, 4, 'gpipe').step, 1e-12)
  end)

  it("adds the pipeline's own work a stage action and a step (link.pipeline) to a pipeline's step", function()
    local prof = stated(2, { fwd = 0.01, bwd = 0.02, batch = 8 })
    local plain = parallel.cost.new(prof, {})
    local link = { pipeline = { fixed = 0.005, action = { gpipe = 0.001, ['1f1b'] = 0.002 } } }
    local with = parallel.cost.new(prof, { link = link })
    -- compute-bound: the step's fixed part, and the first action's queueing
    -- (the host then runs ahead of the devices)
    assert.near(plain:pipeline(2, 1, 8, 4, 'gpipe').step + 0.005 + 0.001, with:pipeline(2, 1, 8, 4, 'gpipe').step, 1e-12)
    -- host-bound: each micro-batch's 2p actions, one after another on the
    -- host, then the last one queued (B of stage 1, 0.02 s a batch of 8 at 2)
    local slow = parallel.cost.new(prof, { link = { pipeline = { fixed = 0, action = { gpipe = 0.1, ['1f1b'] = 0.2 } } } })
    assert.near(4 * 4 * 0.2 + 0.005, slow:pipeline(2, 1, 8, 4, '1f1b').step, 1e-12)
    assert.near(4 * 4 * 0.1 + 0.005, slow:pipeline(2, 1, 8, 4, 'gpipe').step, 1e-12)
    -- the interleaved schedule's actions (2 stages a device) at its own
    -- measured cost, or 1F1B's where the link has none for it
    local prof4 = stated(4, { fwd = 0.01, bwd = 0.02, batch = 8 })
    local function inter(action)
      return parallel.cost.new(prof4, { link = { pipeline = { fixed = 0, action = action } } }):pipeline(2, 1, 8, 4, 'interleaved').step
    end
    local own, borrowed = inter({ ['1f1b'] = 0.2, interleaved = 0.1 }), inter({ ['1f1b'] = 0.1 })
    assert.near(borrowed, own, 1e-12)
    assert.is_true(inter({ ['1f1b'] = 0.1, interleaved = 0.2 }) > own + 1)
    -- a stage past half its device's memory paces the host (Stage.lua): the
    -- host's queueing adds to the step instead of overlapping it
    local prof2 = stated(2, { fwd = 0.01, bwd = 0.02, batch = 8, act = MB })
    local link2 = { pipeline = { fixed = 0, action = { gpipe = 0.001, ['1f1b'] = 0.001 } } }
    local roomy = parallel.cost.new(prof2, { link = link2, host = 0.002, memory = { 64 * MB, 64 * MB } })
    local paced = parallel.cost.new(prof2, { link = link2, host = 0.002, memory = { 1.5 * MB, 1.5 * MB } })
    local a, b = roomy:pipeline(2, 1, 8, 4, '1f1b'), paced:pipeline(2, 1, 8, 4, '1f1b')
    assert.is_true(b.memory[1] > 0.75 * MB and a.memory[1] < 32 * MB)
    -- (slower, by at most all of the host's queueing: 2p actions a micro-batch)
    local paced_by = (b.step - b.gc) - (a.step - a.gc)
    assert.is_true(paced_by > 0.001 and paced_by <= 4 * 4 * (0.002 / 4 + 0.001) + 1e-12, tostring(paced_by))
  end)

  it("takes half of a boundary copy's latency as a delay and the rest, with its bytes, as the devices' work (overlap 0)", function()
    local prof = stated(2, { fwd = 0.01, bwd = 0.02, batch = 8, out = 8e6 })
    local function step(alpha, beta, m, schedule)
      local link = { copy = { alpha = alpha, beta = beta }, allreduce = { alpha = 0, beta = 0 }, overlap = 0 }
      return parallel.cost.new(prof, { link = link }):pipeline(2, 1, 8, m, schedule).step
    end
    -- GPipe over 2 equal stages (f, b a micro-batch), a copy's delay L and
    -- work w on the stage receiving it (stage 2's forwards, stage 1's
    -- backwards: each the slower stage of its half): f + L + m (f + w) for
    -- the forwards, b + L + m (b + w) for the backwards: 2 L + 2 m w more
    -- than without; L = w = alpha / 2. (All of alpha as work: 2 m alpha.)
    local alpha = 0.004
    for _, m in ipairs { 1, 4, 8 } do
      assert.near((m + 1) * alpha, step(alpha, 0, m, 'gpipe') - step(0, 0, m, 'gpipe'), 1e-12)
      -- 1F1B: more than the fill's delays, 2 L (stage 1 waits for micro-batches' round trips)
      assert.is_true(step(alpha, 0, m, '1f1b') - step(0, 0, m, '1f1b') >= 2 * alpha - 1e-12)
    end
    -- one micro-batch: a copy's bytes each way are work nothing overlaps
    assert.near(2 * 8e6 * 1e-9, step(0, 1e-9, 1, 'gpipe') - step(0, 0, 1, 'gpipe'), 1e-12)
  end)

  it("adds the full collections a step's churn sets off, many more under a tight memory limit", function()
    -- 2 atoms, each leaving 4 MB to the collector a batch of 8; a collection costs 1 ms
    local prof = stated(2, { fwd = 0.01, bwd = 0.02, batch = 8, params = 1024, act = MB })
    for _, a in ipairs(prof) do a.churn, a.churn0 = 4 * MB, 0 end
    prof.gc = 0.001
    local GC_MIN = require('lunet.tensor').gc_min
    local state = 2 * 1024 * 4   -- parameters, gradients and Adam's 2 copies
    local function want(limit, k)
      local b = 8 / k
      local live = state + 2 * MB * b / 8
      -- (no block sizes stated: tensor.lua keeps a quarter of the room free)
      local margin = math.min(math.max(GC_MIN, 2 * live) - live, (limit - live) * 3 / 4)
      return 0.001 * (k * 8 * MB * b / 8) / margin
    end
    for _, limit in ipairs({ 10 * MB, 64 * MB, 2 ^ 40 }) do
      local cm = parallel.cost.new(prof, { memory = { limit } })
      for _, k in ipairs({ 1, 4 }) do
        local c = cm:data_parallel(1, 8, k)
        assert.near(want(limit, k), c.gc, 1e-12)
        assert.near(k * 0.06 / k + c.gc, c.step, 1e-12)
      end
    end
    -- 10 MB: a collection every 6 MB or so of the 8 MB a step; unlimited: one in 30 MB
    assert.near(4 / 3, parallel.cost.new(prof, { memory = { 10 * MB } }):data_parallel(1, 8).gc / 0.001, 0.01)
    -- with 2 MB blocks, twice the largest is kept free: a collection every 4 MB
    for _, a in ipairs(prof) do a.out_bytes = 2 * MB end
    assert.near(2, parallel.cost.new(prof, { memory = { 10 * MB } }):data_parallel(1, 8).gc / 0.001, 0.01)
    for _, a in ipairs(prof) do a.out_bytes = 0 end
    assert.is_true(parallel.cost.new(prof, {}):data_parallel(1, 8).gc < 0.0003)
    -- a pipeline's stages collect too (Stage.lua's trigger), more under a limit
    local free = parallel.cost.new(prof, {}):pipeline(2, 1, 8, 4, '1f1b')
    -- (2.25 MB: the stages stay under half of it, so the host is not paced; only the collections differ)
    local tight = parallel.cost.new(prof, { memory = { 2.25 * MB, 2.25 * MB } }):pipeline(2, 1, 8, 4, '1f1b')
    assert.is_true(free.gc > 0 and tight.gc > free.gc, ('%g %g'):format(free.gc, tight.gc))
    assert.near(tight.step - tight.gc, free.step - free.gc, 1e-12)
    -- what the collector finds live at a pipeline's stage counts its boundary
    -- buffers: the last of 2 stages (1F1B, 4 micro-batches of 2) holds 3
    -- slots of its input (2 the schedule needs, 1 spare) and its input's
    -- gradient, each a quarter of the atom's output at the profiled batch of 8
    local seen = {}
    local orig = parallel.cost.collecting
    parallel.cost.collecting = function(self, churn, live, ...)
      seen[#seen + 1] = live
      return orig(self, churn, live, ...)
    end
    local lives = {}
    for k, out in ipairs({ MB / 4, MB / 2 }) do
      for _, a in ipairs(prof) do a.out_bytes = out end
      seen = {}
      parallel.cost.new(prof, { memory = { 10 * MB, 10 * MB } }):pipeline(2, 1, 8, 4, '1f1b')
      lives[k] = seen[#seen]
    end
    parallel.cost.collecting = orig
    for _, a in ipairs(prof) do a.out_bytes = 0 end
    assert.near(4 * (MB / 4) * 2 / 8, lives[2] - lives[1], 1e-6)
    -- a collection's cost given (the plan's, measured at its start) counts instead of the profile's
    assert.near(2 * parallel.cost.new(prof, { memory = { 10 * MB } }):data_parallel(1, 8).gc,
      parallel.cost.new(prof, { memory = { 10 * MB }, gc = 0.002 }):data_parallel(1, 8).gc, 1e-12)
    -- no collection's cost measured: none counted
    prof.gc = nil
    assert.equal(0, parallel.cost.new(prof, { memory = { 10 * MB } }):data_parallel(1, 8).gc)
  end)

  it('times a full collection of the heap as it is (profile.collection): more live objects, longer', function()
    local before = parallel.profile.collection()
    assert.is_true(before > 0)
    -- (a heap with many more live tables to traverse)
    local keep = {}
    for i = 1, 400000 do keep[i] = { i } end
    local after = parallel.profile.collection()
    assert.is_true(after > before, ('%g %g'):format(after, before))
    keep = nil
    -- a stated profile keeps its own figure; opts.gc wins
    local prof = stated(2, { fwd = 0.01, bwd = 0.02, batch = 8 })
    prof.gc = 0.0005
    assert.equal(0.0005, parallel.plan(nil, nil, { devices = { 'cpu:0' }, batch = 8, profile = prof }).gc)
    assert.equal(0.003, parallel.plan(nil, nil, { devices = { 'cpu:0' }, batch = 8, profile = prof, gc = 0.003 }).gc)
  end)

  it('takes a batch\'s total time from the measured whole-chain times (list.whole), interpolated', function()
    local prof = stated(2, { fwd = 1, bwd = 1, batch = 8 })
    prof.whole = { { 8, 4 }, { 4, 3 } }
    local cm = parallel.cost.new(prof)
    assert.near(4, cm:data_parallel(1, 8).step, 1e-12)
    assert.near(3, cm:data_parallel(1, 4).step, 1e-12)
    assert.near(3.5, cm:data_parallel(1, 6).step, 1e-12)
    assert.near(1.5, cm:data_parallel(1, 2).step, 1e-12)   -- below the smallest: proportional
    assert.near(2 * 3, cm:data_parallel(1, 8, 2).step, 1e-12)   -- accumulate 2: twice a batch of 4
  end)

  it('accumulates when a device holds the model but not the batch', function()
    local prof = stated(4, { fwd = 0.01, bwd = 0.02, batch = 64, params = 1024, act = 64 * MB, out = MB })
    -- 1 GB on one device: 256 samples need 1 GB of activations (twice, with the
    -- step before's awaiting the collector), 64 need 256 MB (512 MB)
    local p = parallel.plan(nil, nil, { devices = { 'cpu:0' }, batch = 256, profile = prof, link = fast, memory = 2 ^ 30 })
    assert.equal('single', p.chosen.kind)
    assert.equal(4, p.chosen.accumulate)
    local plain
    for _, c in ipairs(p.candidates) do if c.accumulate == 1 then plain = c end end
    assert.is_false(plain.fits)
    assert.matches('cpu:0 needs 2.00 GB, holds 1.00 GB', plain.why, 1, true)
    assert.matches('one device, 256 samples in 4 accumulated micro-batches', p.reason, 1, true)
  end)

  it('auto wraps the model as chosen, and fit logs the measured step beside the predicted', function()
    local model = nn.Sequential { nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3) }
    local prof = stated(3, { fwd = 0.01, bwd = 0.02, batch = 64, params = 1024, act = 1024, out = 256 })
    local dp = parallel.auto(model, lunet.randn(8, 4), { devices = { 'cpu:0', 'cpu:1' }, batch = 16,
      profile = prof, link = fast, speed = { 1, 1 } })
    assert.equal('parallel.DataParallel', dp.__name)
    assert.equal('data', dp.auto_plan.chosen.kind)
    local one = parallel.auto(nn.Sequential { nn.Linear(4, 3) }, lunet.randn(8, 4), { devices = { 'cpu:0' },
      profile = stated(1, { fwd = 0.01, bwd = 0.02, batch = 8 }), link = fast })
    assert.equal('nn.Sequential', one.__name)
    local ds = lunet.data.TensorDataset(lunet.randn(48, 4), lunet.randint(1, 4, { 48 }))
    local lines, print0 = {}, print
    _G.print = function(...) lines[#lines + 1] = table.concat({ ... }, ' ') end
    local ok, err = pcall(lunet.fit, dp, lunet.data.DataLoader(ds, { batch_size = 16 }), { epochs = 1, progress = false })
    _G.print = print0
    assert.is_true(ok, err)
    local found
    for _, l in ipairs(lines) do if l:match('^fit: [%d.]+ ms a step measured, 11.27 ms predicted by the plan %(data parallel x2, batch 16%)') then found = l end end
    assert.is_truthy(found, table.concat(lines, '\n'))
    local ok2, err2 = pcall(parallel.auto, model, lunet.randn(8, 4), { devices = { 'cpu:0' }, profile = stated(2, { fwd = 1, bwd = 1, batch = 1 }) })
    assert.is_false(ok2)
    assert.matches('the stated profile has 2 atoms, the model 3', err2, 1, true)
  end)

  it('auto builds the Pipeline it chose when data parallel does not fit, and fit trains it', function()
    local model = nn.Sequential { nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3) }
    -- stated: 60 MB of parameters an atom (240 MB with Adam), 1 GB a device: only a split fits
    local prof = stated(5, { fwd = 0.01, bwd = 0.02, batch = 16, params = 60 * MB, act = 1024, out = 256 })
    local pipe = parallel.auto(model, lunet.randn(16, 4), { devices = { 'cpu:0', 'cpu:1' }, batch = 16,
      profile = prof, link = fast, speed = { 1, 1 }, memory = 2 ^ 30 })
    assert.equal('parallel.Pipeline', pipe.__name)
    local c = pipe.auto_plan.chosen
    assert.equal('pipeline', c.kind)
    assert.same(c.balance, pipe.counts)
    local ds = lunet.data.TensorDataset(lunet.randn(48, 4), lunet.randint(1, 4, { 48 }))
    local lines, print0 = {}, print
    _G.print = function(...) lines[#lines + 1] = table.concat({ ... }, ' ') end
    local ok, err = pcall(lunet.fit, pipe, lunet.data.DataLoader(ds, { batch_size = 16 }), { epochs = 1, progress = false })
    _G.print = print0
    assert.is_true(ok, err)
    local found
    for _, l in ipairs(lines) do if l:match('^fit: [%d.]+ ms a step measured, [%d.]+ ms predicted by the plan %(pipeline 2 stages') then found = l end end
    assert.is_truthy(found, table.concat(lines, '\n'))
  end)

  it('trials: trains the candidates predicted fastest (and each kind\'s fastest) and chooses the measured fastest', function()
    local model = nn.Sequential { nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4) }
    local w = model[1].weight:clone()
    local p = parallel.plan(model, lunet.randn(8, 16), { devices = { 'cpu:0', 'cpu:1' }, batch = 32, trials = 2,
      chunks = { 2, 4 } })
    local tried, kinds, times = 0, {}, {}
    for i, c in ipairs(p.candidates) do
      if c.measured then
        tried = tried + 1
        kinds[c.kind] = true
        assert.is_true(c.measured > 0 and c.measured < 10, c.label)
        assert.is_true(c.measured >= p.chosen.measured, c.label)   -- the chosen: the fastest measured
        -- timed in two passes over the candidates, the smallest figure kept;
        -- those within 5% of the fastest then twice more among themselves
        assert.is_true(#c.trial_times == 2 or #c.trial_times == 4, c.label)
        assert.equal(math.min(unpack(c.trial_times)), c.measured, c.label)
        local first = math.min(c.trial_times[1], c.trial_times[2])
        times[#times + 1] = { c = c, first = first }
      end
      assert.is_nil(c.trial_error, c.label)
    end
    local best = math.huge
    for _, t in ipairs(times) do best = math.min(best, t.first) end
    local close = 0
    for _, t in ipairs(times) do if t.first <= best * 1.05 then close = close + 1 end end
    for _, t in ipairs(times) do
      local again = close > 1 and t.first <= best * 1.05
      assert.equal(again and 4 or 2, #t.c.trial_times, t.c.label)
    end
    -- the 2 fastest predicted, and the fastest of each other kind: one device,
    -- data parallel, pipeline; and those a quarter, half and three quarters
    -- down the predicted order (the calibration's)
    local want, spread = {}, {}
    for _, c in ipairs(parallel.trial.pick(p, 2)) do want[c] = true end
    for _, c in ipairs(parallel.trial.spread(p)) do want[c], spread[c] = true, true end
    local fit = {}
    for _, c in ipairs(p.candidates) do
      assert.equal(want[c] == true, c.measured ~= nil, c.label)
      assert.equal(spread[c] == true, c.calibrates == true, c.label)
      if c.fits and c.available then fit[#fit + 1] = c end
    end
    assert.same({ fit[math.floor(0.25 * (#fit - 1) + 0.5) + 1], fit[math.floor(0.5 * (#fit - 1) + 0.5) + 1],
      fit[math.floor(0.75 * (#fit - 1) + 0.5) + 1] }, parallel.trial.spread(p))
    assert.is_true(tried >= 3 and kinds.single and kinds.data and kinds.pipeline, tostring(p))
    assert.is_not_nil(p.predicted_choice)
    assert.matches('ms measured, the fastest of ' .. tried .. ' tried', p.reason, 1, true)
    assert.matches('trial ms', tostring(p), 1, true)
    -- every prediction scaled by the square root of the spread trials' measured over predicted (geometric mean)
    local logs, nspread = 0, 0
    for _, c in ipairs(p.candidates) do
      if c.calibrates then logs, nspread = logs + math.log(c.measured / c.model_step), nspread + 1 end
    end
    assert.is_true(nspread >= 1)
    assert.near(math.exp(logs / nspread), p.trials_ratio, 1e-12)
    assert.near(math.exp(0.5 * logs / nspread), p.calibration, 1e-12)
    -- (one device's candidates by their own trials' ratio alone, half of it)
    local own, nown = 0, 0
    for _, c in ipairs(p.candidates) do
      if c.kind == 'single' and c.measured then own, nown = own + math.log(c.measured / c.model_step), nown + 1 end
    end
    assert.is_true(nown >= 1)
    assert.near(math.exp(0.5 * own / nown), p.calibration_single, 1e-12)
    for _, c in ipairs(p.candidates) do
      assert.near(c.model_step * (c.kind == 'single' and p.calibration_single or p.calibration), c.step, 1e-15, c.label)
    end
    assert.matches('the cost model\'s figures x ' .. ('%.3f'):format(p.calibration), tostring(p), 1, true)
    -- the user's model untouched
    assert.equal(0, (model[1].weight - w):abs():max():item())
    for _, q in ipairs(model:parameters()) do assert.is_nil(q.grad) end
    -- auto wraps what the trials chose
    local wrapped = parallel.auto(model, lunet.randn(8, 16), { devices = { 'cpu:0', 'cpu:1' }, batch = 32, trials = 1,
      chunks = { 2 } })
    local want = ({ single = 'nn.Sequential', data = 'parallel.DataParallel', pipeline = 'parallel.Pipeline' })[wrapped.auto_plan.chosen.kind]
    assert.equal(want, wrapped.__name)
  end)

  it('measures together again, at most twice, when a measure is below 3/4 of the fair share of the cores', function()
    local profile = require 'lunet.parallel.profile'
    local real = profile.together
    local model = nn.Sequential { nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4) }
    local function plan_with(measures)
      local calls = 0
      profile.together = function() calls = calls + 1; return measures[calls] end
      local ok, p = pcall(parallel.plan, model, lunet.randn(8, 16), { devices = { 'cpu:0', 'cpu:1' }, batch = 32 })
      profile.together = real
      assert(ok, p)
      return p.together, calls
    end
    -- 2 devices of 1 thread each on this machine's cores: fair share min(1, cores / 2)
    local fair = math.min(1, lunet.C.ln_num_cores() / 2)
    assert.same({ 0.9 * fair, 1 }, { plan_with({ 0.9 * fair }) })                           -- plausible: once
    assert.same({ 0.8 * fair, 2 }, { plan_with({ 0.2 * fair, 0.8 * fair, 0.1 }) })          -- disturbed, then plausible
    assert.same({ 0.5 * fair, 3 }, { plan_with({ 0.2 * fair, 0.5 * fair, 0.3 * fair }) })   -- the largest of three
  end)

  it('trials: calibrate scales every prediction by the square root of the tried candidates\' measured over predicted', function()
    local prof = stated(4, { fwd = 0.01, bwd = 0.02, batch = 32, params = 1024, act = 1024, out = 256 })
    local p = parallel.plan(nil, nil, { devices = { 'cpu:0', 'cpu:1' }, batch = 32, profile = prof, link = fast,
      speed = { 1, 1 } })
    local a, b = p.candidates[1], p.candidates[2]
    local steps = {}
    for i, c in ipairs(p.candidates) do steps[i] = c.step end
    -- nothing tried: nothing moves
    assert.equal(1, parallel.trial.calibrate(p))
    for i, c in ipairs(p.candidates) do assert.equal(steps[i], c.step); assert.equal(steps[i], c.model_step) end
    -- one measured 1/2 x its prediction, one 8x: the geometric mean 2, the factor its square root
    a.measured, b.measured = 0.5 * a.step, 8 * b.step
    assert.near(math.sqrt(2), parallel.trial.calibrate(p), 1e-12)
    assert.near(math.sqrt(2), p.calibration, 1e-12)
    assert.near(2, p.trials_ratio, 1e-12)
    assert.is_true(a.kind ~= 'single' and b.kind ~= 'single')
    for i, c in ipairs(p.candidates) do
      assert.equal(steps[i], c.model_step)
      -- (one device's candidates: none of theirs tried, none scaled)
      assert.near((c.kind == 'single' and 1 or math.sqrt(2)) * steps[i], c.step, 1e-15)
    end
    -- again: from the cost model's figures, not the scaled ones
    assert.near(math.sqrt(2), parallel.trial.calibrate(p), 1e-12)
    assert.near(math.sqrt(2) * steps[1], a.step, 1e-15)
    -- candidates marked as the calibration's (trial.spread): only they count
    b.calibrates = true
    assert.near(math.sqrt(8), parallel.trial.calibrate(p), 1e-12)
    assert.near(8, p.trials_ratio, 1e-12)
    assert.near(math.sqrt(8) * steps[1], a.step, 1e-15)
    assert.matches('the cost model\'s figures x 2.828, the square root of the trials\' measured over predicted, 8.000',
      tostring(p), 1, true)
    -- one device's candidates beside candidates over several: their own trials' ratio (none tried: 1)
    local one
    for _, c in ipairs(p.candidates) do if c.kind == 'single' then one = c end end
    assert.is_truthy(one)
    assert.near(one.model_step, one.step, 1e-15)
    assert.equal(1, p.calibration_single)
    one.measured = 4 * one.model_step
    parallel.trial.calibrate(p)
    assert.near(2, p.calibration_single, 1e-12)
    assert.near(2 * one.model_step, one.step, 1e-15)
    assert.near(math.sqrt(8) * steps[1], a.step, 1e-15)   -- (the others' unchanged: one device's is not marked)
    assert.matches('one device\'s x 2.000, from its own trials', tostring(p), 1, true)
    -- a plan of one device only: its candidates take the shared factor
    local solo = parallel.plan(nil, nil, { devices = { 'cpu:0' }, batch = 32, profile = prof, link = fast })
    local s1 = solo.candidates[1]
    s1.measured = 4 * s1.step
    assert.near(2, parallel.trial.calibrate(solo), 1e-12)
    assert.near(2 * s1.model_step, s1.step, 1e-15)
  end)

  it('trials: picks by prediction without running (trial.pick), and says what is wrong', function()
    local prof = stated(4, { fwd = 0.01, bwd = 0.02, batch = 32, params = 1024, act = 1024, out = 256 })
    local p = parallel.plan(nil, nil, { devices = { 'cpu:0', 'cpu:1' }, batch = 32, profile = prof, link = fast,
      speed = { 1, 1 } })
    local picked = parallel.trial.pick(p, 1)
    assert.equal(p.candidates[1], picked[1])
    local seen = {}
    for k, c in ipairs(picked) do
      assert.is_true(c.fits)
      assert.is_nil(seen[c.kind], c.label)   -- past the first n, one of each other kind: its fastest
      seen[c.kind] = true
      if k > 1 then
        for _, o in ipairs(p.candidates) do
          if o.kind == c.kind and o.fits then assert.equal(o, c); break end
        end
      end
    end
    local ok, err = pcall(parallel.plan, nil, nil, { devices = { 'cpu:0', 'cpu:1' }, batch = 32, profile = prof,
      link = fast, trials = 2 })
    assert.is_false(ok)
    assert.matches('parallel.plan: trials need the model and a sample input', err, 1, true)
    ok, err = pcall(parallel.plan, nil, nil, { devices = { 'cpu:0' }, batch = 32, profile = prof, trials = 1.5 })
    assert.matches('parallel.plan: trials must be an integer >= 0, got 1.5', err, 1, true)
    ok, err = pcall(parallel.trial.pick, p, 0)
    assert.matches('parallel.trial.pick: n must be an integer >= 1, got 0', err, 1, true)
    ok, err = pcall(parallel.trial.run, p, nn.Linear(2, 2), 'x', 1)
    assert.matches('parallel.trial.run: sample must be a batch', err, 1, true)
    ok, err = pcall(parallel.trial.calibrate, 'plan')
    assert.matches('parallel.trial.calibrate: expected a plan (lunet.parallel.plan), got string', err, 1, true)
    ok, err = pcall(parallel.trial.spread, 'plan')
    assert.matches('parallel.trial.spread: expected a plan (lunet.parallel.plan), got string', err, 1, true)
    ok, err = pcall(parallel.wrap, nn.Linear(2, 2), p, 'one device')
    assert.matches("parallel.wrap: expected one of the plan's candidates, got string", err, 1, true)
  end)

  it('proposes no micro-batch smaller than the model accepts (BatchNorm1d: 2)', function()
    local prof = stated(2, { fwd = 0.01, bwd = 0.02, batch = 8, act = MB })
    prof.min_batch = 2
    local p = parallel.plan(nil, nil, { devices = { 'cpu:0', 'cpu:1' }, batch = 16, profile = prof, link = fast,
      memory = 2 ^ 30, speed = { 1, 1 }, chunks = { 2, 4, 8, 16 } })
    for _, c in ipairs(p.candidates) do
      assert.is_true(c.chunks <= 8 and 16 / c.replicas / c.chunks / c.accumulate >= 2, c.label)
    end
    local model = nn.Sequential { nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3) }
    local list = parallel.profile.atoms(parallel.Plan.atoms_of(model), lunet.randn(8, 4), 'cpu:0', { runs = 1 })
    assert.equal(2, list.min_batch)
  end)

  it('lunet.memory_limit reads the limit, and garbage alone does not run a limited device out of memory', function()
    local C = lunet.C
    collectgarbage(); collectgarbage()
    local limit = lunet.memory_allocated('cpu:1') + 4 * MB
    assert.equal(0, C.ln_memory_set_limit(1, limit))
    assert.equal(limit, lunet.memory_limit('cpu:1'))
    -- 40 dropped 1 MB tensors under a 4 MB allowance: the collector runs before the limit
    local ok, err = pcall(function()
      for _ = 1, 40 do local t = lunet.zeros({ 2 ^ 18 }, { device = 'cpu:1' }); t = nil end
    end)
    C.ln_memory_set_limit(1, 0)
    assert.is_true(ok, err)
    assert.equal(0, lunet.memory_limit('cpu:1'))
    local ok2, err2 = pcall(lunet.memory_limit, 'cpu:9')
    assert.is_false(ok2)
    assert.matches('memory_limit: no device cpu:9', err2, 1, true)
  end)

  it('says what is wrong with bad input', function()
    local ok, err = pcall(parallel.plan, 'x', lunet.randn(2, 3), { devices = { 'cpu:0' } })
    assert.matches('parallel.plan: expected an nn.Module', err, 1, true)
    ok, err = pcall(parallel.plan, nil, nil, { devices = {}, profile = stated(1, { fwd = 1, bwd = 1, batch = 1 }) })
    assert.matches('parallel.plan: devices must be a non-empty list', err, 1, true)
    ok, err = pcall(parallel.plan, nil, nil, { devices = { 'cpu:0' }, batch = 4, profile = stated(2, { fwd = 1, bwd = 1, batch = 1, params = 10 * MB }), memory = MB })
    assert.matches("parallel.plan: nothing fits the devices' memory", err, 1, true)
    ok, err = pcall(parallel.plan, nil, nil, { devices = { 'cpu:0' }, bach = 4 })
    assert.matches("unknown option 'bach'", err, 1, true)
    local one = stated(2, { fwd = 1, bwd = 1, batch = 1 })
    ok, err = pcall(parallel.plan, nil, nil, { devices = { 'cpu:0' }, batch = 4, profile = one, memory = -1 })
    assert.matches('parallel.plan: memory must be a positive number of bytes, got -1', err, 1, true)
    ok, err = pcall(parallel.plan, nil, nil, { devices = { 'cpu:0' }, batch = 4, profile = one, memory = { 0 } })
    assert.matches('parallel.plan: memory[1] must be a positive number of bytes, got 0', err, 1, true)
    -- (named with the caller's line once, not twice)
    ok, err = pcall(parallel.plan, nil, nil, { devices = { 'cpu:0', 'cpu:99' } })
    assert.matches('^[^:]*planner_spec%.lua:%d+: parallel%.plan: no device cpu:99', err)
    -- a device smaller than the boundary buffers alone: the candidate says so
    local big = stated(4, { fwd = 0.01, bwd = 0.02, batch = 32, params = 1024, act = MB, out = 100 * MB })
    local c = parallel.cost.new(big, { memory = { 90 * MB, 90 * MB }, names = { 'cpu:0', 'cpu:1' } }):pipeline(2, 1, 32, 2, '1f1b')
    assert.is_false(c.fits)
    assert.equal('cpu:0 holds 90.0 MB; the largest workspace and boundary buffers at micro-batches of 16 take 111.1 MB', c.why)
    ok, err = pcall(parallel.plan, nil, nil, { devices = { 'cpu:0', 'cpu:1' }, schedules = { '1f1b', 'zbx' } })
    assert.matches('parallel.plan: schedules[2] must be one of gpipe, 1f1b, interleaved, zb, got zbx', err, 1, true)
    ok, err = pcall(parallel.plan, nil, nil, { devices = { 'cpu:0', 'cpu:1' }, chunks = { 4, 0.5 } })
    assert.matches('parallel.plan: chunks[2] must be an integer >= 1, got 0.5', err, 1, true)
    -- before any profiling (runs = 1e9 profiled for days; the rest failed
    -- after the profile, deep in the cost model, or said nothing fits)
    local model = nn.Sequential { nn.Linear(2, 2) }
    for _, c in ipairs {
      { { runs = 1e9 }, 'runs must be an integer in 1..1000, got 1000000000' },
      { { runs = 0 }, 'runs must be an integer in 1..1000, got 0' },
      { { headroom = 5 }, 'headroom must be a share in (0, 1], got 5' },
      { { together = 7 }, 'together must be a share in (0, 1], got 7' },
      { { bucket_mb = 0 }, 'bucket_mb must be a positive number, got 0' },
      { { gc = -1 }, 'gc must be seconds >= 0, got -1' },
      { { speed = { 1, -1 } }, 'speed[2] must be a positive number, got -1' },
      { { speed = { 1 } }, 'speed has 1 entries for 2 devices' },
      { { optimizer = 'lbfgs' }, "optimizer must be 'adam', 'adamw', 'momentum' or 'sgd', got lbfgs" },
      { { kinds = { 'zero3' } }, 'kinds[1] must be one of single, data, pipeline, hybrid, got zero3' },
      -- (an empty list said nothing fits; a memory list of another length left the other devices unlimited)
      { { kinds = {} }, 'kinds must list at least one of single, data, pipeline, hybrid' },
      { { schedules = {} }, 'schedules must list at least one of gpipe, 1f1b, interleaved, zb' },
      { { chunks = {} }, 'chunks must list at least one micro-batch count' },
      { { memory = { 2 ^ 30 } }, 'memory has 1 entries for 2 devices (bytes for each, or one number for all)' },
      { { memory = { 2 ^ 30, 2 ^ 30, 2 ^ 30 } }, 'memory has 3 entries for 2 devices' },
    } do
      c[1].devices = { 'cpu:0', 'cpu:1' }
      ok, err = pcall(parallel.plan, model, lunet.randn(2, 2), c[1])
      assert.is_false(ok)
      assert.matches('^[^:]*planner_spec%.lua:%d+: parallel%.plan: ', tostring(err))
      assert.matches('parallel.plan: ' .. c[2], err, 1, true)
    end
    -- a sample the model does not take: said as the plan's, at the caller's line
    ok, err = pcall(parallel.plan, nn.Sequential { nn.Linear(4, 2) }, lunet.randn(2, 5), { devices = { 'cpu:0' } })
    assert.matches('^[^:]*planner_spec%.lua:%d+: parallel%.plan: sample_input does not train through the model: linear: input has 5 features, weight expects 4$', tostring(err))
    ok, err = pcall(parallel.profile.link, 'cpu:0', 'cpu:1', { runs = 2.5 })
    assert.matches('profile.link: runs must be an integer in 1..1000, got 2.5', err, 1, true)
  end)
end)

describe('parallel.step_sim', function()
  local sim, sched = parallel.step_sim, parallel.schedule
  it('plays a schedule out: stages wait for their inputs, a lone core runs one thing at a time (hand computed)', function()
    -- GPipe, 2 stages, 4 micro-batches, forward 1 s and backward 2 s: (m + p - 1) (f + b)
    local steps = sched.build('gpipe', 2, 4)
    local o = { stages = 2, steps = steps, fwd = { 1, 1 }, bwd = { 2, 2 } }
    assert.near(15, sim.run(o), 1e-9)
    -- a copy between the stages delays each crossing: 2 more (forward in, backward out) per fill and drain
    o.copy = 0.5
    assert.near(16, sim.run(o), 1e-9)
    o.copy = nil
    -- one core for both stages: never idle, so all the work one after another
    o.cores = 1
    assert.near(2 * 4 * 3, sim.run(o), 1e-9)
    -- two replicas on the one core: twice that
    o.replicas = 2
    assert.near(2 * 2 * 4 * 3, sim.run(o), 1e-9)
    -- host-bound: 16 actions of 10 s queued one after another, then the last one (B of stage 1) runs
    o = { stages = 2, steps = steps, fwd = { 1, 1 }, bwd = { 2, 2 }, host = { 10, 10 } }
    assert.near(16 * 10 + 2, sim.run(o), 1e-9)
    -- the host sharing one core with the devices: everything on it, one after another
    o.cores, o.host_shares = 1, true
    assert.near(16 * 10 + 2 * 4 * 3, sim.run(o), 1e-9)
  end)

  it('plays the interleaved schedule out on looping stages: its bubble is 1F1B\'s over the stages a device runs', function()
    -- 2 devices, 4 micro-batches; 1F1B: 2 stages, forward 2 s and backward 4 s: (m + p - 1) (f + b)
    local one = sim.run { stages = 2, steps = sched.build('1f1b', 2, 4), fwd = { 2, 2 }, bwd = { 4, 4 } }
    assert.near(5 * 6, one, 1e-9)
    -- the same work in 4 stages, 2 on each device: m (f + b) + (p - 1) (f + b) / 2
    local o = { stages = 4, devices = 2, steps = sched.build('interleaved', 4, 4, 2), fwd = { 1, 1, 1, 1 },
      bwd = { 2, 2, 2, 2 } }
    assert.near(4 * 6 + 6 / 2, sim.run(o), 1e-9)
    -- one core for both devices: all the work one after another
    o.cores = 1
    assert.near(4 * 2 * 6, sim.run(o), 1e-9)
  end)

  it('plays the zero-bubble schedule out: W actions fill the bubble (hand computed)', function()
    -- 2 stages, 4 micro-batches, F, B and W of 1 s: 3m + 1, where 1F1B (a backward of 2 s) takes (m + p - 1) 3
    local zb = sim.run { stages = 2, steps = sched.build('zb', 2, 4), fwd = { 1, 1 }, bwd = { 1, 1 }, wgt = { 1, 1 } }
    assert.near(3 * 4 + 1, zb, 1e-9)
    assert.near(5 * 3, sim.run { stages = 2, steps = sched.build('1f1b', 2, 4), fwd = { 1, 1 }, bwd = { 2, 2 } }, 1e-9)
    -- one core: all the work one after another
    assert.near(2 * 4 * 3, sim.run { stages = 2, steps = sched.build('zb', 2, 4), fwd = { 1, 1 }, bwd = { 1, 1 },
      wgt = { 1, 1 }, cores = 1 }, 1e-9)
  end)

  it('paces the host on a stage past half its memory: it waits for the stage\'s last backward', function()
    local steps = sched.build('1f1b', 2, 4)
    local o = { stages = 2, steps = steps, fwd = { 1, 1 }, bwd = { 2, 2 }, host = { 0.5, 0.5 } }
    local free = sim.run(o)
    o.paced = { true, true }
    local paced = sim.run(o)
    assert.is_true(paced > free, ('%g %g'):format(paced, free))
    assert.is_true(paced <= free + 16 * 0.5 + 1e-9)
  end)
end)

describe('parallel.simulate', function()
  it('data parallel: compute plus the ring all-reduce it cannot hide (hand computed)', function()
    local d = { compute = 0.3, backward = 2 / 3, model_bytes = 1e8, batch = 32, layers = 1 }
    local rows = parallel.simulate(d, { devices = { 1, 8 }, bandwidth = 1e10, latency = 1e-5, overlap = 0 })
    assert.near(0.3, rows[1].step, 1e-12)
    assert.near(1, rows[1].efficiency, 1e-12)
    local ar = 2 * 7 / 8 * 1e8 / 1e10 + 2 * 7 * 1e-5
    assert.near(0.3 + ar, rows[2].step, 1e-12)
    assert.near(0.3 / (0.3 + ar), rows[2].efficiency, 1e-12)
    assert.near(8 * 32 / (0.3 + ar), rows[2].throughput, 1e-9)
    -- 4 layers of 25 MB: backward (0.2 s) hides all but the last bucket (the first layer's 25 MB)
    d.layers = 4
    rows = parallel.simulate(d, { devices = 8, bandwidth = 1e10, latency = 1e-5, overlap = 1 })
    assert.near(0.3 + 2 * 7 / 8 * 25e6 / 1e10 + 2 * 7 * 1e-5, rows[1].step, 1e-12)
    assert.matches('efficiency', tostring(rows), 1, true)
    -- a plan's profile carries its host's queuing time; at scale each device has its own host
    local cm = parallel.cost.new(setmetatable({ { fwd = 0.1, bwd = 0.2, act_bytes = 0, param_bytes = 0, batch = 8 } },
      { __index = { host = 0.05 } }))
    assert.near(0.3, cm:data_parallel(2, 16).step, 1e-12)
    assert.near(8 * 0.05, cm:data_parallel(8, 64).step, 1e-12)   -- the one host queues 8 replicas
    local rows2 = parallel.simulate({ cost = cm, chosen = { stages = 1, chunks = 1, accumulate = 1, replicas = 1 }, batch = 8 },
      { devices = 512, bandwidth = 1e10, latency = 0 })
    assert.near(0.3, rows2[1].step, 1e-12)
  end)

  it('pipeline: (m + p - 1) stage times, bubble (p-1)/(m+p-1) (hand computed)', function()
    local d = { compute = 0.4, backward = 0.5, model_bytes = 0, batch = 8, layers = 2, stages = 2, chunks = 4 }
    local rows = parallel.simulate(d, { devices = { 2, 4 }, bandwidth = 1e10, latency = 0 })
    -- micro-batches of 2: each stage 0.05 s a micro-batch
    assert.near((4 + 2 - 1) * 0.05, rows[1].step, 1e-12)
    assert.near(1 / 5, rows[1].bubble, 1e-12)
    assert.near(0.4 / (2 * 0.25), rows[1].efficiency, 1e-12)
    assert.near(rows[1].step, rows[2].step, 1e-12)   -- two pipelines, no parameters to all-reduce
    local ok, err = pcall(parallel.simulate, d, { devices = 3, bandwidth = 1e10 })
    assert.matches('3 devices do not hold whole pipelines of 2 stages', err, 1, true)
    ok, err = pcall(parallel.simulate, d, { devices = 8 })
    assert.matches('parallel.simulate: bandwidth is needed', err, 1, true)
  end)

  it('device counts out of range and unknown options are errors that say so', function()
    local d = { compute = 0.4, model_bytes = 1e6, batch = 8 }
    for _, bad in ipairs({ 0, -8, 2.5, 1e12, 0 / 0, { 8, 1e12 } }) do
      local ok, err = pcall(parallel.simulate, d, { devices = bad, bandwidth = 1e10 })
      assert.is_false(ok)
      assert.matches('parallel.simulate: devices must be integers from 1 to 65536, got', err, 1, true)
    end
    local ok, err = pcall(parallel.simulate, d, { devices = {}, bandwidth = 1e10 })
    assert.matches('parallel.simulate: devices must be a count or a non-empty list of counts', err, 1, true)
    ok, err = pcall(parallel.simulate, d, { device = 8, bandwidth = 1e10 })
    assert.matches("parallel.simulate: unknown option 'device' (did you mean 'devices'?)", err, 1, true)
    ok, err = pcall(parallel.simulate, d, { devices = 8, bandwidth = '10G' })
    assert.matches("parallel.simulate: option 'bandwidth' must be a number", err, 1, true)
    -- (the largest count is still computed)
    assert.equal(65536, parallel.simulate(d, { devices = 65536, bandwidth = 1e10 })[1].devices)
    -- the options' and the description's values out of range, and the
    -- description's unknown keys (each failed deep in the cost model, or
    -- was taken silently: stages = 0 as data parallel, overlap = 2)
    local function with(t) local o = { compute = 0.4, model_bytes = 1e6, batch = 8 }; for k, v in pairs(t) do o[k] = v end; return o end
    for _, c in ipairs {
      { with { stage = 2 }, {}, "the description: unknown option 'stage' (did you mean 'stages'?)" },
      { with { compute = math.huge }, {}, 'the description needs compute (a finite number >= 0), got inf' },
      { with { model_bytes = -1 }, {}, 'the description needs model_bytes (a finite number >= 0), got -1' },
      { with { stages = 0 }, {}, 'stages must be an integer from 1 to 65536, got 0' },
      { with { stages = 2.5 }, {}, 'stages must be an integer from 1 to 65536, got 2.5' },
      { with { stages = 2, chunks = 0 / 0 }, {}, 'chunks must be an integer from 1 to 65536, got nan' },
      { with { backward = 2 }, {}, 'backward must be a share of compute in [0, 1], got 2' },
      { with { layers = 0 }, {}, 'layers must be an integer from 1 to 100000, got 0' },
      { with { batch = 0 }, {}, 'batch must be an integer >= 1, got 0' },
      { with { stages = 2, schedule = 'pipedream' }, {}, "schedule must be 'gpipe', '1f1b', 'interleaved' or 'zb', got 'pipedream'" },
      { d, { overlap = 2 }, 'overlap must be a share of backward in [0, 1], got 2' },
      { d, { latency = math.huge }, 'latency must be a finite number >= 0 s, got inf' },
      { d, { device_speed = math.huge }, 'device_speed must be a finite number > 0, got inf' },
    } do
      c[2].devices, c[2].bandwidth = 8, 1e10
      ok, err = pcall(parallel.simulate, c[1], c[2])
      assert.is_false(ok)
      assert.matches('^[^:]*planner_spec%.lua:%d+: parallel%.simulate: ', tostring(err))
      assert.matches('parallel.simulate: ' .. c[3], err, 1, true)
    end
  end)
end)

describe('parallel.profile', function()
  it('leaves the model as it was after a plan over several devices (the speed together is timed on copies)', function()
    lunet.set_cpu_devices(2)
    local model = nn.Sequential { nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4) }
    local function unchanged(what)
      local mean, var, ps = model[2].running_mean:clone(), model[2].running_var:clone(), {}
      for i, p in ipairs(model:parameters()) do ps[i] = p:clone() end
      what()
      assert.equal(0, (model[2].running_mean - mean):abs():max():item())
      assert.equal(0, (model[2].running_var - var):abs():max():item())
      for i, p in ipairs(model:parameters()) do
        assert.equal(0, (p - ps[i]):abs():max():item())
        assert.is_nil(p.grad)
      end
    end
    local ok, err = pcall(function()
      unchanged(function()
        local t = parallel.profile.together(parallel.Plan.atoms_of(model), lunet.randn(8, 8), { 'cpu:0', 'cpu:1' }, { runs = 1 })
        assert.is_true(t > 0 and t <= 1)
      end)
      unchanged(function() parallel.plan(model, lunet.randn(8, 8), { devices = { 'cpu:0', 'cpu:1' }, runs = 1, trials = 2 }) end)
    end)
    lunet.set_cpu_devices(1)
    assert(ok, err)
  end)

  it('measures each atom: times, parameter and activation bytes, shapes; the model unchanged', function()
    local model = nn.Sequential { nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4) }
    local mean, w = model[2].running_mean:clone(), model[1].weight:clone()
    local prof = parallel.profile.atoms(parallel.Plan.atoms_of(model), lunet.randn(16, 8), 'cpu:0', { runs = 1 })
    assert.equal(4, #prof)
    assert.equal((8 * 16 + 16) * 4, prof[1].param_bytes)
    assert.equal(2 * 16 * 4, prof[2].param_bytes)
    assert.equal(0, prof[3].param_bytes)
    assert.same({ 16, 4 }, prof[4].out_shape)
    assert.equal(16 * 4 * 4, prof[4].out_bytes)
    for i, a in ipairs(prof) do
      assert.equal(16, a.batch)
      assert.is_true(a.fwd > 0 and a.bwd >= 0 and a.fwd0 >= 0 and a.fwd0 <= a.fwd and a.bwd0 <= a.bwd, 'atom ' .. i)
      assert.is_true(a.act_bytes >= a.out_bytes, 'atom ' .. i)   -- at least its output is kept
    end
    -- the weights' share of each backward (a zero-bubble W): the Linear's and BatchNorm's, not the ReLU's
    assert.is_true(prof[1].w_share > 0 and prof[1].w_share < 1)
    assert.is_true(prof[2].w_share > 0 and prof[2].w_share < 1)
    assert.equal(0, prof[3].w_share)
    assert.equal(0, (model[2].running_mean - mean):abs():max():item())
    assert.equal(0, (model[1].weight - w):abs():max():item())
    assert.is_true(prof.update > 0)
    for _, p in ipairs(model:parameters()) do assert.is_nil(p.grad) end
    -- churn: together what one forward and backward of the chain leaves to
    -- the collector (the allocator's bytes with the collector stopped; the
    -- gradients already there, as in training; blocks large enough that the
    -- allocator's rounding is small beside them)
    model = nn.Sequential { nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256) }
    local x = lunet.randn(64, 256)
    prof = parallel.profile.atoms(parallel.Plan.atoms_of(model), x, 'cpu:0', { runs = 1 })
    assert.is_true(prof.gc > 0 and prof.gc < 1)
    local churn = 0
    for _, a in ipairs(prof) do churn = churn + a.churn end
    model(x):sum():backward()
    collectgarbage(); collectgarbage()
    collectgarbage('stop')
    local a0 = lunet.memory_allocated('cpu:0')
    model(x):sum():backward()
    local grown = lunet.memory_allocated('cpu:0') - a0
    collectgarbage('restart')
    model:zero_grad()
    assert.is_true(grown > 0)
    assert.near(grown, churn, grown * 0.05)
    local ok, err = pcall(parallel.profile.atoms, { model, 'x' }, lunet.randn(2, 8), 'cpu:0')
    assert.matches('profile.atoms: atom 2 is not an nn.Module', err, 1, true)
  end)

  it("keeps a batch that costs more than twice half of it (a working set past the caches), measured again", function()
    -- a layer whose time grows with the square of the batch (as one past
    -- the caches does beyond some size): the whole chain's times must keep
    -- it, not hold each size to twice its half
    local Square = nn.Module:extend('Square')
    function Square:__init() end
    function Square:forward(x)
      local b, t0 = x:size(1), lunet.clock()
      while lunet.clock() - t0 < b * b * 2e-6 do end
      return x * 1
    end
    local model = nn.Sequential { nn.Linear(4, 4), Square() }
    local prof = parallel.profile.atoms(parallel.Plan.atoms_of(model), lunet.randn(32, 4), 'cpu:0', { runs = 1 })
    local w = prof.whole
    assert.equal(32, w[1][1])
    assert.equal(16, w[2][1])
    -- 32 samples: 2 ms of waiting, 16: 0.5 ms (twice that would be 1 ms)
    assert.is_true(w[1][2] > 1.6 * 2 * w[2][2], ('%.3f ms at 32, %.3f at 16'):format(w[1][2] * 1e3, w[2][2] * 1e3))
    assert.is_true(w[1][2] >= 2e-3 and w[2][2] >= 0.5e-3)
    -- and no size costs less than a smaller one
    for k = 2, #w do assert.is_true(w[k][2] <= w[k - 1][2]) end
    -- the host's queueing at each of those batches (Square's wait is the
    -- host's: its forward runs in Lua); list.host is the smaller profiled batch's (8)
    local h = prof.host_by_batch
    assert.equal(#w, #h)
    for k = 1, #w do assert.equal(w[k][1], h[k][1]) end
    assert.is_true(h[1][2] >= 2e-3 and h[2][2] >= 0.5e-3 and h[1][2] > 2 * h[2][2],
      ('%.3f ms at 32, %.3f at 16'):format(h[1][2] * 1e3, h[2][2] * 1e3))
    assert.equal(8, h[3][1])
    assert.equal(prof.host, h[3][2])
  end)

  it('profiles the garbage a step leaves as the model runs it: fused (a ReLU before a max pool runs after it)', function()
    lunet.manual_seed(3)
    local model = nn.Sequential { nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 15 * 15, 10) }
    local x = lunet.randn(32, 1, 32, 32)
    local prof = parallel.profile.atoms(parallel.Plan.atoms_of(model), x, 'cpu:0', { runs = 1 })
    local churn = 0
    for _, a in ipairs(prof) do churn = churn + a.churn end
    -- what the model's forward and backward leave to the collector (the
    -- gradients exist: accumulated in place), and the layers' one by one
    local function left(run)
      run(); collectgarbage(); collectgarbage()
      collectgarbage('stop')
      local a0 = lunet.memory_allocated('cpu:0')
      run()
      local bytes = lunet.memory_allocated('cpu:0') - a0
      collectgarbage('restart')
      return bytes
    end
    local fused = left(function() model(x):sum():backward() end)
    local apart = left(function()
      local y = x
      for i = 1, model:size() do y = model:get(i)(y) end
      y:sum():backward()
    end)
    assert.is_true(apart > 1.3 * fused, ('one by one %d bytes, fused %d'):format(apart, fused))
    assert.is_true(math.abs(churn - fused) < 0.05 * fused, ('profiled %d bytes, fused %d'):format(churn, fused))
  end)

  it("measures a pipeline's own cost per stage action and per step between two devices", function()
    lunet.set_cpu_devices(2)
    local o = parallel.profile.pipeline_overhead('cpu:0', 'cpu:1', 2)
    assert.is_true(o.fixed >= 0 and o.fixed < 1)
    for _, kind in ipairs({ 'gpipe', '1f1b', 'interleaved', 'zb' }) do
      assert.is_true(o.action[kind] >= 0 and o.action[kind] < 1, kind)
    end
    assert.is_true(o.replica > 0 and o.replica < 1)
    assert.is_true(o.replica_micro >= 0 and o.replica_micro <= o.replica)
    assert.is_nil(o.hybrid)   -- (two devices hold no hybrid)
    collectgarbage(); collectgarbage()
    lunet.set_cpu_devices(1)
  end)

  it("measures a hybrid's own cost per action and per step on 4 devices (two pipelines of 2 stages)", function()
    lunet.set_cpu_devices(5)
    local o = parallel.profile.pipeline_overhead(lunet.devices('cpu'), 2)
    for _, kind in ipairs({ 'gpipe', '1f1b', 'interleaved', 'zb' }) do
      assert.is_true(o.action[kind] >= 0 and o.action[kind] < 1, kind)
      assert.is_true(o.hybrid.action[kind] >= 0 and o.hybrid.action[kind] < 1, kind)
    end
    assert.is_true(o.hybrid.fixed >= 0 and o.hybrid.fixed < 1)
    -- (a hybrid's step at one micro-batch: at least its reducer's all-reduce)
    assert.is_true(o.hybrid.fixed + 4 * 2 * o.hybrid.action.gpipe > 0)
    collectgarbage(); collectgarbage()
    lunet.set_cpu_devices(1)
  end)

  it('fits alpha and beta to a line, one point that a burst of other work moved left out', function()
    local f = parallel.profile.fit({ 1, 2, 3 }, { 5 + 2, 5 + 4, 5 + 6 })
    assert.near(5, f.alpha, 1e-12)
    assert.near(2, f.beta, 1e-12)
    -- the link's sizes, 10 us + 40 GB/s, the 16 KiB all-reduce timed at 0.5
    -- ms (least squares made that alpha 142 us and beta 0.3 of the line's)
    local sizes, t = { 4096, 16384, 131072, 1048576, 8388608 }, {}
    for i, sz in ipairs(sizes) do t[i] = 1e-5 + sz * 2.5e-11 end
    t[2] = 5e-4
    f = parallel.profile.fit(sizes, t)
    assert.near(1e-5, f.alpha, 1e-9)
    assert.near(2.5e-11, f.beta, 1e-15)
    -- one size: its time is alpha
    f = parallel.profile.fit({ 4096 }, { 3e-5 })
    assert.equal(3e-5, f.alpha)
    assert.equal(0, f.beta)
    local ok, err = pcall(parallel.profile.link, 'cpu:0', 'cpu:0')
    assert.matches('profile.link: needs two different devices', err, 1, true)
  end)
end)
