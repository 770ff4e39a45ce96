-- lunet.parallel.partition: contiguous stages of a list of atoms.
--
--   partition.split(costs, nstages, {speed = {...}, memory = {...}, inflight = {...}})
--     --> {n1, n2, ...}: how many atoms each stage gets (in order, each >= 1)
--   partition.split_looped(costs, nstages, ndevices, {..., score = fn}) --> the
--     same for stages looping over the devices (the interleaved schedule)
--
-- costs[i] is atom i's time (a number), or a table {time = s, memory = bytes,
-- act = bytes}: memory is what the atom holds whatever the schedule
-- (parameters, gradients, optimizer state), act what it keeps per micro-batch
-- in flight. Stage j runs on a device of relative speed speed[j] (default 1)
-- holding memory[j] bytes (default unlimited) with inflight[j] micro-batches
-- alive at once (default 1; 1F1B: p - j + 1, GPipe: the chunk count), so its
-- time is sum(time) / speed[j] and its memory sum(memory) + inflight[j] *
-- sum(act). The split minimises the slowest stage's time among those that fit
-- every device; exact, by dynamic programming over (stage, atoms so far):
-- O(nstages * n^2). Among splits with the same slowest stage, the one whose
-- stage times add up least (then the first found) wins.
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local partition = {}

local function fail(msg, lvl) error('partition.split: ' .. msg, (lvl or 1) + 1) end

local function fmt_bytes(b)
  if b >= 2 ^ 30 then return ('%.2f GB'):format(b / 2 ^ 30) end
  if b >= 2 ^ 20 then return ('%.1f MB'):format(b / 2 ^ 20) end
  if b >= 2 ^ 10 then return ('%.1f KB'):format(b / 2 ^ 10) end
  return ('%d B'):format(b)
end
partition.fmt_bytes = fmt_bytes

-- a per-stage option: nil (the default for all), a number (the same for all)
-- or a list of nstages positive numbers
local function per_stage(v, p, what, default)
  local out = {}
  if v == nil or type(v) == 'number' then
    local x = v == nil and default or v
    if not (x > 0) then fail(('%s must be > 0, got %s'):format(what, tostring(x)), 3) end
    for j = 1, p do out[j] = x end
    return out
  end
  if not is_table(v) then fail(('%s must be a number or a list of %d numbers, got %s'):format(what, p, typename(v)), 3) end
  if #v ~= p then fail(('%s has %d entries for %d stages'):format(what, #v, p), 3) end
  for j = 1, p do
    if type(v[j]) ~= 'number' or not (v[j] > 0) then
      fail(('%s[%d] must be a positive number, got %s'):format(what, j, tostring(v[j])), 3)
    end
    out[j] = v[j]
  end
  return out
end

function partition.split(costs, nstages, opts)
  opts = opts or {}
  if not is_table(costs) or #costs == 0 then fail('costs must be a non-empty list, got ' .. typename(costs), 2) end
  local n = #costs
  if type(nstages) ~= 'number' or nstages < 1 or nstages % 1 ~= 0 then
    fail('the stage count must be an integer >= 1, got ' .. tostring(nstages), 2)
  end
  if nstages > n then fail(('%d stages for %d atoms: each stage needs at least one'):format(nstages, n), 2) end
  if not is_table(opts) then fail('options must be a table, got ' .. typename(opts), 2) end
  local p = nstages
  local speed = per_stage(opts.speed, p, 'speed', 1)
  local memory = per_stage(opts.memory, p, 'memory', math.huge)
  local inflight = per_stage(opts.inflight, p, 'inflight', 1)
  -- prefix sums of time, fixed memory and activation memory
  local T, M, A = { [0] = 0 }, { [0] = 0 }, { [0] = 0 }
  for i = 1, n do
    local c = costs[i]
    local t, m, a
    if type(c) == 'number' then t, m, a = c, 0, 0
    elseif is_table(c) then t, m, a = c.time, c.memory or 0, c.act or 0
    else fail(('costs[%d] must be a number or a table {time, memory, act}, got %s'):format(i, typename(c)), 2) end
    for _, v in ipairs({ { t, 'time' }, { m, 'memory' }, { a, 'act' } }) do
      if type(v[1]) ~= 'number' or v[1] < 0 or v[1] ~= v[1] or v[1] == math.huge then
        fail(('costs[%d].%s must be a number >= 0, got %s'):format(i, v[2], tostring(v[1])), 2)
      end
    end
    T[i], M[i], A[i] = T[i - 1] + t, M[i - 1] + m, A[i - 1] + a
  end
  local function stage_mem(j, a, b) return M[b] - M[a] + inflight[j] * (A[b] - A[a]) end
  -- best[j][i]: {slowest, total, prev} for the first i atoms in j stages
  local best = { [0] = { [0] = { 0, 0 } } }
  for j = 1, p do
    local row = {}
    best[j] = row
    for i = j, n - (p - j) do
      local cand
      for k = j - 1, i - 1 do
        local b = best[j - 1][k]
        if b and stage_mem(j, k, i) <= memory[j] then
          local t = (T[i] - T[k]) / speed[j]
          local slow, total = math.max(b[1], t), b[2] + t
          if not cand or slow < cand[1] or (slow == cand[1] and total < cand[2]) then cand = { slow, total, k } end
        end
      end
      row[i] = cand
    end
  end
  if not best[p][n] then
    -- say why: an atom too big for every device, or the devices too small together
    local big = 1   -- the device holding the most
    for j = 2, p do if memory[j] > memory[big] then big = j end end
    for i = 1, n do
      local fits = false
      for j = 1, p do if M[i] - M[i - 1] + inflight[j] * (A[i] - A[i - 1]) <= memory[j] then fits = true end end
      if not fits then
        local need = M[i] - M[i - 1] + inflight[big] * (A[i] - A[i - 1])
        fail(('atom %d alone needs %s (%d micro-batch%s in flight), more than any of the %d devices holds (the most: %s)')
          :format(i, fmt_bytes(need), inflight[big], inflight[big] == 1 and '' or 'es', p, fmt_bytes(memory[big])), 2)
      end
    end
    local total = 0
    for j = 1, p do total = total + memory[j] end
    fail(('no split of %d atoms into %d stages fits the devices\' memory (the atoms need %s with one micro-batch '
      .. 'in flight, the devices hold %s together)'):format(n, p, fmt_bytes(M[n] + A[n]), fmt_bytes(total)), 2)
  end
  local counts, i = {}, n
  for j = p, 1, -1 do
    local k = best[j][i][3]
    counts[j] = i - k
    i = k
  end
  return counts, best[p][n][1]
