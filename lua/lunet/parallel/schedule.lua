-- lunet.parallel.schedule: a pipeline's schedule as data, checked before it runs.
--
-- A schedule is a list of time steps; a step is a list of actions
-- {stage, micro_batch, 'F' | 'B' | 'W'}, at most one per stage. Within a step the
-- stages run at once (the host queues each action's work on its stage's
-- device and goes on), so an action may only use what an earlier step made:
--   F(s, m) needs F(s - 1, m);  B(s, m) needs F(s, m) and B(s + 1, m);
--   W(s, m) needs B(s, m).
-- B is the whole backward, or with W actions (zero-bubble) only the input's
-- gradient, W the weights' (a schedule has a W for every B or none).
--   schedule.build('gpipe' | '1f1b' | 'interleaved' | 'zb', stages, chunks[, devices])
--     -> steps (checked)
--   schedule.make(kind or function (stages, chunks) -> steps, stages, chunks[, devices])
--     -> steps (built, or the function's checked)
--   schedule.check(steps, stages, chunks) -> steps, or an error naming the
--     first action that runs before what it needs (a deadlock: it would wait
--     for ever), a missing or repeated action, or a malformed entry
--   schedule.slots(steps, stages, chunks[, spare]) -> slot[s][m], nslots[s]:
--     which stage-boundary buffer micro-batch m uses at stage s (taken when
--     its input is sent, free again once B(s, m), or W(s, m), has run), so buffers are
--     reused; spare: that many more per stage, reused oldest first
--   schedule.text(steps, stages[, where]) -> a timeline, one line per stage
--     (where[s]: its device, named after it)
--   schedule.split(steps) -> whether it has W actions; schedule.held(kind,
--     stages, chunks) -> the micro-batches each stage holds at most;
--     schedule.actions(kind) -> actions a micro-batch at a stage (2, or 3)
-- Per-stage orders: GPipe runs every forward, then every backward; 1F1B
-- (PipeDream-flush) runs stages - s + 1 forwards, then alternates one
-- backward and one forward, so stage s holds at most stages - s + 1
-- micro-batches' activations instead of all of them.
-- Interleaved 1F1B (Megatron-LM's virtual stages): each of the devices runs
-- stages/devices stages spread along the model (stage s on device
-- (s - 1) % devices + 1), taking micro-batches in groups of `devices`
-- through its stages in turn; the bubble shrinks by the stages a device
-- holds, for as many more boundary copies and actions. A device's order
-- runs (devices - d) * 2 + (stages - devices) + 1 forwards, then alternates
-- one backward and one forward; where the last group is longer and that
-- order would deadlock, a device runs more forwards first.
-- Zero-bubble (ZB-H1, Qi et al. 2023): the backward split in two, B (the
-- input's gradient, which the stage before waits for) and W (the weights',
-- which nothing waits for); each step every stage runs a B if one is ready,
-- else a forward if it holds fewer than `stages` micro-batches (a micro-batch
-- is held from its F to its W: 1F1B's first stage's count, on every stage),
-- else its oldest pending W. The W's fill the cool-down's bubble: about a
-- third of 1F1B's when F, B and W take alike.
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local schedule = {}

local function fail(msg, lvl) error('schedule: ' .. msg, (lvl or 1) + 1) end

local function order_gpipe(s, S, M)
  local o = {}
  for m = 1, M do o[#o + 1] = { s, m, 'F' } end
  for m = 1, M do o[#o + 1] = { s, m, 'B' } end
  return o
end

local function order_1f1b(s, S, M)
  local o, f, b = {}, 0, 0
  local warm = math.min(S - s + 1, M)
  while f < warm do f = f + 1; o[#o + 1] = { s, f, 'F' } end
  while b < M do
    b = b + 1; o[#o + 1] = { s, b, 'B' }
    if f < M then f = f + 1; o[#o + 1] = { s, f, 'F' } end
  end
  return o
end

local orders = { gpipe = order_gpipe, ['1f1b'] = order_1f1b }
schedule.kinds = { 'gpipe', '1f1b', 'interleaved', 'zb' }

-- the actions in words (errors name them)
schedule.ACTION = { F = 'forward', B = 'backward', W = 'weight gradient' }
local KIND = { F = 0, B = 1, W = 2 }
local function key_of(s, m, k, S) return KIND[k] + 3 * (m * (S + 2) + s) end

-- what action k of micro-batch m at stage s needs (the rules above)
local function needs(s, m, k, S)
  if k == 'F' then return s > 1 and { { s - 1, m, 'F' } } or {} end
  if k == 'W' then return { { s, m, 'B' } } end
  return s < S and { { s, m, 'F' }, { s + 1, m, 'B' } } or { { s, m, 'F' } }
end
local function needs_met(done, s, m, k, S)
  for _, d in ipairs(needs(s, m, k, S)) do
    if not done[key_of(d[1], d[2], d[3], S)] then return false end
  end
  return true
end

-- micro-batches each stage holds at most (from its F to its last backward
-- action): GPipe all, 1F1B S - s + 1, zero-bubble S (until its W); a
-- schedule given as a function is taken as 1F1B
function schedule.held(kind, S, M)
  local h = {}
  for s = 1, S do h[s] = kind == 'gpipe' and M or math.min(M, kind == 'zb' and S or S - s + 1) end
  return h
end
-- actions a micro-batch at each stage: F and B, and zero-bubble's W
function schedule.actions(kind) return kind == 'zb' and 3 or 2 end

-- each lane (a stage, or a device running several) runs its order; at each
-- step, every lane whose next action's inputs were made in an earlier step
-- runs it. nil when the orders deadlock.
local function simulate(per_lane, S)
  local steps, done, pos, left = {}, {}, {}, 0
  for l = 1, #per_lane do pos[l] = 1; left = left + #per_lane[l] end
  while left > 0 do
    local step, lanes = {}, {}
    for l = 1, #per_lane do
      local a = per_lane[l][pos[l]]
      if a then
        if needs_met(done, a[1], a[2], a[3], S) then step[#step + 1], lanes[#lanes + 1] = a, l end
      end
    end
    if #step == 0 then return nil end
    for i, a in ipairs(step) do
      done[key_of(a[1], a[2], a[3], S)] = true
      pos[lanes[i]] = pos[lanes[i]] + 1
      left = left - 1
    end
    steps[#steps + 1] = step
  end
  return steps
end

-- device d's order of the interleaved schedule (P devices, V stages each,
-- M micro-batches), the first `warm` of its V * M forwards before any backward
local function order_interleaved(d, P, V, M, warm)
  local fs, bs = {}, {}
  -- (groups of P micro-batches, the last one with the rest: a short group
  -- of its own would run through the stages alone)
  local groups = math.max(1, math.floor(M / P))
  for g = 1, groups do
    local g0 = (g - 1) * P
    local q = g < groups and P or M - g0
    for c = 0, V - 1 do
      for i = 1, q do fs[#fs + 1] = { c * P + d, g0 + i, 'F' } end
    end
    for c = V - 1, 0, -1 do
      for i = 1, q do bs[#bs + 1] = { c * P + d, g0 + i, 'B' } end
    end
  end
  local o, f = {}, 0
  warm = math.min(warm, #fs)
  while f < warm do f = f + 1; o[#o + 1] = fs[f] end
  for b = 1, #bs do
    o[#o + 1] = bs[b]
    if f < #fs then f = f + 1; o[#o + 1] = fs[f] end
  end
  return o
end

local function build_interleaved(S, M, P)
  if type(P) ~= 'number' or P % 1 ~= 0 or P < 2 or S % P ~= 0 or S == P then
    fail(('the interleaved schedule needs stages (%d) a multiple >= 2 of devices >= 2 (got %s)')
      :format(S, tostring(P)), 3)
  end
  local V = S / P
  for extra = 0, S * M do
    local per = {}
    for d = 1, P do per[d] = order_interleaved(d, P, V, M, (P - d) * 2 + (V - 1) * P + 1 + extra) end
    local steps = simulate(per, S)
    if steps then return steps end
  end
  fail('the interleaved orders deadlock', 3)   -- (all forwards first cannot: not reached)
end

-- ZB-H1 (see above), step by step: each stage's choice among what earlier steps made ready
local function build_zb(S, M)
  local done, steps = {}, {}
  local nf, nb, nw = {}, {}, {}
  for s = 1, S do nf[s], nb[s], nw[s] = 0, 0, 0 end
  local left = 3 * S * M
  while left > 0 do
    local step = {}
    for s = 1, S do
      local b, f, w = nb[s] + 1, nf[s] + 1, nw[s] + 1
      if b <= M and needs_met(done, s, b, 'B', S) then step[#step + 1] = { s, b, 'B' }; nb[s] = b
      elseif f <= M and nf[s] - nw[s] < S and needs_met(done, s, f, 'F', S) then step[#step + 1] = { s, f, 'F' }; nf[s] = f
      elseif w <= nb[s] then step[#step + 1] = { s, w, 'W' }; nw[s] = w end
    end
    if #step == 0 then fail('the zero-bubble steps deadlock', 3) end   -- (not reached: a B or W is always ready)
    for _, a in ipairs(step) do done[key_of(a[1], a[2], a[3], S)] = true end
    left = left - #step
    steps[#steps + 1] = step
  end
  return steps
end

local function count(v, what, lvl)
  if type(v) ~= 'number' or v % 1 ~= 0 or v < 1 then
    fail(('%s must be an integer >= 1, got %s'):format(what, tostring(v)), lvl + 1)
  end
end

function schedule.build(kind, S, M, P)
  count(S, 'stages', 2); count(M, 'chunks', 2)
  if kind == 'interleaved' then return schedule.check(build_interleaved(S, M, P), S, M) end
  if kind == 'zb' then return schedule.check(build_zb(S, M), S, M) end
  local order = orders[kind]
  if not order then fail(("unknown schedule '%s' (gpipe, 1f1b, interleaved, zb)"):format(tostring(kind)), 2) end
  local per = {}
  for s = 1, S do per[s] = order(s, S, M) end
  local steps = simulate(per, S)
  if not steps then fail('the per-stage orders deadlock', 2) end
  return schedule.check(steps, S, M)
end

-- a pipeline's schedule option: a kind ('gpipe', '1f1b'), built; or a
-- function (stages, chunks) -> steps, called and checked. Errors (raised
-- with no position: the caller says whose) name what is wrong.
function schedule.make(kind, S, M, P)
  local function strip(e) return (tostring(e):gsub('^[^:\n]*:%d+: ', '', 1)) end
  if type(kind) ~= 'function' then
    local ok, steps = pcall(schedule.build, kind, S, M, P)
    if not ok then error(strip(steps), 0) end
    return steps
  end
  local ok, st = pcall(kind, S, M)
  if not ok then error('schedule: ' .. tostring(st), 0) end
  local ok2, err = pcall(schedule.check, st, S, M)
  if not ok2 then error(strip(err), 0) end
  return st
end

local function name(a) return ('%s(stage %d, micro-batch %d)'):format(a[3], a[1], a[2]) end

function schedule.check(steps, S, M)
  count(S, 'stages', 2); count(M, 'chunks', 2)
  if not is_table(steps) then fail('expected a list of steps, got ' .. typename(steps), 2) end
  local at = {}   -- at[key] = the step an action runs in
  local split = false   -- (W actions: then one for every B)
  local function key(s, m, k) return ('%d/%d/%s'):format(s, m, k) end
  for t, step in ipairs(steps) do
    if not is_table(step) then fail(('step %d must be a list of actions, got %s'):format(t, typename(step)), 2) end
    local busy = {}
    for _, a in ipairs(step) do
      if not is_table(a) or type(a[1]) ~= 'number' or type(a[2]) ~= 'number' or not KIND[a[3]] then
        fail(('step %d: an action must be {stage, micro_batch, \'F\' | \'B\' | \'W\'}'):format(t), 2)
      end
      if a[3] == 'W' then split = true end
      local s, m = a[1], a[2]
      if s % 1 ~= 0 or s < 1 or s > S then fail(('step %d: stage %s is not in 1..%d'):format(t, tostring(s), S), 2) end
      if m % 1 ~= 0 or m < 1 or m > M then fail(('step %d: micro-batch %s is not in 1..%d'):format(t, tostring(m), M), 2) end
      if busy[s] then fail(('step %d: stage %d runs two actions'):format(t, s), 2) end
      busy[s] = true
      local k = key(s, m, a[3])
      if at[k] then fail(('%s runs twice (steps %d and %d)'):format(name(a), at[k], t), 2) end
      at[k] = t
    end
  end
  for s = 1, S do
    for m = 1, M do
      for _, kd in ipairs(split and { 'F', 'B', 'W' } or { 'F', 'B' }) do
        if not at[key(s, m, kd)] then fail(('%s never runs'):format(name({ s, m, kd })), 2) end
      end
    end
  end
  -- every action after what it needs (an action waiting on a later one would wait for ever)
  for t, step in ipairs(steps) do
    for _, a in ipairs(step) do
      local s, m = a[1], a[2]
      for _, d in ipairs(needs(s, m, a[3], S)) do
        local td = at[key(d[1], d[2], d[3])]
        if td >= t then
          fail(('deadlock: %s at step %d needs %s, which runs at step %d'):format(name(a), t, name(d), td), 2)
        end
      end
    end
  end
  return steps
end

-- whether the schedule splits the backward (has W actions)
function schedule.split(steps)
  for _, step in ipairs(steps) do
    for _, a in ipairs(step) do if a[3] == 'W' then return true end end
  end
  return false
end

-- stage s's buffers for micro-batch m are taken when its input arrives (at
-- F(s - 1, m), or F(1, m) for the first stage) and free after B(s, m) (or
-- W(s, m): the weights' gradient reads the input and the output's gradient)
local function each_take_free(steps, S, take, give)
  local last = schedule.split(steps) and 'W' or 'B'
  for _, step in ipairs(steps) do
    for _, a in ipairs(step) do
      local s, m = a[1], a[2]
      if a[3] == 'F' then
        if s == 1 then take(1, m) end
        if s < S then take(s + 1, m) end
      elseif a[3] == last then give(s, m) end
    end
  end
end

function schedule.slots(steps, S, M, spare)
  local slot, nslots, free = {}, {}, {}
  for s = 1, S do slot[s], nslots[s], free[s] = {}, 0, {} end
  -- the fewest buffers: a freed one is the next one taken
  each_take_free(steps, S, function(s, m)
    local f = free[s]
    local k = f[#f]
    if k then f[#f] = nil else nslots[s] = nslots[s] + 1; k = nslots[s] end
    slot[s][m] = k
  end, function(s, m) local f = free[s]; f[#f + 1] = slot[s][m] end)
  if not spare or spare == 0 then return slot, nslots end
  -- spare more buffers per stage (at most one per micro-batch), taken oldest
  -- freed first: the buffer a micro-batch takes was freed spare backwards
  -- before, which the host then rarely waits for
  local head, tail = {}, {}
  for s = 1, S do
    nslots[s] = math.min(nslots[s] + spare, M)
    free[s], head[s], tail[s] = {}, 1, nslots[s]
    for k = 1, nslots[s] do free[s][k] = k end
  end
  each_take_free(steps, S, function(s, m)
    slot[s][m] = free[s][head[s]]
    free[s][head[s]] = nil
    head[s] = head[s] + 1
  end, function(s, m)
    tail[s] = tail[s] + 1
    free[s][tail[s]] = slot[s][m]
  end)
  return slot, nslots
end

function schedule.text(steps, S, where)
  local rows, w, lw = {}, 2, 0
  for _, step in ipairs(steps) do
    for _, a in ipairs(step) do w = math.max(w, #tostring(a[2]) + 1) end
  end
  for s = 1, S do
    rows[s] = { where and ('stage %d (%s)'):format(s, where[s]) or ('stage %d'):format(s) }
    lw = math.max(lw, #rows[s][1])
  end
  for s = 1, S do rows[s][1] = ('%-' .. lw .. 's |'):format(rows[s][1]) end
  for _, step in ipairs(steps) do
    local cell = {}
    for _, a in ipairs(step) do cell[a[1]] = a[3] .. a[2] end
    for s = 1, S do rows[s][#rows[s] + 1] = ('%-' .. w .. 's'):format(cell[s] or '.') end
  end
  local out = {}
  for s = 1, S do out[s] = table.concat(rows[s], ' ') end
  return table.concat(out, '\n')
end

return schedule
