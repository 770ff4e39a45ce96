-- parallel.Reducer(param_sets, group[, opts]): the gradient all-reduce of
-- data-parallel training, for whatever holds the replicas (DataParallel; next
-- a pipeline's data-parallel stages, a multi-process DistributedDataParallel).
--
--   local r = Reducer({replica1:parameters(), replica2:parameters()}, comm.Communicator(devs),
--                     {bucket_mb = 25, compress = 'bf16', accumulate = 1})
--   r:prepare(true, active)   -- before each forward whose backward is recorded
--   ... backward ...          -- every param.grad is then the average over the group's ranks
--
-- param_sets: one list of parameters per replica this process holds, all in
-- the same order; group: a process group (lunet.comm) whose local ranks are
-- those replicas, in order (nil for a single replica: nothing is reduced).
-- opts: bucket_mb (25), compress (nil | 'fp16' | 'bf16'), overlap (true),
-- accumulate (1), name (the prefix of errors).
--
-- How it works. Each replica's gradients are copied, as backward accumulates
-- them (post-accumulate hooks), into flat buckets of at most bucket_mb,
-- parameters in reverse order (the first bucket, holding the last layers, at
-- most 1 MB so that its all-reduce starts early); afterwards p.grad is a view
-- of its bucket. A bucket's all-reduce ('avg' over the group's ranks) is
-- queued as soon as every active replica has filled it, on the devices'
-- communication streams while backward goes on (overlap), except the step's
-- last, which runs on the compute streams themselves (they would only wait
-- for it: no hand-off to the comm workers and back). At the end of backward
-- the buckets not yet launched are (unused parameters, overlap = false) and
-- the compute streams wait for the communication streams.
-- Accumulation: with accumulate = k only every k-th prepared backward
-- reduces; inside r:no_sync(fn) none does; r:sync_next(flag) decides the next
-- one. Gradients of the others add up locally and the next reducing backward
-- reduces their sum (a reduced gradient left in .grad is not counted again).
local lunet = require 'lunet'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local autograd = require 'lunet.autograd'

local Reducer = {}
Reducer.__index = Reducer

