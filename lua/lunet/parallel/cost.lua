-- lunet.parallel.cost: the planner's cost model. From a layer profile (per
-- atom: forward and backward seconds, activation, parameter and output bytes
-- at the profiled batch; profile.lua) and the links' latency alpha (s) and
-- inverse bandwidth beta (s/byte), predicts a training step's time, each
-- device's memory and the bytes on the wire of a strategy.
--
--   local cm = cost.new(atoms, {link = {copy = {alpha =, beta =}, allreduce = {alpha =, beta =}},
--     speed = {1, 1}, memory = {2^30, 2^30}, optimizer = 'adam', threads = {1, 1}, cores = 2})
--   cm:data_parallel(n, batch, accumulate)        --> candidate
--   cm:pipeline(stages, replicas, batch, chunks, 'gpipe' | '1f1b' | 'interleaved' | 'zb')  --> candidate
--     (stages: devices a replica; interleaved: INTERLEAVE stages each)
--
-- The host queues all of it: a step is at least the profile's host time
-- (queuing one forward and backward of the model) times the micro-batches
-- and replicas it runs; where the host thread shares the devices' cores
-- (virtual CPU devices using them all) that time is the cores' work too. The optimizer's step (the profile's update, seconds
-- for all parameters) adds to each device's time in the share of the
-- parameters it holds.
-- Time of atom i at batch b: fwd0 + (fwd - fwd0) * b / batch (fwd0 the fixed
-- part of a call, 0 if unknown; the same for bwd and for the transient
-- temp_bytes with temp0), scaled so that the atoms add up to the measured
-- whole-chain time at b (list.whole, see cost:calib); activation and output
-- bytes grow with b. A device of speed s runs it in time / s. Devices that
-- share cores (virtual CPU devices: threads per device and cores given, or
-- together measured by profile.together) bound the summed busy time of a
-- step (cost:capacity).
-- A pipeline's machinery (link.pipeline, profile.pipeline_overhead: per
-- stage action and per step; a hybrid's link.pipeline.hybrid) is host time as well.
-- All-reduce of S bytes over n devices (a ring): 2(n-1)/n * S * beta +
-- 2(n-1) * alpha; a copy between two devices: alpha + S * beta (between
-- devices whose cores make it, their work but for half of alpha, a delay).
-- Memory of a device: parameters, gradients and optimizer state (Adam 2
-- copies of the parameters, momentum 1, SGD 0) of what it holds, plus the
-- activations alive at once (data parallel: one micro-batch; a pipeline
-- stage j of p: GPipe all m micro-batches, 1F1B min(m, p - j + 1)), plus
-- the input batch (or the stage's boundary buffers), plus the most
-- transient memory one of its atoms takes (temp_bytes: workspaces); the
-- activations twice (those of the step before may await Lua's collector).
-- A candidate fits when every device's need is at most headroom (0.9) times
-- what it holds.
-- A pipeline's stage past half its device's memory makes the host wait for
-- its previous backward before queuing more (Stage.lua): the host's queueing
-- then adds to the step instead of overlapping it.
-- Tensors are freed when Lua collects their handles: a step also pays the
-- full collections its churn (the bytes its work leaves to the collector)
-- sets off, each the profile's gc seconds (cost:collecting); a memory limit
-- makes them frequent.
local partition = require 'lunet.parallel.partition'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local step_sim = require 'lunet.parallel.step_sim'
local schedules = require 'lunet.parallel.schedule'
-- (the schedules the candidates name, built once per size)
local built = {}
local function schedule_of(kind, S, m, p)
  local k = kind .. ':' .. S .. ':' .. m .. ':' .. p
  built[k] = built[k] or schedules.build(kind, S, m, p)
  return built[k]
end
-- the stages each device runs in an interleaved candidate (Pipeline's default)
local INTERLEAVE = 2
-- the share of a link's latency alpha that a boundary copy between devices
-- whose cores make it (virtual CPU devices) only delays, the rest being the
-- cores' work: alpha is timed from the host, a round trip of two threads'
-- hand-overs, and a pipeline's copy is one, which the receiving worker pays
-- once woken. (All of it as work over-predicted pipelines of many
-- micro-batches against few; none of it, every pipeline: bench/RESULTS.md.)
local COPY_DELAY = 0.5
-- the collector's triggers (tensor.lua: a device's bytes doubled past
-- gc_min, or under a limit near it; Stage.lua: a stage's grew by GROW and FLOOR)
local GC_MIN = require('lunet.tensor').gc_min
local Stage = require 'lunet.parallel.Stage'
local STAGE_GROW, STAGE_FLOOR = Stage.GROW, Stage.FLOOR
-- (a pipeline's boundary buffers per stage: the schedule's slots and Stage's spares)
local SPARE_SLOTS = Stage.SPARE_SLOTS

local cost = {}
cost.__index = cost

-- a step's activations are freed when Lua collects their tensors, which
-- lunet does once a device holds twice what was live at the last collection:
-- the previous step's activations may still be held beside this one's
local GC = 2
-- the optimizers the model knows, and the copies of the parameters each keeps
local OPT_STATES = { adam = 2, adamw = 2, momentum = 1, sgd = 0 }
cost.OPT_STATES = OPT_STATES

local function fail(msg, lvl) error('parallel.cost: ' .. msg, (lvl or 1) + 1) end

local function num(v, what, lvl)
  if type(v) ~= 'number' or v < 0 or v ~= v or v == math.huge then
    fail(('%s must be a number >= 0, got %s'):format(what, tostring(v)), lvl + 1)
  end
  return v
end

local function link_of(l, what, lvl)
  l = l or { alpha = 0, beta = 0 }
  if not is_table(l) then fail(what .. ' must be a table {alpha = s, beta = s/byte}', lvl + 1) end
  return { alpha = num(l.alpha or 0, what .. '.alpha', lvl + 1), beta = num(l.beta or 0, what .. '.beta', lvl + 1) }
end

function cost.new(atoms, opts)
  opts = opts or {}
  if not is_table(atoms) or #atoms == 0 then fail('the profile must be a non-empty list of atoms', 2) end
  for i, a in ipairs(atoms) do
    if not is_table(a) then fail(('atom %d must be a table, got %s'):format(i, typename(a)), 2) end
    for _, k in ipairs({ 'fwd', 'bwd', 'act_bytes', 'param_bytes' }) do num(a[k], ('atom %d: %s'):format(i, k), 2) end
    if type(a.batch) ~= 'number' or a.batch < 1 then fail(('atom %d: batch (the profiled batch size) must be >= 1'):format(i), 2) end
  end
  local link = opts.link or {}
  local self = setmetatable({
    atoms = atoms, n = #atoms,
    copy = link_of(link.copy, 'link.copy', 2), ar = link_of(link.allreduce, 'link.allreduce', 2),
    overlap = num(link.overlap or 1, 'link.overlap', 2), pipe = link.pipeline or { fixed = 0, action = {} },
    speed = opts.speed or {}, memory = opts.memory or {}, headroom = opts.headroom or 0.9,
    optimizer = opts.optimizer or 'adam', bucket_bytes = (opts.bucket_mb or 25) * 2 ^ 20,
    in_bytes = opts.in_bytes or 0, names = opts.names, threads = opts.threads, cores = opts.cores,
    together = opts.together, host = opts.host or atoms.host or 0, in_batch = opts.in_batch or atoms[1].batch,
    gc = opts.gc or atoms.gc or 0,
  }, cost)
  local k = OPT_STATES[self.optimizer]
  if not k then fail(("optimizer must be 'adam', 'adamw', 'momentum' or 'sgd', got %s"):format(tostring(self.optimizer)), 2) end
  self.states = k
  return self
end

-- ---- per atom, per batch ------------------------------------------------------------------

local function scaled(full, fixed, b, b0) return fixed + (full - fixed) * b / b0 end
-- the measured whole-chain time at batch b over the per-atom model's sum
-- (1 without list.whole): linear between the measured sizes, proportional
-- beyond them
function cost:calib(b)
  local w = self.atoms.whole
  if not w or #w == 0 then return 1 end
  self.calib_cache = self.calib_cache or {}
  local c = self.calib_cache[b]
  if c then return c end
  local function model(bb)
    local t = 0
    for i = 1, self.n do
      local a = self.atoms[i]
      t = t + scaled(a.fwd, a.fwd0 or 0, bb, a.batch) + scaled(a.bwd, a.bwd0 or 0, bb, a.batch)
    end
    return t
  end
  -- w is in decreasing batch order
  local t
  if b >= w[1][1] then t = w[1][2] * b / w[1][1]
  elseif b <= w[#w][1] then t = w[#w][2] * b / w[#w][1]
  else
    for k = 1, #w - 1 do
      local hi, lo = w[k], w[k + 1]
      if b <= hi[1] and b >= lo[1] then
        t = lo[2] + (hi[2] - lo[2]) * (b - lo[1]) / (hi[1] - lo[1])
        break
      end
    end
  end
  local m = model(b)
  c = m > 0 and t / m or 1
  self.calib_cache[b] = c
  return c
end
function cost:fwd(i, b) local a = self.atoms[i]; return scaled(a.fwd, a.fwd0 or 0, b, a.batch) * self:calib(b) end
function cost:bwd(i, b) local a = self.atoms[i]; return scaled(a.bwd, a.bwd0 or 0, b, a.batch) * self:calib(b) end
function cost:act(i, b) local a = self.atoms[i]; return a.act_bytes * b / a.batch end
function cost:temp(i, b) local a = self.atoms[i]; return scaled(a.temp_bytes or 0, a.temp0 or 0, b, a.batch) end
-- the most transient memory of atoms lo..hi at batch b (one atom runs at a time)
function cost:temp_max(lo, hi, b)
  local m = 0
  for i = lo, hi do m = math.max(m, self:temp(i, b)) end
  return m
end
function cost:out(i, b) local a = self.atoms[i]; return (a.out_bytes or 0) * b / a.batch end
-- the largest block atoms lo..hi allocate at batch b (an output or a workspace)
function cost:largest(lo, hi, b)
  local m = 0
  for i = lo, hi do m = math.max(m, self:out(i, b), self:temp(i, b)) end
  return m
end
-- bytes atoms lo..hi leave to the collector a micro-batch of b
function cost:churn(lo, hi, b)
  local c = 0
  for i = lo, hi do local a = self.atoms[i]; c = c + scaled(a.churn or 0, a.churn0 or 0, b, a.batch) end
  return c
end

-- the seconds a device spends in full collections a step: its churn over the
-- bytes the collector lets pile up between two collections (from live, what
-- stays allocated: tensor.lua's trigger, and under a limit the room to it
-- less what tensor.lua keeps free there: twice the largest block, at least a
-- quarter and at most half of the room, never less than the largest block;
-- without a limit a pipeline's stage also collects when its bytes grew by
-- GROW), each collection the profile's gc seconds; at most one per atom action
function cost:collecting(churn, live, limit, stage, actions, largest)
  local t = self.gc
  if t == 0 or churn <= 0 then return 0 end
  local margin = math.max(GC_MIN, 2 * live) - live
  if limit < math.huge then
    local room = limit - live
    margin = math.min(margin, room - math.max(largest, math.min(room / 2, math.max(2 * largest, room / 4))))
  elseif stage then
    margin = math.min(margin, math.max(live * (STAGE_GROW - 1), STAGE_FLOOR))
  end
  local n = margin > 0 and math.min(churn / margin, actions) or actions
  return n * t
end
-- parameters + gradients + optimizer state
function cost:state(i) return self.atoms[i].param_bytes * (2 + self.states) end
function cost:dev_speed(d) return self.speed[d] or 1 end

-- how many devices' worth of work devices first..last do at once: all of
-- them, unless they share cores. Measured (together: each device's speed
-- while all of them compute, relative to alone) or, for virtual CPU devices
-- whose thread shares exceed the cores, cores over the mean share. A device
-- idle in a pipeline's bubble leaves its cores to the others, so this bounds
-- the devices' summed busy time, not each device's speed.
function cost:capacity(first, last)
  local n = last - first + 1
  if n <= 1 then return 1 end
  if self.together then return n * self.together end
  return n * (cost.core_share(self.threads, self.cores, first, last) or 1)
end

-- each of devices first..last's share of the cores while all of them compute
-- (virtual CPU devices: the cores over their threads, at most 1); nil when
-- the threads or cores are not known
function cost.core_share(threads, cores, first, last)
  if not (threads and cores) then return nil end
  local used = 0
  for k = first, last do used = used + (threads[k] or 1) end
  return math.min(1, cores / used)
end

-- the host's queueing time (seconds) as work for the cores devices
-- first..last share, when the host thread takes one of them (virtual CPU
-- devices whose threads leave no core free); 0 when the host has its own
function cost:host_work(first, last, seconds)
  local th, cores = self.threads, self.cores
  if not (th and cores) then return 0 end
  local used = 0
  for k = first, last do used = used + (th[k] or 1) end
  return used + 1 > cores and seconds or 0
end

-- the optimizer's step over atoms lo..hi (the profile's update time, shared by parameter bytes)
function cost:update(lo, hi)
  local u = self.atoms.update or 0
  if u == 0 then return 0 end
  local part, all = 0, 0
  for i = 1, self.n do
    local b = self.atoms[i].param_bytes
    all = all + b
    if i >= lo and i <= hi then part = part + b end
  end
  return all > 0 and u * part / all or 0
end
function cost:dev_memory(d) return self.memory[d] or math.huge end

-- sums over atoms lo..hi
function cost:range(lo, hi, b)
  local f, bw, act, st, par = 0, 0, 0, 0, 0
  for i = lo, hi do
    f, bw = f + self:fwd(i, b), bw + self:bwd(i, b)
    act, st, par = act + self:act(i, b), st + self:state(i), par + self.atoms[i].param_bytes
  end
  return f, bw, act, st, par
end

function cost:allreduce(n, bytes)
  if n <= 1 or bytes <= 0 then return 0 end
  return 2 * (n - 1) / n * bytes * self.ar.beta + 2 * (n - 1) * self.ar.alpha
end
function cost:copy_time(bytes) return self.copy.alpha + self.copy.beta * bytes end

-- the bytes of the last gradient bucket reduced (the first parameters: the
-- Reducer fills buckets in reverse order, the first two at most 1 MB)
function cost:last_bucket(lo, hi)
  local cur, nb = 0, 0
  for i = hi, lo, -1 do
    local b = self.atoms[i].param_bytes
    if b > 0 then
      local cap = nb <= 1 and math.min(self.bucket_bytes, 2 ^ 20) or self.bucket_bytes
      if nb == 0 or (cur > 0 and cur + b > cap) then nb, cur = nb + 1, 0 end
      cur = cur + b
    end
  end
  return cur
end

function cost:fits(c)
  local worst, dev = 0, nil
  for d, need in ipairs(c.memory) do
    local have = self:dev_memory(c.device_list[d]) * self.headroom
    if need > have and need - have > worst then worst, dev = need - have, d end
  end
  if dev then
    c.fits = false
    local idx = c.device_list[dev]
    c.why = ('%s needs %s, holds %s'):format(self.names and self.names[idx] or ('device ' .. idx), partition.fmt_bytes(c.memory[dev]),
      partition.fmt_bytes(self:dev_memory(c.device_list[dev])))
  else
    c.fits = true
  end
  return c
end

-- ---- data parallel (n = 1: one device), with accumulation k ----------------------------------

-- the batch split over the devices in proportion to their speed (as
-- DataParallel's balance = weights does)
function cost:data_parallel(n, B, k, first)
  first = first or 1
  k = k or 1
  local total_speed, devs = 0, {}
  local last = first + n - 1
  for d = 1, n do devs[d] = first + d - 1; total_speed = total_speed + self:dev_speed(devs[d]) end
  local slowest, mem, bw_last, busy, gc = 0, {}, 0, 0, 0
  local _, _, _, st, par = self:range(1, self.n, 1)
  for d = 1, n do
    local sp = self:dev_speed(devs[d])
    local share = B * sp / total_speed
    local b = share / k
    local f, bw, act = self:range(1, self.n, b)
    local t = (k * (f + bw) + self:update(1, self.n)) / sp
    busy = busy + t
    if t > slowest then slowest, bw_last = t, bw / sp end
    local input = self.in_bytes * share / self.in_batch
    mem[d] = st + GC * act + self:temp_max(1, self.n, b) + input
    -- (one collection frees every device's garbage: the device collecting most sets the count)
    gc = math.max(gc, self:collecting(k * self:churn(1, self.n, b), st + act + input, self:dev_memory(devs[d]),
      false, 2 * k * self.n, self:largest(1, self.n, b)))
  end
  local ar = self:allreduce(n, par)
  local exposed = 0
  if n > 1 then
    exposed = math.max(self:allreduce(n, self:last_bucket(1, self.n)), ar - self.overlap * bw_last)
  end
  -- devices sharing cores; the host queues every replica's micro-batches one after another
  local cap = self:capacity(first, last)
  -- the host's time a step: each replica's micro-batches queued, and what
  -- DataParallel's machinery costs a replica (link.pipeline.replica; each
  -- further accumulated micro-batch link.pipeline.replica_micro)
  local rep = self.pipe.replica or 0
  local rep_micro = self.pipe.replica_micro or rep
  local host = n > 1 and n * (k * self.host + rep + (k - 1) * rep_micro) or 0
  busy = busy + self:host_work(first, last, host)
  if busy / cap > slowest then bw_last = bw_last * busy / cap / slowest; slowest = busy / cap end
  slowest = math.max(slowest, host)
  -- (the host's collections stop its queueing: the devices run dry)
  local c = {
    kind = n == 1 and 'single' or 'data', devices = n, device_list = devs, replicas = n, stages = 1,
    chunks = 1, accumulate = k, step = slowest + exposed + gc, compute = slowest, comm = exposed, gc = gc, host = host,
    bubble = 0, memory = mem, wire = n > 1 and 2 * (n - 1) * par or 0, params = par, state = st,
  }
  return self:fits(c)
end

-- ---- pipeline of p stages, d replicas (hybrid when d > 1), m micro-batches ------------------

-- the weights' gradients' part of atoms lo..hi's backward at batch b (a
-- zero-bubble W; the profile's w_share, 0 where not measured)
function cost:weight_grad(lo, hi, b)
  local w = 0
  for i = lo, hi do w = w + self:bwd(i, b) * (self.atoms[i].w_share or 0) end
  return w
end

-- p devices a replica, d replicas; S stages a replica, stage j on the
-- replica's device (j - 1) % p + 1 (S = p but for the interleaved schedule)
function cost:pipeline(p, d, B, m, schedule, first)
  first = first or 1
  local V = schedule == 'interleaved' and INTERLEAVE or 1
  local S = p * V
  if S > self.n then return nil end
  -- (the pipeline's own work an action, as measured per schedule; 1F1B's
  -- where a stated link or an older profile lacks the schedule's; a
  -- hybrid's as measured for two pipelines, where the link has it)
  local machinery = d > 1 and self.pipe.hybrid or self.pipe
  local acts = machinery.action or {}
  local action = acts[schedule] or acts['1f1b'] or 0
  -- the host's time a micro-batch: queueing the layers, and the pipeline's
  -- own work for each of its 2S actions, 3S for zero-bubble's (profile.pipeline_overhead)
  local host_mb = self.host + schedules.actions(schedule) * S * action
  local Br = B / d
  local b = math.ceil(Br / m)
  local inflight = schedules.held(schedule, S, m)
  local function dev_of(r, j) return first + (r - 1) * p + (j - 1) % p end
  local costs, speed, memory = {}, {}, {}
  for i = 1, self.n do
    costs[i] = { time = self:fwd(i, b) + self:bwd(i, b), memory = self:state(i), act = GC * self:act(i, b) }
  end
  -- what a stage holds beside its atoms' own memory, at most: the largest
  -- transient of any atom and the largest boundary buffers (so that the
  -- split's stages fit once those are added)
  local extra = self:temp_max(1, self.n, b)
  local xmax = self.in_bytes * b / self.in_batch
  for i = 1, self.n - 1 do xmax = math.max(xmax, self:out(i, b)) end
  extra = extra + 2 * xmax
  for j = 1, S do
    speed[j], memory[j] = math.huge, math.huge
    for r = 1, d do
      local dev = dev_of(r, j)
      speed[j] = math.min(speed[j], self:dev_speed(dev))
      memory[j] = math.min(memory[j], math.max(1, self:dev_memory(dev) * self.headroom - V * extra))
    end
  end
  local popts = { speed = speed, memory = memory, inflight = inflight }
  local function split(o)
    if V == 1 then return partition.split(costs, S, o) end
    -- (memory per device: its stages hold it together)
    o.score = step_sim.looped_score(schedule_of(schedule, S, m, p), S, p)
    if o.memory then o.memory = { unpack(o.memory, 1, p) } end
    return partition.split_looped(costs, S, p, o)
  end
  local ok, counts = pcall(split, popts)
  local why
  if not ok then
    why = tostring(counts):gsub('^.-partition%.split: ', '')
    counts = split({ speed = speed, inflight = inflight })
    -- (a device too small for the largest workspace and boundary buffers
    -- alone: say that, not that its atoms need more than nothing)
    for j = 1, S do
      local dev = dev_of(1, j)
      if self:dev_memory(dev) * self.headroom <= V * extra then
        why = ('%s holds %s; the largest workspace and boundary buffers at micro-batches of %d take %s')
          :format(self.names and self.names[dev] or ('device ' .. dev), partition.fmt_bytes(self:dev_memory(dev)), b,
          partition.fmt_bytes(V * extra / self.headroom))
        break
      end
    end
  end
  local times = partition.evaluate(costs, counts, { speed = speed, inflight = inflight })
  -- stage j's atoms lo..hi: time, memory, boundary copies, gradient all-reduce among replicas
  local sum_t, max_t, fill, busy, lo = 0, 0, 0, 0, 1
  local mem, par_stage, exposed, wire, bwd_before = {}, {}, 0, 0, {}
  local acc_bwd = 0
  local gc = 0   -- (the stage collecting most: a collection frees every stage's garbage)
  -- the step played out (step_sim): each stage's forward and backward a
  -- micro-batch, the host's time to queue each, the stages it paces
  local fwd_s, bwd_s, host_s, paced = {}, {}, {}, {}
  local wgt_s = schedule == 'zb' and {} or nil   -- (zero-bubble: B the input's gradient, W the weights')
  local copy = 0
  local _, nslots = schedules.slots(schedule_of(schedule, S, m, p), S, m, SPARE_SLOTS)
  local dmem, dg = {}, {}   -- per device of a replica: what its stages hold; what its collector sees
  for j = 1, S do
    local hi = lo + counts[j] - 1
    local f, bw, act, st, par = self:range(lo, hi, b)
    fwd_s[j], bwd_s[j] = f / speed[j], bw / speed[j]
    if wgt_s then
      wgt_s[j] = self:weight_grad(lo, hi, b) / speed[j]
      bwd_s[j] = bwd_s[j] - wgt_s[j]
    end
    -- (the layers' queueing shared by their count, and the pipeline's own work an action)
    host_s[j] = self.host * counts[j] / self.n / 2 + action
    bwd_before[j], acc_bwd = acc_bwd, acc_bwd + bw / speed[j]
    local x_in = j > 1 and self:out(lo - 1, b) or self.in_bytes * b / self.in_batch
    local x_out = j < S and self:out(hi, b) or 0
    if j < S then
      local x = self:copy_time(x_out)
      fill = fill + 2 * x
      copy = math.max(copy, x)
      wire = wire + d * m * 2 * x_out
    end
    -- boundary buffers: the input received and the gradient sent back
    local m_j = st + inflight[j] * act * GC + self:temp_max(lo, hi, b) + 2 * x_in
    -- (what the collector finds live: per slot of the schedule (Stage.lua)
    -- the input received and, but on the last stage, its output's gradient;
    -- and the input's gradient its backward makes)
    local bound = nslots[j] * (x_in + x_out) + x_in
    local k = (j - 1) % p + 1
    dmem[k] = (dmem[k] or 0) + m_j
    for r = 1, d do mem[(r - 1) * p + k] = dmem[k] end
    -- (past half of its device's memory a stage makes the host wait for its
    -- previous backward before queuing more to it)
    paced[j] = m_j > self:dev_memory(dev_of(1, j)) / (2 * V)
    -- (what the collector sees is the device's: its stages' churn and live bytes together)
    local g = dg[k] or { churn = 0, live = 0, largest = 0 }
    dg[k] = g
    g.churn, g.live = g.churn + m * self:churn(lo, hi, b), g.live + st + inflight[j] * act + bound
    g.largest = math.max(g.largest, self:largest(lo, hi, b), x_in, x_out)
    par_stage[j] = { par = par, bw = bw / speed[j], lo = lo, hi = hi }
    sum_t, max_t = sum_t + times[j], math.max(max_t, times[j])
    busy = busy + m * times[j]
    lo = hi + 1
  end
  for k, g in pairs(dg) do
    gc = math.max(gc, self:collecting(g.churn, g.live, self:dev_memory(dev_of(1, k)), true, 2 * m * V, g.largest))
  end
  -- each stage's optimizer step after its last backward (stage 1 ends last)
  local upd = 0
  for j = 1, S do upd = math.max(upd, self:update(par_stage[j].lo, par_stage[j].hi) / speed[j] - bwd_before[j]) end
  -- a boundary copy the devices' cores make (overlap 0) is the stages' work
  -- but for a share of the link's latency, a delay (COPY_DELAY); else all of
  -- it only delays
  local latency = math.min(copy, self.copy.alpha) * COPY_DELAY
  for j = 1, S do
    if j > 1 then fwd_s[j] = fwd_s[j] + (1 - self.overlap) * (copy - latency) end
    if j < S then bwd_s[j] = bwd_s[j] + (1 - self.overlap) * (copy - latency) end
  end
  local last = first + p * d - 1
  local cores = self:capacity(first, last)
  -- (replicas that share neither cores nor a host's queueing run alike: one is played out)
  local alike = cores >= p * d and self.host == 0 and action == 0
  local step = step_sim.run { stages = S, devices = p, replicas = alike and 1 or d, steps = schedule_of(schedule, S, m, p),
    fwd = fwd_s, bwd = bwd_s, wgt = wgt_s, copy = self.overlap * copy + (1 - self.overlap) * latency, host = host_s, cores = cores,
    host_shares = self:host_work(first, last, 1) > 0, paced = paced } + upd
  if d > 1 then
    -- stage j's gradients are final after its last backward; stage 1 finishes
    -- last, bwd_before[j] later; the all-reduce overlaps that and (by buckets) j's own last backward
    for j = 1, S do
      local s = par_stage[j]
      local ar = self:allreduce(d, s.par)
      local e = math.max(self:allreduce(d, self:last_bucket(s.lo, s.hi)) - bwd_before[j],
        ar - self.overlap * s.bw - bwd_before[j])
      exposed = math.max(exposed, e)
      wire = wire + 2 * (d - 1) * s.par
    end
  end
  step = step + exposed + (machinery.fixed or 0) + gc
  local devs = {}
  for k = 1, p * d do devs[k] = first + k - 1 end
  local _, _, _, st, par = self:range(1, self.n, 1)
  local c = {
    kind = d > 1 and 'hybrid' or 'pipeline', devices = p * d, device_list = devs, replicas = d, stages = p,
    interleave = V > 1 and V or nil, chunks = m, micro = b, schedule = schedule, accumulate = 1, balance = counts,
    stage_times = times,
    step = step, compute = sum_t + (m - 1) * max_t, comm = fill + exposed, gc = gc, host = d * m * host_mb,
    bubble = math.max(0, 1 - busy / (p * step)), memory = mem, wire = wire, params = par, state = st,
  }
  self:fits(c)
  if why then c.fits, c.why = false, why end
  return c
end

-- ---- words -------------------------------------------------------------------------------

-- a pipeline candidate's schedule in words
function cost.schedule_name(c)
  if c.schedule == 'interleaved' then return ('interleaved 1F1B x%d'):format(c.interleave) end
  if c.schedule == 'zb' then return 'zero-bubble' end
  return c.schedule == 'gpipe' and 'GPipe' or '1F1B'
end

function cost.label(c)
  if c.kind == 'single' then
    return c.accumulate > 1 and ('one device, accumulate %d'):format(c.accumulate) or 'one device'
  elseif c.kind == 'data' then
    return ('data parallel x%d%s'):format(c.devices, c.accumulate > 1 and (', accumulate ' .. c.accumulate) or '')
  end
  local sched = cost.schedule_name(c)
  if c.kind == 'pipeline' then return ('pipeline %d stages, %d chunks, %s'):format(c.stages, c.chunks, sched) end
  return ('hybrid %dx%d, %d chunks, %s'):format(c.replicas, c.stages, c.chunks, sched)
end

return cost
