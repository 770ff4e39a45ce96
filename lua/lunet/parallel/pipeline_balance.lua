-- How parallel.Pipeline assigns its model's atoms to stages.
--   counts(atom_list, stages, balance, lvl) -> {atoms of stage 1, ...}, or
--     nil for a measured balance (made by measured() at the first batch)
-- balance: a list of atom counts (each >= 1, summing to the atom count),
-- 'params' (contiguous stages whose largest parameter count is the least
-- possible; an atom without parameters weighs 1, so that they spread too),
-- 'time' (the default) or 'memory': measured() profiles each atom on the
-- model's device with a sample batch (lunet.parallel.profile) and
-- splits them (lunet.parallel.partition) so that the slowest stage, at the
-- devices' relative speeds (their thread counts), is the fastest possible
-- within each device's memory limit, then checked by running the stages of
-- that split and of its neighbours (refine) ('memory': so that the largest stage's
-- memory is the least possible). A stage's memory counts its parameters
-- five times (gradients, Adam's two moments, a micro-batch's fresh gradient
-- before it is added in) and its activations once per micro-batch its
-- schedule keeps in flight.
local M = {}
local lunet = require 'lunet'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local median = require('lunet.util').median

local function fail(msg, lvl) error('Pipeline: ' .. msg, lvl + 1) end

-- contiguous split of weights w into S runs (each >= 1 item) minimising the
-- largest run's sum (dynamic programming over prefix sums; ties: earlier cuts)
function M.split(w, S)
  local n = #w
  local pre = { [0] = 0 }
  for i = 1, n do pre[i] = pre[i - 1] + w[i] end
  local best, cut = {}, {}
  for s = 1, S do best[s], cut[s] = {}, {} end
  for i = 1, n do best[1][i] = pre[i] end
  for s = 2, S do
    for i = s, n do
      local b, c = math.huge, nil
      for j = s - 1, i - 1 do
        local v = math.max(best[s - 1][j], pre[i] - pre[j])
        if v < b then b, c = v, j end
      end
      best[s][i], cut[s][i] = b, c
    end
  end
  local counts, i = {}, n
  for s = S, 2, -1 do
    local j = cut[s][i]
    counts[s] = i - j
    i = j
  end
  counts[1] = i
  return counts
end

function M.counts(list, S, balance, lvl)
  lvl = lvl + 1
  local n = #list
  if is_table(balance) then
    if #balance ~= S then fail(('balance has %d entries for %d stages'):format(#balance, S), lvl) end
    local total = 0
    for s = 1, S do
      local c = balance[s]
      if type(c) ~= 'number' or c % 1 ~= 0 or c < 1 then
        fail(('balance[%d] must be an integer >= 1 (atoms of stage %d), got %s'):format(s, s, tostring(c)), lvl)
      end
      total = total + c
    end
    if total ~= n then fail(('balance sums to %d atoms, the model has %d'):format(total, n), lvl) end
    return { unpack(balance) }
  end
  if balance == 'params' then
    local w = {}
    for i, a in ipairs(list) do w[i] = a.module:num_parameters() + 1 end
    return M.split(w, S)
  end
  if balance == nil or balance == 'time' or balance == 'memory' then return nil end
  fail(("balance must be 'time', 'memory', 'params' or a list of atom counts, got %s"):format(tostring(balance)), lvl)
end

