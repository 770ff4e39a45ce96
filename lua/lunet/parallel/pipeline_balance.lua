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
-- within each device's memory limit ('memory': so that the largest stage's
-- memory is the least possible). A stage's memory counts its parameters
-- five times (gradients, Adam's two moments, a micro-batch's fresh gradient
-- before it is added in) and its activations once per micro-batch its
-- schedule keeps in flight.
local M = {}
local lunet = require 'lunet'

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
  if type(balance) == 'table' then
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
  local speed, mem, inflight, top = {}, {}, {}, 0
  for j = 1, S do top = math.max(top, lunet.get_num_threads(devs[j])) end
  for j = 1, S do
    speed[j] = lunet.get_num_threads(devs[j]) / top
    local lim = lunet.memory_limit(devs[j])
    mem[j] = lim > 0 and lim or nil
    inflight[j] = pipe.kind == 'gpipe' and Mb or math.min(S - j + 1, Mb)
  end
  local opts = { speed = speed, memory = #mem == S and mem or nil, inflight = inflight }
  local split = require('lunet.parallel.partition').split
  local counts
  if kind == 'memory' then
    local mc = {}
    for i, c in ipairs(costs) do mc[i] = { time = c.memory + c.act * Mb, memory = c.memory, act = c.act } end
    counts = split(mc, S, { memory = opts.memory, inflight = inflight })
  else counts = split(costs, S, opts) end
  return counts, { costs = costs, opts = opts, micro = Mb }
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
  return split.split(costs, pipe.S, info.opts)
end

-- pipe:balance_report(): per stage its atoms, predicted time per micro-batch
-- (forward and backward), memory, and the schedule's bubble
function M.report(pipe)
  local S, counts = pipe.S, pipe.counts
  if pipe.timing then pipe.timing:collect() end
  local lines = {}
  local bal = type(pipe.balance) == 'table' and 'a list' or pipe.balance or 'time'
  local M_ = pipe.measure and pipe.measure.micro or pipe.chunks
  lines[1] = ('Pipeline: %d stage%s, balance %s, %s, %d micro-batch%s: bubble %.0f%% ((p - 1) / (m + p - 1))')
    :format(S, S == 1 and '' or 's', bal, type(pipe.kind) == 'string' and pipe.kind or 'custom', M_,
      M_ == 1 and '' or 'es', 100 * (S - 1) / (M_ + S - 1))
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
