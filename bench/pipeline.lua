-- The planner and pipelines on virtual CPU devices (issue 19's targets; 2 cores).
--   luajit bench/pipeline.lua [--steps S] [--groups G] [--models lenet5,resnet8,wide] [--devices 1,2,4]
--     [--no-grid] [--no-pipe] [--no-inter] [--rounds R] [--batch 64 (grid)] [--pipe-batch 256] [--group-seconds 0.08] [--trials 3] [--passes 3] [--save FILE]
-- Grid (the planner): for each model x device count (1, 2, 4 virtual devices;
-- 4 share 2 cores) x memory limit (none; 'tight': 60% of what data parallel
-- over those devices needs), lunet.parallel.plan profiles the model and
-- predicts every candidate; each candidate this build can make (one device
-- with or without accumulation, DataParallel, Pipeline once it exists) is
-- then trained for real, the limit set on the devices (a run out of memory
-- is reported), and its step time measured (median of G groups of at least
-- S steps and 80 ms, after a warm-up; the smallest of --passes such
-- measurements, the passes over the candidates in turn). Reported: predicted vs measured per candidate, the
-- error (the plan's prediction: after its trials, every figure scaled by
-- their measured over predicted; the cost model's own figure's error beside
-- it), and whether the plan's choice was the measured fastest: the choice
-- after its trials (--trials n: the n candidates predicted fastest and each
-- kind's fastest trained for a few steps, the measured fastest chosen) and
-- the cost model's own. --save FILE writes each scenario's plan inputs (the
-- profile, links, limits), its trials and the grid's measurements, for
-- tools/replay_plan.lua to score a changed cost model on the same figures.
-- Pipeline (when lunet.parallel.Pipeline exists): a 2-stage pipeline (2
-- devices x 1 core) balanced by the planner's partition with 8 micro-batches
-- against one device x 1 core (target >= 1.6x), and against every hand
-- balance (target: within 10% of the best), at batch 256 (--pipe-batch):
-- micro-batches of 8 samples (batch 64) cost more per sample than the whole
-- batch on one device (bench/RESULTS.md), which the pipeline pays and one
-- device does not; at 32 the difference is small.
-- Schedules (--no-inter skips it): 1F1B against interleaved 1F1B (2
-- stages a device) and zero-bubble (ZB-H1), all balanced automatically, at
-- 2, 4 and 8 micro-batches of the 'deep' CNN (eight equal convolutions) at
-- batch 256, against one device, timed in turn as above.
-- Needs 2 idle cores: the load average is printed with the figures.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local lunet = require 'lunet'
local nn, optim = lunet.nn, lunet.optim
local C = lunet.C

local args = {}
for i = 1, #arg do
  local k = arg[i]:match('^%-%-(.+)')
  if k then
    local v = arg[i + 1]
    if v == nil or v:match('^%-%-') then v = true end
    args[k] = v
  end
end
local STEPS = tonumber(args.steps) or 4
local GROUPS = tonumber(args.groups) or 5
local GROUP_SECONDS = tonumber(args['group-seconds']) or 0.08
local TRIALS = tonumber(args.trials) or 3   -- the plan's opts.trials (0: the cost model alone chooses)
local PASSES = tonumber(args.passes) or 3   -- the grid's passes over each scenario's candidates
local BATCH = tonumber(args.batch) or 64               -- the grid's
local PIPE_BATCH = tonumber(args['pipe-batch']) or 256  -- the pipeline target's: micro-batches of 32

local models = {
  lenet5 = { shape = { 1, 32, 32 }, make = function()
    return nn.Sequential { nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
      nn.Linear(84, 10) }
  end },
  resnet8 = { shape = { 3, 32, 32 }, make = function()
    return nn.Sequential { nn.Conv2d(3, 16, 3, { padding = 1, bias = false }), nn.BatchNorm2d(16), nn.ReLU(),
      nn.BasicBlock(16, 16, 1), nn.BasicBlock(16, 32, 2), nn.BasicBlock(32, 64, 2),
      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10) }
  end },
  -- eight equal convolutions: cuts anywhere balance, as interleaving needs
  deep = { shape = { 3, 32, 32 }, make = function()
    local l = { nn.Conv2d(3, 32, 3, { padding = 1, stride = 2 }), nn.ReLU() }
    for _ = 1, 8 do l[#l + 1] = nn.Conv2d(32, 32, 3, { padding = 1 }); l[#l + 1] = nn.ReLU() end
    l[#l + 1] = nn.MaxPool2d(2); l[#l + 1] = nn.Flatten(); l[#l + 1] = nn.Linear(32 * 8 * 8, 10)
    return nn.Sequential(l)
  end },
  -- a plain CNN whose stages are well above a transfer's time
  wide = { shape = { 3, 32, 32 }, make = function()
    return nn.Sequential {
      nn.Conv2d(3, 32, 3, { padding = 1 }), nn.ReLU(), nn.Conv2d(32, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(32, 64, 3, { padding = 1 }), nn.ReLU(), nn.Conv2d(64, 64, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10) }
  end },
}
local function list(s, default)
  local out = {}
  for v in (s or default):gmatch('[^,]+') do out[#out + 1] = tonumber(v) or v end
  return out
end
local MODELS = list(args.models, 'lenet5,resnet8,wide')
local DEVICES = list(args.devices, '1,2,4')

local function loadavg()
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or ''
  if f then f:close() end
  return s:match('^(%S+ %S+ %S+)') or '?'
end

local function free_all()
  lunet.reset_jit()   -- (jit.flush() alone leaves what LuaJIT blacklisted interpreted)
  for _ = 1, 4 do collectgarbage() end
  lunet.synchronize()
  -- (each configuration starts from an empty block cache: the blocks the
  -- one before left cached are not this one's cost or gain)
  for _, d in ipairs(lunet.devices('cpu')) do lunet.empty_cache(d) end
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

local function batch_of(shape, B)
  local s = { B }
  for i, d in ipairs(shape) do s[i + 1] = d end
  return lunet.randn(s), lunet.randint(1, 11, { B })
end

-- seconds per call of step: the median of GROUPS groups after a warm-up,
-- each group at least STEPS calls and GROUP_SECONDS long (a small model's
-- 4 steps take a few ms, which one descheduled thread doubles)
-- (also: the full collections lunet ran a step in those groups, and the
-- seconds of one: lunet.collection_stats)
-- a step called until the JIT has compiled it, as the plan's trials warm up
-- (profile_devices.warm_up). free_all flushed the traces, and a step's Lua
-- machinery interpreted takes several times its later figure: 3 calls alone
-- left the passes of a candidate apart by more than 15% for most of LeNet-5's
local warm_up = require('lunet.parallel.profile_devices').warm_up

local function time_steps(step)
  warm_up(step)
  lunet.synchronize()
  local t0 = lunet.clock()
  step()
  lunet.synchronize()
  local n = math.max(STEPS, math.min(200, math.ceil(GROUP_SECONDS / math.max(lunet.clock() - t0, 1e-6))))
  local ts = {}
  local gc0 = lunet.collection_stats()
  for g = 1, GROUPS do
    t0 = lunet.clock()
    for _ = 1, n do step() end
    lunet.synchronize()
    ts[g] = (lunet.clock() - t0) / n
  end
  local gc1 = lunet.collection_stats()
  local count = gc1.count - gc0.count
  return median(ts), count / (n * GROUPS), count > 0 and (gc1.seconds - gc0.seconds) / count or 0
end

local okp, Pipeline = pcall(require, 'lunet.parallel.Pipeline')
if not okp then Pipeline = nil end
-- what the plan may choose: what this build can run
local KINDS = Pipeline and { 'single', 'data', 'pipeline', 'hybrid' } or { 'single', 'data' }

-- a training step of candidate c of plan p on a fresh copy of the model
local function build(spec, p, c)
  local model = spec.make()
  local crit = nn.CrossEntropyLoss()
  local devs = {}
  for d = 1, c.devices do devs[d] = p.devices[d] end
  local x, y = batch_of(spec.shape, p.batch)
  if c.kind == 'single' then
    model:to(devs[1])
    x, y = x:to(devs[1]), y:to(devs[1])
    local opt = optim.Adam(model:parameters(), { lr = 1e-4 })
    local k = c.accumulate
    local xs, ys = {}, {}
    for i = 1, k do
      local b = p.batch / k
      xs[i], ys[i] = x:narrow(1, (i - 1) * b + 1, b), y:narrow(1, (i - 1) * b + 1, b)
    end
    return function()
      opt:zero_grad()
      for i = 1, k do crit(model(xs[i]), ys[i]):backward() end
      opt:step()
    end
  elseif c.kind == 'data' then
    local dp = lunet.parallel.DataParallel(model, { devices = devs, accumulate = c.accumulate })
    local opt = optim.Adam(dp:parameters(), { lr = 1e-4 })
    local k = c.accumulate
    local xs, ys = {}, {}
    for i = 1, k do
      local b = p.batch / k
      xs[i], ys[i] = x:narrow(1, (i - 1) * b + 1, b), y:narrow(1, (i - 1) * b + 1, b)
    end
    return function()
      opt:zero_grad()
      for i = 1, k do dp:forward_loss(crit, xs[i], ys[i]):backward() end
      opt:step()
    end
  elseif (c.kind == 'pipeline' or c.kind == 'hybrid') and Pipeline then
    local pipe = Pipeline(model, { devices = devs, chunks = c.chunks, schedule = c.schedule, balance = c.balance,
      replicas = c.replicas, interleave = c.interleave })
    local opt = optim.Adam(pipe:parameters(), { lr = 1e-4 })
    return function()
      opt:zero_grad()
      pipe:forward_loss(crit, x, y):backward()
      opt:step()
    end
  end
end

-- each device may hold `bytes` more than it holds now (0: no limit)
local function set_limit(n, bytes)
  for d = 0, n - 1 do C.ln_memory_set_limit(d, bytes > 0 and C.ln_memory_allocated(d) + bytes or 0) end
end

print(('bench/pipeline.lua: lunet %s, %d cores, batch %d, %d groups of at least %d steps and %.0f ms a measurement, load average %s'):format(
  lunet.version, C.ln_num_cores(), BATCH, GROUPS, STEPS, GROUP_SECONDS * 1e3, loadavg()))
print(('Pipeline: %s'):format(Pipeline and 'present' or 'not in this build (pipeline candidates are predicted, not run)'))

-- configurations {step = fn} timed in rounds, one group of STEPS steps each
-- per round, in turn (each round starts one later: no configuration always
-- follows the same one): c.times per round, c.t their median
local function in_rounds(list, rounds)
  for _, c in ipairs(list) do
    warm_up(c.step)
    c.times = {}
  end
  for r = 1, rounds do
    for i = 1, #list do
      local c = list[(i + r - 2) % #list + 1]
      -- the previous configuration's garbage is not this one's cost
      collectgarbage(); collectgarbage()
      c.step()
      lunet.synchronize()
      local t0 = lunet.clock()
      for _ = 1, STEPS do c.step() end
      lunet.synchronize()
      c.times[r] = (lunet.clock() - t0) / STEPS
    end
  end
  for _, c in ipairs(list) do c.t = median(c.times) end
end

-- ---- the planner's grid --------------------------------------------------------------------------

-- (per candidate run: err the plan's prediction's error, model_err the cost
-- model's own figure's, c.model_step: before the trials' calibration)
local errors, picks, near_picks, scenarios = {}, 0, 0, 0
local repeats = {}   -- per candidate: how far apart its passes' figures are
local model_picks, model_near = 0, 0
local saved = {}   -- (--save: per scenario, what tools/replay_plan.lua needs)
if not args['no-grid'] then
  print(('\n%-8s %4s %-7s  %-34s %10s %10s %7s %7s %6s  %-22s'):format('model', 'devs', 'limit', 'candidate', 'pred ms',
    'meas ms', 'error', 'model', 'apart', 'gc'))
  print('(pred ms: the plan\'s prediction, after its trials\' calibration; model: the cost model\'s own figure\'s error;')
  print(' apart: how far its passes\' figures are apart, the larger over the smaller (meas ms: the smallest);')
  print(' gc: the full collections a step measured x ms each, and in brackets the cost model\'s ms a step in them)')
  for _, n in ipairs(DEVICES) do
    free_all()
    lunet.set_cpu_devices(n)
    local devices = lunet.devices('cpu')
    for _, name in ipairs(MODELS) do
      local spec = models[name]
      local sample = batch_of(spec.shape, BATCH)
      local base = lunet.parallel.plan(spec.make(), sample, { devices = devices, batch = BATCH, kinds = KINDS,
        trials = TRIALS })
      -- (what the cost model took from the profile)
      local pl = base.link and base.link.pipeline or {}
      local whole = {}
      for k, e in ipairs(base.profile.whole) do whole[k] = ('%d: %.2f'):format(e[1], e[2] * 1e3) end
      local hy = pl.hybrid and ('%.3f'):format(pl.hybrid.action['1f1b'] * 1e3) or '-'
      print(('%-8s %4d profile: whole chain (batch: ms) %s, host %.3f ms, collection %.3f ms, together %s, action %.3f ms (hybrid %s), replica %.3f ms')
        :format(name, n, table.concat(whole, ', '), base.profile.host * 1e3,
        (base.gc or 0) * 1e3, base.together and ('%.2f'):format(base.together) or '-',
        ((pl.action or {})['1f1b'] or 0) * 1e3, hy, (pl.replica or 0) * 1e3))
      for _, limit in ipairs({ 'none', 'tight' }) do
        local p = base
        local bytes = 0
        if limit == 'tight' then
          local need = 0
          for _, c in ipairs(base.candidates) do
            if c.kind == (n == 1 and 'single' or 'data') and c.accumulate == 1 then need = c.peak end
          end
          bytes = math.floor(need * 0.6)
          p = lunet.parallel.plan(spec.make(), sample, { devices = devices, batch = BATCH, profile = base.profile,
            link = base.link, together = base.together, gc = base.gc, memory = bytes, kinds = KINDS, trials = TRIALS })
        end
        scenarios = scenarios + 1
        local best, best_c
        local measured, notes, passes = {}, {}, {}
        local gcs = {}   -- per candidate: {collections a step, seconds each} of its fastest pass
        -- each candidate that fits trained and timed PASSES times, the passes
        -- in turn (forward, backward, ...): its figure the smallest of its
        -- passes, so that a burst of other work on the cores during one
        -- candidate's turn does not decide the comparison
        local function measure(c)
          free_all()
          set_limit(n, bytes)
          local ok, step = pcall(build, spec, p, c)
          local meas, note, gc_n, gc_s
          if ok and step then
            local ok2, t, n_, s_ = pcall(time_steps, step)
            if ok2 then meas, gc_n, gc_s = t, n_, s_ else note = 'failed: ' .. tostring(t):sub(1, 200) end
          elseif not ok then note = 'failed: ' .. tostring(step):sub(1, 200) end
          step = nil
          free_all()
          set_limit(n, 0)
          return meas, note, gc_n, gc_s
        end
        local cands = p.candidates
        for pass = 1, PASSES do
          for i = 1, #cands do
            local c = cands[pass % 2 == 1 and i or #cands + 1 - i]
            if c.fits and not notes[c] then
              local meas, note, gc_n, gc_s = measure(c)
              if note then notes[c], measured[c] = note, nil
              else
                passes[c] = passes[c] or {}
                passes[c][#passes[c] + 1] = meas
                if not measured[c] or meas < measured[c] then measured[c], gcs[c] = meas, { gc_n, gc_s } end
              end
            end
          end
        end
        if args.save then
          local rec = { model = name, devices = n, limit = limit, memory = bytes, batch = BATCH, kinds = KINDS,
            profile = p.profile, link = p.link, together = p.together, gc = p.gc, candidates = {} }
          for _, c in ipairs(cands) do
            rec.candidates[#rec.candidates + 1] = { label = c.label, measured = measured[c], passes = passes[c],
              trial = c.measured, calibrates = c.calibrates or nil, trial_error = c.trial_error and true or nil }
          end
          saved[#saved + 1] = rec
        end
        for _, c in ipairs(cands) do
          local meas, note = measured[c], notes[c] or (c.fits and '' or 'does not fit')
          if meas and (not best or meas < best) then best, best_c = meas, c end
          local err = meas and (c.step / meas - 1) or nil
          -- (the bench's own repeatability: a candidate's passes, the larger over the smaller)
          local ps, apart = passes[c], nil
          if ps and #ps >= 2 then
            apart = math.max(unpack(ps)) / math.min(unpack(ps)) - 1
            repeats[#repeats + 1] = apart
          end
          if err then
            errors[#errors + 1] = { err = err, model_err = (c.model_step or c.step) / meas - 1, apart = apart,
              label = ('%s/%d/%s/%s'):format(name, n, limit, c.label) }
          end
          if meas or c == p.chosen then
            -- (gc: the full collections a step, measured x ms each; predicted: the cost model's ms a step in them)
            local g = gcs[c]
            print(('%-8s %4d %-7s  %-34s %10.2f %10s %7s %7s %6s  %-22s %s%s'):format(name, n, limit, c.label, c.step * 1e3,
              meas and ('%.2f'):format(meas * 1e3) or '-', err and ('%+.0f%%'):format(err * 100) or '',
              (meas and c.model_step) and ('%+.0f%%'):format((c.model_step / meas - 1) * 100) or '',
              apart and ('%.0f%%'):format(apart * 100) or '',
              g and ('%.2f x %.2f (%.2f)'):format(g[1], g[2] * 1e3, (c.gc or 0) * 1e3) or '',
              c == p.chosen and '<- chosen ' or '', note))
          end
        end
        -- the plan's choice (after its trials) and the cost model's own
        local function verdict(c)
          local good = best_c == c
          -- (the chosen one measured within 5% of the fastest: a tie that the measurement's noise decides)
          local t = measured[c]
          local near = good or (t and best and t <= 1.05 * best)
          return good, near, good and '' or (near and ('  (within %.1f%%)'):format((t / best - 1) * 100) or '  (MISS)')
        end
        local good, near, says = verdict(p.chosen)
        if good then picks = picks + 1 end
        if near then near_picks = near_picks + 1 end
        local model_c = p.predicted_choice or p.chosen
        local mgood, mnear, msays = verdict(model_c)
        if mgood then model_picks = model_picks + 1 end
        if mnear then model_near = model_near + 1 end
        print(('%-8s %4d %-7s  chosen: %s%s, measured fastest: %s%s'):format(name, n, limit, p.chosen.label,
          p.predicted_choice and (' after %d trials (the model\'s: %s%s)'):format(#lunet.parallel.trial.pick(p, TRIALS),
          model_c.label, msays) or '', best_c and best_c.label or '-', says))
      end
    end
  end
  if args.save then
    local f = assert(io.open(args.save, 'w'))
    f:write(dofile('bench/plan_record.lua').dump(saved))
    f:close()
    print('saved: ' .. args.save)
  end
  local within, worst, model_within, model_worst = 0, 0, 0, 0
  for _, e in ipairs(errors) do
    if math.abs(e.err) <= 0.15 then within = within + 1 end
    if math.abs(e.model_err) <= 0.15 then model_within = model_within + 1 end
    worst, model_worst = math.max(worst, math.abs(e.err)), math.max(model_worst, math.abs(e.model_err))
  end
  print(('\nplanner: %d of %d candidates run predicted within 15%% (worst %.0f%%); the choice was the measured '
    .. 'fastest in %d of %d scenarios (within 5%% of it in %d)%s; load average %s'):format(within, #errors, worst * 100,
    picks, scenarios, near_picks, TRIALS > 0 and ('; the cost model\'s own choice (no trials) in %d (within 5%%: %d)'):format(
    model_picks, model_near) or '', loadavg()))
  if TRIALS > 0 then
    print(('the cost model\'s own figures (before the trials\' calibration): %d of %d within 15%% (worst %.0f%%)')
      :format(model_within, #errors, model_worst * 100))
  end
  -- the floor under the first figure: how often the bench disagrees with itself
  local apart, worst_apart = 0, 0
  for _, r in ipairs(repeats) do
    if r > 0.15 then apart = apart + 1 end
    worst_apart = math.max(worst_apart, r)
  end
  if #repeats > 0 then
    print(('repeatability: a candidate\'s %d passes, measured a few seconds apart, differ by more than 15%% in %d of %d '
      .. '(the larger over the smaller; worst %.0f%%)'):format(PASSES, apart, #repeats, worst_apart * 100))
    -- (the prediction's error where the measurement itself is repeatable)
    local steady, steady_within, steady_worst = 0, 0, 0
    for _, e in ipairs(errors) do
      if e.apart and e.apart <= 0.15 then
        steady = steady + 1
        if math.abs(e.err) <= 0.15 then steady_within = steady_within + 1 end
        steady_worst = math.max(steady_worst, math.abs(e.err))
      end
    end
    print(('of the %d candidates whose passes agree within 15%%: %d predicted within 15%% (worst %.0f%%)')
      :format(steady, steady_within, steady_worst * 100))
  end
end

-- a training step (Adam) of spec's model on cpu:0 on the batch x, y
local function one_device_step(spec, x, y, crit)
  local m = spec.make():to('cpu:0')
  local opt = optim.Adam(m:parameters(), { lr = 1e-4 })
  return function() opt:zero_grad(); crit(m(x), y):backward(); opt:step() end
end
-- a training step of spec's model as a 2-stage Pipeline over cpu:0 and cpu:1 (opts: its own), and the pipeline
local function pipeline_step(spec, x, y, crit, opts)
  opts.devices = { 'cpu:0', 'cpu:1' }
  local pipe = Pipeline(spec.make(), opts)
  local opt = optim.Adam(pipe:parameters(), { lr = 1e-4 })
  return function() opt:zero_grad(); pipe:forward_loss(crit, x, y):backward(); opt:step() end, pipe
end

-- ---- pipeline targets ----------------------------------------------------------------------------

if Pipeline and not args['no-pipe'] then
  free_all()
  lunet.set_cpu_devices(2)
  local spec = models.wide
  local x, y = batch_of(spec.shape, PIPE_BATCH)
  local crit = nn.CrossEntropyLoss()
  local function pipe_step(balance)
    return pipeline_step(spec, x, y, crit, { chunks = 8, schedule = '1f1b', balance = balance,
      sample = balance == 'time' and x or nil })
  end
  local p = lunet.parallel.plan(spec.make(), x, { devices = { 'cpu:0', 'cpu:1' }, batch = PIPE_BATCH,
    kinds = { 'pipeline' }, chunks = { 8 }, schedules = { '1f1b' } })
  local plan_bal = p.chosen.balance
  -- the automatic balance: Pipeline's default, balance = 'time' (the atoms
  -- profiled, split, and the split checked against its neighbours by running
  -- their stages)
  local auto_step, auto_pipe = pipe_step('time')
  local auto_bal = auto_pipe.counts
  -- every configuration built first, then timed in rounds, one group of
  -- STEPS steps each per round, in turn: each figure is the median of its
  -- rounds, so that the machine's drift falls on all of them alike (the
  -- best of 13 hand balances measured once each would be a lucky draw).
  -- One device is timed alone before the pipelines: a pipeline timed right
  -- after its steps was slower for a few steps (the allocator's cache then
  -- holds the whole batch's block sizes, not the micro-batches').
  local natoms = #require('lunet.parallel.atoms').of(spec.make())
  local configs = { { name = 'one device', step = one_device_step(spec, x, y, crit) }, { name = 'auto', step = auto_step } }
  for k = 1, natoms - 1 do configs[#configs + 1] = { name = ('{%d,%d}'):format(k, natoms - k), k = k, step = pipe_step({ k, natoms - k }) } end
  local ROUNDS = tonumber(args.rounds) or 5
  in_rounds({ configs[1] }, ROUNDS)
  local pipes = {}
  for i = 2, #configs do pipes[#pipes + 1] = configs[i] end
  in_rounds(pipes, ROUNDS)
  local t1, ta = configs[1].t, configs[2].t
  print(('\npipeline (wide CNN, batch %d, 8 micro-batches, 1F1B; medians of %d rounds of %d steps, in turn): one device x 1 core %.1f ms, 2-stage auto balance {%s} %.1f ms: %.2fx (target 1.6x)')
    :format(PIPE_BATCH, ROUNDS, STEPS, t1 * 1e3, table.concat(auto_bal, ','), ta * 1e3, t1 / ta))
  local best, hand = nil, {}
  for i = 3, #configs do
    local c = configs[i]
    hand[#hand + 1] = ('%s %.1f'):format(c.name, c.t * 1e3)
    if not best or c.t < best.t then best = c end
  end
  print(('hand balances (ms): %s; the planner\'s split (profile only): {%s}'):format(table.concat(hand, ', '),
    table.concat(plan_bal, ',')))
  local same = ('{%s}'):format(table.concat(auto_bal, ',')) == best.name
  print(('best hand balance %s %.1f ms; auto within %.1f%% of it (target 10%%)%s; load average %s'):format(
    best.name, best.t * 1e3, (ta / best.t - 1) * 100, same and
    ' (auto chose that same split: the two figures are one configuration built twice and timed alike, their gap the measurement\'s)'
    or '', loadavg()))
end

-- ---- interleaved 1F1B and zero-bubble against 1F1B ---------------------------------------------------

if Pipeline and not args['no-inter'] then
  free_all()
  lunet.set_cpu_devices(2)
  local spec = models.deep
  local x, y = batch_of(spec.shape, PIPE_BATCH)
  local crit = nn.CrossEntropyLoss()
  local configs = { { name = 'one device', step = one_device_step(spec, x, y, crit) } }
  local SCHEDULES, CHUNKS = { '1f1b', 'interleaved', 'zb' }, { 2, 4, 8 }
  for _, chunks in ipairs(CHUNKS) do
    for _, sched in ipairs(SCHEDULES) do
      local step, pipe = pipeline_step(spec, x, y, crit, { chunks = chunks, schedule = sched, sample = x })
      configs[#configs + 1] = { name = ('%s {%s}'):format(sched, table.concat(pipe.counts, ',')),
        chunks = chunks, step = step }
    end
  end
  local ROUNDS = tonumber(args.rounds) or 7
  in_rounds(configs, ROUNDS)
  print(('\nschedules (deep CNN, batch %d, 2 devices x 1 core, automatic balance; medians of %d rounds of %d steps, in turn): one device %.1f ms')
    :format(PIPE_BATCH, ROUNDS, STEPS, configs[1].t * 1e3))
  local k = 2
  for _, chunks in ipairs(CHUNKS) do
    local base = configs[k]
    local cells = {}
    for j = 0, #SCHEDULES - 1 do
      local c = configs[k + j]
      cells[#cells + 1] = ('%s %.1f ms (%.2fx one device%s)'):format(c.name, c.t * 1e3, configs[1].t / c.t,
        j == 0 and '' or (', %.2fx 1F1B'):format(base.t / c.t))
    end
    -- (zero-bubble's: its steps' idle share, F, B and W alike)
    local zb_steps = #lunet.parallel.schedule.build('zb', 2, chunks)
    print(('  %d chunks: %s; bubbles: 1F1B %.0f%%, interleaved %.0f%%, zero-bubble %.0f%%'):format(chunks,
      table.concat(cells, '; '), 100 / (chunks + 1), 100 / (2 * chunks + 1), 100 * (1 - 3 * chunks / zb_steps)))
    k = k + #SCHEDULES
  end
  print(('load average %s'):format(loadavg()))
end