end

-- partition.split_looped(costs, nstages, ndevices, opts) --> counts: stages
-- that loop over the devices (stage j on device (j - 1) % ndevices + 1, the
-- interleaved schedule), where a device's time is the sum of its stages' and
-- the slowest stage alone says little. opts: speed and inflight per stage as
-- split's, memory per device (what its stages hold together), and
-- score(times) -> seconds (a step with the stages' times: e.g. the schedule
-- played out), which the split minimises among those that fit: over every
-- split when there are at most LOOPED_ALL of them, else from split's by
-- moving one cut at a time while the score improves.
local LOOPED_ALL = 3000
function partition.split_looped(costs, nstages, ndevices, opts)
  local score = opts.score
  if type(score) ~= 'function' then fail('split_looped: opts.score must be a function (times) -> seconds', 2) end
  local n, p, P = #costs, nstages, ndevices
  local memory = per_stage(opts.memory, P, 'memory', math.huge)
  -- (a start: no stage may hold more than its device)
  local per = {}
  for j = 1, p do per[j] = memory[(j - 1) % P + 1] end
  local ok, counts = pcall(partition.split, costs, p, { speed = opts.speed, inflight = opts.inflight, memory = per })
  if not ok then error(counts, 2) end
  local held = {}
  local function value(c)
    local times, mems = partition.evaluate(costs, c, opts)
    for d = 1, P do held[d] = 0 end
    for j = 1, p do local d = (j - 1) % P + 1; held[d] = held[d] + mems[j] end
    for d = 1, P do if held[d] > memory[d] then return math.huge end end
    return score(times)
  end
  local best, best_v = counts, value(counts)
  local ways = 1   -- C(n - 1, p - 1): the splits
  for k = 1, p - 1 do ways = ways * (n - k) / k end
  if ways <= LOOPED_ALL then
    local c = {}
    local function each(j, left)
      if j == p then
        c[p] = left
        local v = value(c)
        if v < best_v then best, best_v = { unpack(c) }, v end
        return
      end
      for k = 1, left - (p - j) do c[j] = k; each(j + 1, left - k) end
    end
    each(1, n)
  else
    local better = true
    while better do
      better = false
      for j = 1, p - 1 do
        for _, d in ipairs({ -1, 1 }) do
          local c = { unpack(best) }
          c[j], c[j + 1] = c[j] + d, c[j + 1] - d
          if c[j] >= 1 and c[j + 1] >= 1 then
            local v = value(c)
            if v < best_v then best, best_v, better = c, v, true end
          end
        end
      end
    end
  end
  if best_v == math.huge then
    fail(('no split of %d atoms into %d stages on %d devices fits the devices\' memory'):format(n, p, P), 2)
  end
  return best
end

-- the stages' times (speed-scaled) and memory for a given split, as split counts them
function partition.evaluate(costs, counts, opts)
  opts = opts or {}
  local p = #counts
  local speed = per_stage(opts.speed, p, 'speed', 1)
  local inflight = per_stage(opts.inflight, p, 'inflight', 1)
  local times, mems, i = {}, {}, 0
  for j = 1, p do
    local t, m, a = 0, 0, 0
    for _ = 1, counts[j] do
      i = i + 1
      local c = costs[i]
      if type(c) == 'number' then t = t + c
      else t, m, a = t + c.time, m + (c.memory or 0), a + (c.act or 0) end
    end
    times[j], mems[j] = t / speed[j], m + inflight[j] * a
  end
  return times, mems
end

return partition
