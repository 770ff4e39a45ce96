-- lunet.parallel.profile_devices: what the planner measures of the devices
-- together and of the links between them (lunet.parallel.profile re-exports
-- these as profile.together, profile.link, profile.fit and
-- profile.pipeline_overhead; profile.lua measures the model's atoms).
local lunet = require 'lunet'
local core = require 'lunet.core'
local is_table = core.is_table
local C = core.C

local util = require 'lunet.util'
local median = util.median

local profile = {}
-- a short run is repeated (at least runs times) until WHOLE_SECONDS or
-- WHOLE_RUNS: one run alone is noisy (profile.lua's whole chains too)
local WHOLE_RUNS, WHOLE_SECONDS = 15, 0.06
profile.WHOLE_RUNS, profile.WHOLE_SECONDS = WHOLE_RUNS, WHOLE_SECONDS
local TOGETHER_SECONDS = 0.4

local function fail(fn, msg, lvl) error('profile.' .. fn .. ': ' .. msg, (lvl or 1) + 1) end

-- opts.runs of a profile: nil (the default) or an integer 1..MAX_RUNS (1e9 repeats ran for days)
local MAX_RUNS = 1000
function profile.check_runs(fn, runs)
  if runs ~= nil and (type(runs) ~= 'number' or runs % 1 ~= 0 or runs < 1 or runs > MAX_RUNS) then
    require('lunet.options').raise(('%s: runs must be an integer in 1..%d, got %s'):format(fn, MAX_RUNS, tostring(runs)))
  end
  return runs
end

-- seconds a call of step: calls to warm up (at least 3, and up to
-- WARM_CALLS while they take under WARM_SECONDS: LuaJIT compiles code once
-- it has run some hundred times, and before that a tiny model's call, the
-- Lua machinery around it interpreted, took up to 5x its later time), then
-- the median of runs groups of at least min_calls (4) calls and seconds
-- (GROUP_SECONDS; a tiny model's call takes well under a millisecond, which
-- one descheduled thread doubles) (also the planner's trials, lunet.parallel.trial)
local GROUP_SECONDS = 0.015
local WARM_CALLS, WARM_SECONDS = 200, 0.05
-- (quantile: which of the sorted groups, 0.5 default; the machinery's
-- figures take the lower quartile: it is the same work each call, and what
-- disturbs it, a descheduled thread or a late wake-up, only adds)
local function warm_up(step)
  local warm0 = lunet.clock()
  for i = 1, WARM_CALLS do
    step()
    if i >= 3 and lunet.clock() - warm0 > WARM_SECONDS then break end
  end
end
profile.warm_up = warm_up
local function per_call(step, runs, seconds, min_calls, quantile)
  warm_up(step)
  lunet.synchronize()
  local t0 = lunet.clock()
  step()
  lunet.synchronize()
  local n = math.max(min_calls or 4,
    math.min(100, math.ceil((seconds or GROUP_SECONDS) / math.max(lunet.clock() - t0, 1e-6))))
  local ts = {}
  for r = 1, runs do
    lunet.synchronize()
    t0 = lunet.clock()
    for _ = 1, n do step() end
    lunet.synchronize()
    ts[r] = (lunet.clock() - t0) / n
  end
  return quantile and util.quantile(ts, quantile) or median(ts)
end
profile.per_call = per_call
local MACHINERY_RUNS, LOWER = 8, 0.25   -- the pipeline's and DataParallel's own costs: groups, quantile
local FEW, MANY = 2, 16                   -- the micro-batches a pipeline's machinery is timed at
local INTERLEAVE = 2                      -- (cost.lua's: the interleaved schedule's stages a device)

-- profile.together(atoms, sample, devices[, {runs = 3}]) -> the speed of
-- each device while all of them train a copy of the atoms at once, relative
-- to the first one alone (at most 1): devices that share cores, memory
-- bandwidth or a loaded machine slow each other down, which thread shares
-- alone do not tell. Copies on every device, the first too: training one
-- moves BatchNorm's running statistics, which the model keeps as they were
-- (as profile.atoms does)
function profile.together(atoms, sample, devices, opts)
  local runs = profile.check_runs('profile.together', (opts or {}).runs) or 3
  local list = {}
  for i, a in ipairs(atoms) do list[i] = is_table(a) and a.module and not a._params and a.module or a end
  local copies, xs = {}, {}
  for k, dev in ipairs(devices) do
    copies[k] = {}
    for i, a in ipairs(list) do copies[k][i] = a:clone():to(dev) end
    xs[k] = sample:to(dev)
  end
  local function chain(k)
    local y = xs[k]
    for i = 1, #list do y = copies[k][i](y) end
    if y.requires_grad then y:sum():backward() end
  end
  local function timed(n)
    lunet.synchronize()
    local t0 = lunet.clock()
    for k = 1, n do chain(k) end
    lunet.synchronize()
    return lunet.clock() - t0
  end
  -- warmed up (the JIT compiles each copy's chain on its first runs), then
  -- alone and all together in turn, the median of their ratios: a small
  -- model's run is short and one run alone is noisy
  for _ = 1, 3 do timed(#devices) end
  local ratios, spent, r = {}, 0, 0
  -- (a ratio of two runs moves with any other work on the cores: at least
  -- TOGETHER_SECONDS of them, so that the median has several to choose from)
  while r < runs or (spent < TOGETHER_SECONDS and r < WHOLE_RUNS) do
    r = r + 1
    local alone = timed(1)
    local all = timed(#devices)
    ratios[r], spent = alone / all, spent + alone + all
  end
  return math.min(1, median(ratios))
end

-- t = alpha + beta * s over the points, both >= 0, robust to a point that a
-- burst of other work on the cores moved (Theil-Sen: beta the median of the
-- slopes between pairs of points, alpha the median of t - beta * s). A least
-- squares fit let one slow small size tilt the line to beta 0 and a tenfold
-- alpha.
local function fit(sizes, times)
  local slopes, n = {}, #sizes
  for i = 1, n do
    for j = i + 1, n do
      if sizes[j] ~= sizes[i] then slopes[#slopes + 1] = (times[j] - times[i]) / (sizes[j] - sizes[i]) end
    end
  end
  local beta = #slopes > 0 and median(slopes) or 0
  if not (beta >= 0) then beta = 0 end
  local rest = {}
  for i = 1, n do rest[i] = times[i] - beta * sizes[i] end
  local alpha = n > 0 and median(rest) or 0
  return { alpha = math.max(alpha, 0), beta = beta }
end
profile.fit = fit

function profile.link(a, b, opts)
  opts = opts or {}
  local names = {}
  for k, d in ipairs({ a, b }) do
    local ok, id = pcall(core.device_id, 'profile.link', d)
    if not ok then error(id, 0) end   -- (device_id named the caller's line already)
    names[k] = core.device_name(id)
  end
  if names[1] == names[2] then fail('link', 'needs two different devices, got ' .. names[1] .. ' twice', 2) end
  local sizes = opts.sizes
  if not sizes then
    -- (each device holds two buffers of a size at once: a quarter of what a limit leaves free)
    local cap = math.huge
    for _, d in ipairs(names) do
      local lim = lunet.memory_limit(d)
      if lim > 0 then cap = math.min(cap, (lim - lunet.memory_allocated(d)) / 8) end
    end
    sizes = {}
    for _, sz in ipairs({ 2 ^ 12, 2 ^ 14, 2 ^ 17, 2 ^ 20, 2 ^ 23 }) do
      if sz <= cap or #sizes < 2 then sizes[#sizes + 1] = sz end
    end
  end
  local runs = profile.check_runs('profile.link', opts.runs) or 5
  local comm = lunet.comm.Communicator(names)
  local bufs, c, r = {}, {}, {}
  for k, s in ipairs(sizes) do
    local numel = math.max(1, math.floor(s / 4))
    bufs[k] = { src = lunet.rand({ numel }, { device = names[1] }), dst = lunet.empty({ numel }, { device = names[2] }),
      list = { lunet.rand({ numel }, { device = names[1] }), lunet.rand({ numel }, { device = names[2] }) } }
    c[k], r[k] = {}, {}
  end
  -- (in rounds over the sizes: a burst of other work then costs one run of
  -- several sizes, which their medians drop, not every run of one size)
  for i = 0, runs do
    for k, b in ipairs(bufs) do
      lunet.synchronize()
      local t0 = lunet.clock()
      b.dst:copy_(b.src)
      lunet.synchronize()
      local t1 = lunet.clock()
      comm:allreduce(b.list)
      lunet.synchronize()
      local t2 = lunet.clock()
      if i > 0 then c[k][i], r[k][i] = t1 - t0, t2 - t1 end   -- (round 0 warms up)
    end
  end
  local ct, at = {}, {}
  for k, b in ipairs(bufs) do
    ct[k], at[k] = median(c[k]), median(r[k])
    sizes[k] = b.src:numel() * 4
  end
  local copy, ar = fit(sizes, ct), fit(sizes, at)
  -- as a ring's figures at n = 2: 2 * alpha' + S * beta'
  ar.alpha = ar.alpha / 2
  local overlap = 1
  if names[1]:match('^cpu') then
    local used = 0
    for _, d in ipairs(lunet.devices('cpu')) do used = used + lunet.get_num_threads(d) end
    if used >= C.ln_num_cores() then overlap = 0 end
  end
  -- (over every device the plan may use, when given: with more devices than
  -- cores each action also waits for its thread to be scheduled)
  local all = opts.devices or names
  return { copy = copy, allreduce = ar, overlap = overlap, pipeline = profile.pipeline_overhead(all, runs) }
end

-- What a pipeline's machinery costs beside its layers' work: a pipeline of
-- tiny Linear layers over devices a and b (or over a list of devices, a
-- stage each; the interleaved schedule's INTERLEAVE stages a device), timed at
-- FEW and MANY micro-batches per schedule (an action costs more the more
-- micro-batches a step has in flight: timed at the ends of the range plans
-- use, not from 1). action: the seconds each stage action (one
-- micro-batch's forward, backward or zero-bubble W at one stage: queueing, buffers, events,
-- the boundary transfer, the worker's wake-up) adds, per schedule; fixed:
-- what a step adds once (setup, the loss, the optimizer's call); replica:
-- what DataParallel over the two devices costs a step per replica beside
-- the layers' work (the same tiny model); replica_micro: what each further
-- micro-batch of accumulate = k costs a replica (no all-reduce).
-- hybrid (4 devices or more): action and fixed of two such pipelines of
-- half the devices' stages each, data parallel (the host queues both
-- replicas' actions, and the reducer's buckets; fixed includes their
-- all-reduce of a few bytes).
function profile.pipeline_overhead(a, b, runs)
  local Pipeline = require 'lunet.parallel.Pipeline'
  local nn = require 'lunet.nn'
  local devs = is_table(a) and a or { a, b }
  if is_table(a) then runs = b end
  runs = math.max(runs or MACHINERY_RUNS, MACHINERY_RUNS)
  local S = #devs
  local crit = nn.MSELoss()
  -- per action and per step of R pipelines of #list / R stages over list
  local model
  local schedules = require 'lunet.parallel.schedule'
  local function machinery(R, list)
    local out, fixed = { action = {} }, {}
    for _, kind in ipairs({ 'gpipe', '1f1b', 'interleaved', 'zb' }) do
      local t = {}
      local stages = #list / R * (kind == 'interleaved' and INTERLEAVE or 1)
      for _, m in ipairs({ FEW, MANY }) do
        -- (fresh layers each: a hybrid's reducer keeps hooks on its model's parameters)
        local layers, ones = {}, {}
        for k = 1, stages do layers[k], ones[k] = nn.Linear(4, 4), 1 end
        model = nn.Sequential(layers)
        local pipe = Pipeline(model, { devices = list, chunks = m, schedule = kind, balance = ones, replicas = R })
        local x, y = lunet.randn(R * m, 4), lunet.randn(R * m, 4)
        t[m] = per_call(function()
          pipe:zero_grad()
          pipe:forward_loss(crit, x, y):backward()
        end, runs, nil, nil, LOWER)
      end
      local acts = schedules.actions(kind) * stages * R   -- (2 actions a micro-batch a stage; zero-bubble 3)
      out.action[kind] = math.max(0, (t[MANY] - t[FEW]) / ((MANY - FEW) * acts))
      fixed[#fixed + 1] = math.max(0, t[FEW] - FEW * acts * out.action[kind])
    end
    out.fixed = math.min(unpack(fixed))
    return out
  end
  local out = machinery(1, devs)
  local plain = model
  if S >= 4 then out.hybrid = machinery(2, { unpack(devs, 1, S - S % 2) }) end
  model = plain
  -- DataParallel over the two devices, the same tiny model: what a replica
  -- costs a step beside its work (scatter, gather, the reducer's buckets)
  local DataParallel = require('lunet.parallel.DataParallel')
  local dp = DataParallel(model, { devices = devs })
  local x, y = lunet.randn(8, 4), lunet.randn(8, 4)
  out.replica = per_call(function()
    dp:zero_grad()
    dp:forward_loss(crit, x, y):backward()
  end, runs, nil, nil, LOWER) / S
  -- and what each further accumulated micro-batch costs a replica (no all-reduce)
  local fresh = {}
  for k = 1, S do fresh[k] = nn.Linear(4, 4) end
  local acc = DataParallel(nn.Sequential(fresh), { devices = devs, accumulate = 4 })
  local four = per_call(function()
    acc:zero_grad()
    for _ = 1, 4 do acc:forward_loss(crit, x, y):backward() end
  end, runs, nil, nil, LOWER) / S
  out.replica_micro = math.min(out.replica, math.max(0, (four - out.replica) / 3))
  model:to('cpu')
  return out
end

return profile
