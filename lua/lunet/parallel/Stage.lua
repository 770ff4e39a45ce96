-- parallel.Stage: one stage of one pipeline replica (parallel.Pipeline): a
-- contiguous run of the model's atoms on one device, and what its forward
-- and backward actions keep between the steps of a schedule.
--
-- F(m): the micro-batch's input is copied into this stage's boundary buffer
-- by a transfer (c/core/copy.c, ln_transfer_: on this device's comm stream,
-- once the source made it and this device's earlier work is done; the host
-- never touches the data), and this device waits for the copy just before
-- the atoms run, so that nothing it runs until then waits for the other.
-- Past the first stage the buffer is a leaf that requires grad: backward
-- leaves the gradient for the previous stage there.
-- B(m): backward from the stage's output, seeded with the gradient the next
-- stage copied into this stage's gradient buffer (the last stage: from its
-- loss). With recomputation, F ran without recording and B first runs the
-- atoms again on the kept input (the random state restored for dropout,
-- BatchNorm's running statistics left alone: pipeline_bn).
-- Buffers are indexed by slot (schedule.slots): a micro-batch's slot is free
-- once its backward has run, so a step reuses the buffers of earlier ones.
local lunet = require 'lunet'
local ffi = require 'ffi'
local core = require 'lunet.core'
local autograd = require 'lunet.autograd'
local C = core.C
local collect_if_tight, collect_now = require('lunet.tensor').collect_if_tight, require('lunet.tensor').collect
local free_now = require('lunet.tensor').free_now
local eager = require 'lunet.nn.eager'

local MAXSLOT = 64   -- slots with an event (more in flight than this are not paced)
local GROW = 1.5     -- a stage collects garbage when its device's bytes grew by this since it last did
-- and by at least this many bytes: with less, a small model's stages ran a
-- full collection every step, which cost it more than the memory it saved
local FLOOR = 8 * 2 ^ 20
local Sequential = require 'lunet.nn.Sequential'

-- boundary buffers per stage beyond what the schedule needs (Pipeline's
-- schedule.slots): the host queues a micro-batch's input into the buffer
-- freed one backward earlier than the last, so it seldom waits for a device
-- while the other has nothing queued (a stage may then hold one
-- micro-batch's activations more)
local SPARE_SLOTS = 1
-- (the planner's cost model counts the collections and the buffers)
local Stage = { GROW = GROW, FLOOR = FLOOR, SPARE_SLOTS = SPARE_SLOTS }
Stage.__index = Stage

-- (s: the stage's index, mods: its atoms' modules, device: its device name)
function Stage.new(s, mods, device)
  local seq = Sequential()
  for _, m in ipairs(mods) do seq:add(m) end   -- (an unregistered container: the atoms run fused as in the model)
  return setmetatable({ s = s, seq = seq, mods = mods, device = device, inbuf = {}, gbuf = {}, stash = {},
    pending = {}, dev_id = core.device_id('Pipeline', device), events = ffi.new('ln_event[?]', MAXSLOT),
    queued = {}, gc_at = 0, arrive_in = ffi.new('ln_event[?]', MAXSLOT), arrive_grad = ffi.new('ln_event[?]', MAXSLOT),
    waits_in = {}, waits_grad = {} }, Stage)
end

-- a buffer of t's shape and dtype on this device, from list[slot] when it fits
local function buffer(list, slot, like, device, grad)
  local b = list[slot]
  if b and b.dtype == like.dtype and b:dim() == like:dim() then
    local same = true
    for d = 1, b:dim() do if b:size(d) ~= like:size(d) then same = false; break end end
    if same then return b end
  end
  b = lunet.empty(like:size(), { dtype = like.dtype, device = device })
  if grad then b.requires_grad = true end
  list[slot] = b
  return b
end

-- The host paces itself by the slots: B(m) records an event where it ends,
-- and the next micro-batch given m's slot first waits for it. Queued work
-- holds the tensors it uses, so without this a host running ahead of the
-- devices would keep every micro-batch's activations alive at once, and
-- 1F1B would save no memory.
function Stage:done(k)
  if k > MAXSLOT then return end
  if C.ln_event_record(self.dev_id, self.events + k - 1) ~= 0 then error(core.last_error(), 0) end
  self.queued[k] = true
  self.last_done = k
end

local function wait_slot(self, k)
  if self.queued[k] then
    self.queued[k] = nil
    if C.ln_event_synchronize(self.events + k - 1) ~= 0 then error(core.last_error(), 0) end
  end
end
Stage.wait_slot = wait_slot   -- (a pipeline across processes receives into the slot's buffer itself)

-- src copied into the boundary buffer b of slot k on this device's comm
-- stream; the point after the copy is kept in events[k - 1], and
-- arrived(k) makes this device wait for it (slots past MAXSLOT: at once).
-- Autograd does not see the copy (b is a leaf, or a gradient seed).
local function transfer(self, b, src, k, events, waits)
  local ev = k <= MAXSLOT and events + k - 1 or self.spare_event
  if not ev then self.spare_event = ffi.new('ln_event[1]'); ev = self.spare_event end
  if C.ln_transfer_(b.p, src.p, ev) ~= 0 then error(core.last_error(), 0) end
  if k <= MAXSLOT then waits[k] = true
  elseif C.ln_event_wait(self.dev_id, ev) ~= 0 then error(core.last_error(), 0) end
end

local function arrived(self, k, events, waits)
  if waits[k] then
    waits[k] = nil
    if C.ln_event_wait(self.dev_id, events + k - 1) ~= 0 then error(core.last_error(), 0) end
  end
end

-- this device waits for the input of slot k, or its output's gradient, to arrive
function Stage:input_arrived(k) arrived(self, k, self.arrive_in, self.waits_in) end
function Stage:grad_arrived(k) arrived(self, k, self.arrive_grad, self.waits_grad) end

-- the input of micro-batch m (slot k) copied into this stage's buffer
function Stage:receive(k, src)
  wait_slot(self, k)
  local b = buffer(self.inbuf, k, src, self.device, self.s > 1 and src:is_floating_point())
  transfer(self, b, src, k, self.arrive_in, self.waits_in)
  return b
end

-- the gradient of this stage's output for micro-batch m (slot k), from the next stage
function Stage:receive_grad(k, g)
  local b = buffer(self.gbuf, k, g, self.device, false)
  transfer(self, b, g, k, self.arrive_grad, self.waits_grad)
  return b
end

local function run(seq, x) return seq:forward(x) end

-- Activations and their autograd records are freed when Lua collects their
-- handles; lunet.tensor collects when a device's bytes double past 32 MB,
-- which would let a stage hold twice the micro-batches its schedule keeps
-- (1F1B) before anything is freed. A stage collects sooner: before each
-- forward and backward, when its device's bytes grew by GROW (and FLOOR)
-- since the last collection (each micro-batch's backward leaves its fresh
-- weight gradients behind). Under a memory limit, lunet.tensor's rule
-- decides (near the limit, once queued work has run), and past half of the
-- limit the host also waits for the stage's previous backward before
-- queuing more: memory is taken when work is queued and given back when it
-- has run.
local function collect(self)
  local dev = self.dev_id
  local lim = tonumber(C.ln_memory_limit(dev))
  if lim > 0 then
    if self.last_done and tonumber(C.ln_memory_allocated(dev)) > lim / 2 then wait_slot(self, self.last_done) end
    if collect_if_tight(dev) then self.gc_at = tonumber(C.ln_memory_allocated(dev)) end
    return
  end
  -- (with eager freeing a stage's activations, its outputs and the
  -- gradients it sends back are freed once done with: what grows is live,
  -- and a collection would find nothing; lunet.tensor's trigger stays)
  if eager.active() then return end
  local a = tonumber(C.ln_memory_allocated(dev))
  if a > self.gc_at * GROW and a > self.gc_at + FLOOR then
    collect_now()
    self.gc_at = tonumber(C.ln_memory_allocated(dev))
  end
end
Stage.collect = collect

-- F(m) on the input buffer inp; record: whether to record (false: recompute in B)
function Stage:forward(m, inp, record)
  collect(self)
  local y
  if record then y = run(self.seq, inp)
  else
    local seed, offset = lunet.rng_state()
    y = autograd.no_grad(run, self.seq, inp)
    self.stash[m] = { inp = inp, seed = seed, offset = offset }
    return y
  end
  self.stash[m] = { inp = inp, out = y }
  return y
end

-- B(m)'s output again, recording (for a micro-batch forwarded without)
function Stage:recompute(m, bn)
  collect(self)
  local st = self.stash[m]
  if st.out then return st.out end
  local seed, offset = lunet.rng_state()
  lunet.set_rng_state(st.seed, st.offset)
  local prev = bn and bn:frozen(true)
  local ok, y = pcall(run, self.seq, st.inp)
  if bn then bn:frozen(prev) end
  lunet.set_rng_state(seed, offset)
  if not ok then error(y, 0) end
  st.out = y
  return y
end

-- after B(m): the gradient for the previous stage (nil on the first), and the stash dropped
function Stage:finish(m)
  local st = self.stash[m]
  self.stash[m] = nil
  -- (the stage's output, done with: freed now, lunet.nn.eager; the input is a boundary buffer, kept)
  local out = st and st.out
  if out and not rawequal(out, st.inp) and eager.active() and out.p ~= nil then free_now(out) end
  if self.s == 1 or not st then return nil end
  local g = st.inp.grad
  st.inp.grad = nil
  return g
end

-- drop what a failed step kept
function Stage:reset()
  for m in pairs(self.stash) do self.stash[m] = nil end
  for m in pairs(self.pending) do self.pending[m] = nil end
  for k in pairs(self.queued) do self.queued[k] = nil; C.ln_event_synchronize(self.events + k - 1) end
  for k in pairs(self.waits_in) do self.waits_in[k] = nil; C.ln_event_synchronize(self.arrive_in + k - 1) end
  for k in pairs(self.waits_grad) do self.waits_grad[k] = nil; C.ln_event_synchronize(self.arrive_grad + k - 1) end
  for _, b in pairs(self.inbuf) do b.grad = nil end
end

return Stage