-- the measured split for pipe (its devices, chunks and schedule) and a sample
-- batch: counts, and what balance_report prints
function M.measured(pipe, list, sample, kind)
  local S, devs = pipe.S, pipe.stage_devices
  -- profiled where the model is (it may fit no single stage's device), else on the first stage's
  local at = devs[1]
  for _, a in ipairs(list) do
    local p = a.module:parameters()[1]
    if p then at = p.device; break end
  end
  local prof = require('lunet.parallel.profile').atoms(list, sample, at)
  local B = sample:size(1)
  local Mb = math.min(pipe.chunks, math.max(1, math.floor(B / pipe.replicas)))
  local k = math.ceil(B / pipe.replicas / Mb) / prof[1].batch   -- a micro-batch's share of the profiled batch
  local costs = {}
  for i, e in ipairs(prof) do
    local t = e.fwd0 + (e.fwd - e.fwd0) * k + e.bwd0 + (e.bwd - e.bwd0) * k
    costs[i] = { time = t, memory = 5 * e.param_bytes, act = e.act_bytes * k, name = list[i].name }
  end
  local speed, mem, top = {}, {}, 0
  local inflight = require('lunet.parallel.schedule').held(pipe.kind, S, Mb)
  for j = 1, S do top = math.max(top, lunet.get_num_threads(devs[j])) end
  for j = 1, S do
    speed[j] = lunet.get_num_threads(devs[j]) / top
    local lim = lunet.memory_limit(devs[j])
    mem[j] = lim > 0 and lim or nil
  end
  local opts = { speed = speed, memory = #mem == S and mem or nil, inflight = inflight }
  local split = require('lunet.parallel.partition').split
  local counts
  if kind == 'memory' then
    local mc = {}
    for i, c in ipairs(costs) do mc[i] = { time = c.memory + c.act * Mb, memory = c.memory, act = c.act } end
    counts = split(mc, S, { memory = opts.memory, inflight = inflight })
  elseif S > (pipe.P or S) then
    -- (interleaved: a device runs several stages; the split whose schedule,
    -- played out with the stages' times, ends first; a backward taken as
    -- twice its forward)
    local steps = require('lunet.parallel.schedule').build('interleaved', S, Mb, pipe.P)
    -- (opts.memory per device: its stages hold it together)
    opts.score = require('lunet.parallel.step_sim').looped_score(steps, S, pipe.P)
    if opts.memory then opts.memory = { unpack(opts.memory, 1, pipe.P) } end
    counts = require('lunet.parallel.partition').split_looped(costs, S, pipe.P, opts)
  else
    counts = split(costs, S, opts)
    local mb = math.ceil(B / pipe.replicas / Mb)
    counts = M.refine(list, counts, sample:narrow(1, 1, math.min(mb, B)), at, costs, opts)
  end
  return counts, { costs = costs, opts = opts, micro = Mb }
end

-- The profile's split checked by measurement: each cut moved by one atom
-- either way (where the stages still fit their memory), and every stage of
-- each of these splits run as the stage will run it (its atoms in one
-- chain, fused as in the model: the profile timed each atom alone) for a
-- micro-batch's forward and backward on the device the atoms are on; the
-- split whose slowest stage, at the devices' speeds, is fastest (the
-- profile's unless a neighbour is REFINE_MARGIN faster), and again from
-- that one while a neighbour is REFINE_MARGIN faster. x: a
-- micro-batch of the sample; time_of(lo, hi): seconds of atoms lo..hi as a
-- stage (given: instead of running them, for the specs).
-- each stage run at least REFINE_RUNS times, short ones until REFINE_SECONDS
-- (at most 5 times that many runs); a neighbour must be REFINE_MARGIN faster
-- than the profile's split: within that, the runs' noise would decide
local REFINE_RUNS, REFINE_SECONDS, REFINE_MARGIN = 5, 0.02, 0.1
function M.refine(list, counts, x, at, costs, opts, time_of)
  local S, n = #counts, #list
  if S < 2 or n <= S then return counts end
  local evaluate = require('lunet.parallel.partition').evaluate
  local Sequential = require 'lunet.nn.Sequential'
  -- (BatchNorm's running statistics and the random state are put back after)
  local saved, seed, offset = {}, lunet.rng_state()
  for i = 1, n do
    saved[i] = {}
    for k, b in ipairs(list[i].module:buffers()) do saved[i][k] = b:clone() end
  end
  local inputs = {}   -- the input of every atom at the micro-batch (inputs[i]: atom i's)
  local cache = {}
  local function stage_time(lo, hi)
    local key = lo * (n + 1) + hi
    if cache[key] then return cache[key] end
    if time_of then cache[key] = time_of(lo, hi); return cache[key] end
    local seq = Sequential()
    for i = lo, hi do seq:add(list[i].module) end
    local inp = inputs[lo]:detach()
    if lo > 1 and inp:is_floating_point() then inp:requires_grad_(true) end
    local ts, spent, r = {}, 0, -1
    while r < REFINE_RUNS or (spent < REFINE_SECONDS and r < 5 * REFINE_RUNS) do
      r = r + 1
      lunet.synchronize(at)
      local t0 = lunet.clock()
      local y = seq(inp)
      if y.requires_grad then y:backward(lunet.ones(y:size(), { dtype = y.dtype, device = y.device })) end
      lunet.synchronize(at)
      if r > 0 then ts[r] = lunet.clock() - t0; spent = spent + ts[r] end   -- (run 0 warms up)
    end
    for i = lo, hi do
      for _, p in ipairs(list[i].module:parameters()) do p.grad = nil end
    end
    cache[key] = median(ts)
    return cache[key]
  end
  local function slowest(c)
    if opts.memory then   -- (a split whose stages do not fit is not a candidate)
      local _, mems = evaluate(costs, c, opts)
      for j = 1, S do if mems[j] > (opts.memory[j] or math.huge) then return math.huge end end
    end
    local worst, lo = 0, 1
    for j = 1, S do
      local hi = lo + c[j] - 1
      worst = math.max(worst, stage_time(lo, hi) / (opts.speed[j] or 1))
      lo = hi + 1
    end
    return worst
  end
  local function search()
    if not time_of then lunet.no_grad(function()
      local y = x:to(at)
      for i = 1, n do
        inputs[i] = y
        y = list[i].module(y)
      end
    end) end
    -- (the fastest neighbour that beats the split by the margin, and on from
    -- there: a profile off by two atoms is walked back; each step must gain
    -- the margin, so there are few)
    local best, best_t = counts, slowest(counts)
    for _ = 1, n do
      local next_c, next_t
      for j = 1, S - 1 do   -- the cut after stage j, one atom earlier or later
        for _, d in ipairs({ -1, 1 }) do
          local c = { unpack(best) }
          c[j], c[j + 1] = c[j] + d, c[j + 1] - d
          if c[j] >= 1 and c[j + 1] >= 1 then
            local t = slowest(c)
            if t < best_t * (1 - REFINE_MARGIN) and (not next_t or t < next_t) then next_c, next_t = c, t end
          end
        end
      end
      if not next_c then break end
      best, best_t = next_c, next_t
    end
    return best
  end
  local ok, best = pcall(search)
  lunet.no_grad(function()
    for i = 1, n do
      for k, b in ipairs(list[i].module:buffers()) do b:copy_(saved[i][k]) end
      for _, p in ipairs(list[i].module:parameters()) do p.grad = nil end
    end
  end)
  lunet.set_rng_state(seed, offset)
  if not ok then error(best, 0) end
  return best
end

-- the cut again from measured seconds a micro-batch per stage: each stage's
-- atoms' profiled times scaled so that they add up to what it measured (and
-- its device's speed taken out), then split again
function M.remeasured(pipe, measured)
  local info = pipe.measure
  local split = require('lunet.parallel.partition')
  local raw = split.evaluate(info.costs, pipe.counts)   -- (no speed: the profile's own times)
  local costs, i = {}, 0
  for s = 1, pipe.S do
    local f = measured[s] / math.max(raw[s], 1e-12) * (info.opts.speed[s] or 1)
    for _ = 1, pipe.counts[s] do
      i = i + 1
      local c = info.costs[i]
      costs[i] = { time = c.time * f, memory = c.memory, act = c.act, name = c.name }
    end
  end
  info.costs, info.measured = costs, measured
  if pipe.S > (pipe.P or pipe.S) then return split.split_looped(costs, pipe.S, pipe.P, info.opts) end
  return split.split(costs, pipe.S, info.opts)
end

-- pipe:balance_report(): per stage its atoms, predicted time per micro-batch
-- (forward and backward), memory, and the schedule's bubble
function M.report(pipe)
  local S, counts = pipe.S, pipe.counts
  if pipe.timing then pipe.timing:collect() end
  local lines = {}
  local bal = is_table(pipe.balance) and 'a list' or pipe.balance or 'time'
  local M_ = pipe.measure and pipe.measure.micro or pipe.chunks
  -- (P devices of v = S / P stages each: the interleaved schedule's; else v = 1)
  local P = pipe.P or S
  local where = P < S and ('%d stages on %d devices'):format(S, P) or ('%d stage%s'):format(S, S == 1 and '' or 's')
  local bubble = ('%.0f%% ((p - 1) / (%sm + p - 1))'):format(100 * (P - 1) / (S / P * M_ + P - 1), P < S and 'v ' or '')
  if pipe.kind == 'zb' then
    -- (its steps' idle share, F, B and W alike: a third of 1F1B's for two stages)
    local steps = pipe:_plan(M_).steps
    bubble = ('%.0f%% (idle steps, F, B and W alike)'):format(100 * (1 - 3 * M_ / #steps))
  end
  lines[1] = ('Pipeline: %s, balance %s, %s, %d micro-batch%s: bubble %s')
    :format(where, bal, type(pipe.kind) == 'string' and pipe.kind or 'custom', M_, M_ == 1 and '' or 'es', bubble)
  local times, mems
  if pipe.measure then
    times, mems = require('lunet.parallel.partition').evaluate(pipe.measure.costs, counts, pipe.measure.opts)
  end
  local fmt = require('lunet.parallel.partition').fmt_bytes
  local first = 1
  for s = 1, S do
    local names = pipe.atom_names
    local last = first + counts[s] - 1
    local l = ('  stage %d on %s: atoms %s..%s (%d)'):format(s, pipe.stage_devices[s], names[first], names[last], counts[s])
    if times then l = l .. (': %.2f ms a micro-batch, %s'):format(times[s] * 1e3, fmt(mems[s])) end
    local got = pipe.timing and pipe.timing:per_micro()
    if got then l = l .. ('; measured in training %.2f ms'):format(got[s] * 1e3) end
    lines[#lines + 1] = l
    first = last + 1
  end
  if not times then lines[#lines + 1] = '  (not measured: balance by time or memory profiles the atoms)' end
  return table.concat(lines, '\n')
end

return M