-- Reducer.options(opts, name, lvl): the options checked, with their defaults
-- (lvl: where an error points, as error's level seen from the caller)
function Reducer.options(opts, name, lvl)
  if not is_table(opts) then error('Reducer: options must be a table, got ' .. typename(opts), (lvl or 1) + 1) end
  name = name or opts.name or 'Reducer'
  local function fail(msg) error(name .. ': ' .. msg, (lvl or 1) + 2) end
  local o = { name = name, bucket_mb = opts.bucket_mb or 25, accumulate = opts.accumulate or 1,
    compress = opts.compress, overlap = opts.overlap ~= false }
  if type(o.bucket_mb) ~= 'number' or not (o.bucket_mb > 0) then fail('bucket_mb must be > 0') end
  local a = o.accumulate
  if type(a) ~= 'number' or a < 1 or a % 1 ~= 0 then
    fail('accumulate must be an integer >= 1, got ' .. tostring(opts.accumulate))
  end
  if o.compress ~= nil and o.compress ~= 'fp16' and o.compress ~= 'bf16' then
    fail("compress must be nil, 'fp16' or 'bf16', got " .. tostring(o.compress))
  end
  return o
end

local OPTS = { name = 'string', bucket_mb = true, accumulate = true, compress = true, overlap = 'boolean' }

function Reducer.new(param_sets, group, opts)
  require('lunet.options').check('Reducer', opts, OPTS)
  opts = Reducer.options(opts or {}, nil, 2)
  local name = opts.name
  local function fail(msg) error(name .. ': ' .. msg, 3) end
  if not is_table(param_sets) or #param_sets == 0 then fail('param_sets must be a non-empty list of parameter lists') end
  local n = #param_sets
  for k = 1, n do
    local set = param_sets[k]
    if not is_table(set) then fail(('param_sets[%d] must be a list of parameters'):format(k)) end
    if #set ~= #param_sets[1] then fail('replicas have different parameter counts') end
    for i = 1, #set do
      if not lunet.is_tensor(set[i]) then
        fail(('param_sets[%d][%d] must be a tensor, got %s'):format(k, i, typename(set[i])))
      end
    end
  end
  if group ~= nil and (not is_table(group) or type(group.local_size) ~= 'function') then
    fail('group must be a process group (lunet.comm), got ' .. typename(group))
  end
  if n > 1 and group == nil then fail(('%d replicas need a process group'):format(n)) end
  if group ~= nil and group:local_size() ~= n then
    fail(('the group holds %d ranks in this process, for %d replicas'):format(group:local_size(), n))
  end
  local self = setmetatable({
    name = name, sets = param_sets, n = n, group = group,
    bucket_mb = opts.bucket_mb, compress = opts.compress, overlap = opts.overlap,
    accumulate = opts.accumulate, micro = 0,
    -- the all-reduce options, made once (no table per bucket and step)
    async_opts = { op = 'avg', compress = opts.compress, async = true },
    sync_opts = { op = 'avg', compress = opts.compress },
  }, Reducer)
  self:_hook()
  return self
end

function Reducer:fail(msg, lvl) error(self.name .. ': ' .. msg, (lvl or 1) + 1) end

-- ---- accumulation ---------------------------------------------------------------------------

-- before a forward: recording = whether its backward will run (a gradient
-- recorded); active = how many of the replicas take part (got samples)
function Reducer:prepare(recording, active)
  self.reduced = nil
  if not recording then return end
  if not self.buckets then self:_build() end
  local sync = self.sync_forced
  self.sync_forced = nil
  if sync == nil then
    self.micro = self.micro + 1
    sync = self.micro % self.accumulate == 0
  end
  sync = sync and not self.no_sync_depth
  if sync then self.micro = 0 end
  self.step = { sync = sync and self.group ~= nil and self.group:size() > 1, active = active or self.n,
    ready = {}, launched = {}, nlaunched = 0 }
end

-- the prepared forward failed: no backward follows
function Reducer:abort() self.step = nil end

-- r:no_sync(fn, ...): backward passes inside fn only accumulate locally
function Reducer:no_sync(fn, ...)
  if type(fn) ~= 'function' then self:fail('no_sync: expected a function, got ' .. typename(fn), 2) end
  local old = self.no_sync_depth
  self.no_sync_depth = (old or 0) + 1
  local res = { pcall(fn, ...) }
  self.no_sync_depth = old
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

-- r:sync_next(flag): the next prepared backward reduces (true) or not (false),
-- whatever the accumulate count says; a reducing one restarts the count
function Reducer:sync_next(flag)
  if type(flag) ~= 'boolean' then self:fail('sync_next: expected true or false, got ' .. typename(flag), 2) end
  self.sync_forced = flag
end

-- the parameters changed dtype: buckets are made again at the next backward
function Reducer:rebuild() self.buckets = nil end

-- ---- buckets --------------------------------------------------------------------------------

-- buckets of parameter indices in reverse order, at most bucket_mb each
function Reducer:_build()
  local P = self.sets[1]
  local cap = self.bucket_mb * 1048576
  local buckets, of, slot = {}, {}, {}
  local cur
  for i = #P, 1, -1 do
    local p = P[i]
    if not p.requires_grad then goto continue end   -- frozen: never reduced, never given a grad
    local bytes = p:numel() * p:element_size()
    local limit = (#buckets <= 1) and math.min(cap, 1048576) or cap
    if not cur or cur.dtype ~= p.dtype or (cur.bytes > 0 and cur.bytes + bytes > limit) then
      cur = { idx = {}, bytes = 0, numel = 0, dtype = p.dtype }
      buckets[#buckets + 1] = cur
    end
    cur.idx[#cur.idx + 1] = i
    slot[i] = cur.numel
    cur.numel = cur.numel + p:numel()
    cur.bytes = cur.bytes + bytes
    of[i] = #buckets
    ::continue::
  end
  local views = {}
  for k = 1, self.n do views[k] = {} end
  for _, b in ipairs(buckets) do
    b.flat = {}
    for k = 1, self.n do
      local set = self.sets[k]
      b.flat[k] = lunet.zeros({ b.numel }, { dtype = b.dtype, device = set[b.idx[1]].device })
      for _, i in ipairs(b.idx) do
        views[k][i] = b.flat[k]:narrow(1, slot[i] + 1, set[i]:numel()):view(set[i]:size())
      end
    end
  end
  self.buckets, self.bucket_of, self.views = buckets, of, views
  self.seen = {}
end

-- the hooks hold the reducer weakly: parameters' records must not keep it
-- (and its buckets) alive once its owner is dropped
function Reducer:_hook()
  local weak = setmetatable({ self }, { __mode = 'v' })
  for k = 1, self.n do
    for i, p in ipairs(self.sets[k]) do
      p:register_post_accumulate_grad_hook(function()
        local r = weak[1]
        if r then r:_on_grad(k, i) end
      end)
    end
  end
  self._finish = function(ok)
    local r = weak[1]
    if r then r:_end_backward(ok) end
  end
end

-- p.grad becomes its bucket view (the gradient copied in; zeros when none)
local function into_view(p, v)
  local g = p.grad
  if rawequal(g, v) then return end
  if g == nil then v:zero_() else v:copy_(g) end
  p.grad = v
end

function Reducer:_on_grad(k, i)
  local st = self.step
  if not st then
    if self.reduced then
      self:fail('a second backward after the gradients were reduced: run forward again for each backward '
        .. '(or accumulate inside no_sync)')
    end
    return
  end
  if not st.sync then return end
  if not st.queued then autograd.queue_callback(self._finish); st.queued = true end
  local b = self.bucket_of[i]
  if not b then return end
  local key = (k - 1) * #self.sets[1] + i
  if self.seen[key] == st then
    if st.launched[b] then
      self:fail(('parameter %d of replica %d got a second gradient after its bucket was reduced (a shared '
        .. 'parameter?); use {overlap = false}'):format(i, k))
    end
    return
  end
  self.seen[key] = st
  into_view(self.sets[k][i], self.views[k][i])
  if not self.overlap then return end
  local r = (st.ready[b] or 0) + 1
  st.ready[b] = r
  if r == st.active * #self.buckets[b].idx then self:_launch(b) end
end

function Reducer:_launch(b)
  local st = self.step
  st.launched[b] = true
  st.nlaunched = st.nlaunched + 1
  local bucket = self.buckets[b]
  local np = #self.sets[1]
  for k = 1, self.n do
    for _, i in ipairs(bucket.idx) do
      local key = (k - 1) * np + i
      if self.seen[key] ~= st then
        self.seen[key] = st
        into_view(self.sets[k][i], self.views[k][i])
      end
    end
  end
  -- the step's last bucket on the compute streams (see the top)
  local async = self.overlap and st.nlaunched < #self.buckets
  self.group:allreduce(bucket.flat, async and self.async_opts or self.sync_opts)
end

-- end of backward: reduce the buckets not yet launched
function Reducer:_end_backward(ok)
  local st = self.step
  self.step = nil
  if not st then return end
  if not ok then
    -- buckets already queued on the comm streams: order them before what follows
    if self.overlap and next(st.launched) then pcall(self.group.wait, self.group) end
    return
  end
  self.step = st
  for b = 1, #self.buckets do
    if not st.launched[b] then self:_launch(b) end
  end
  -- the compute streams wait for the comm streams before anything reads the
  -- reduced buckets (the gradients are views of them)
  if self.overlap then self.group:wait() end
  self.step = nil
  self.reduced = true   -- until the next forward
end

return setmetatable(Reducer, { __call = function(_, ...) return Reducer.new(...) end })
