-- lunet.comm: collectives over a process group ("communicator") of devices.
--   local comm = lunet.comm.Communicator({'cpu:0', 'cpu:1'})
--   comm:allreduce({g0, g1}, {op = 'avg', compress = 'bf16'})   -- in place
-- A group has size() ranks over every process of the job; this process
-- holds local_size() of them, one per device in devices() (the list it was
-- made with), with the global ranks ranks(). Every call takes this
-- process's tensors, one per local rank in that order; the 'local' backend
-- (the default) holds every rank in this process, so its calls take one
-- tensor per rank; a list of cuda devices gets 'nccl' (NCCL, one process
-- holding every GPU, or across processes with lunet.distributed). Calls
-- enqueue the work on the devices' streams and return at once; read the
-- results as usual (item, totable, lunet.synchronize).
-- Ranks in this API are 1-based (global rank r - 1 in C), or the name of a
-- device this process holds ('cpu:1'). Across processes (backend 'mpi', made
-- by lunet.distributed): rank r here is 0-based process rank r - 1 of
-- dist.world(), or the (r)th process listed to dist.group.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local C = core.C

local comm = {}
local Communicator = {}
Communicator.__index = Communicator

local ops = { sum = 0, avg = 1, mean = 1, max = 2, min = 3 }
local wires = { bf16 = 7, bfloat16 = 7, fp16 = 6, float16 = 6, half = 6 }

local COMM_OPTS = { backend = 'string', world_size = 'number', ranks = 'table', rendezvous = 'string' }

local function int_opt(v, what, min)
  if v ~= nil and (type(v) ~= 'number' or v % 1 ~= 0 or v < min or v > 2 ^ 31 - 1) then
    options.raise(('Communicator: %s must be an integer >= %d, got %s'):format(what, min, tostring(v)))
  end
  return v
end

-- Communicator(devices[, {backend = 'local' (CPU devices) | 'nccl' (cuda devices), world_size = n, ranks = {r1, ...},
-- rendezvous = 'name'}]): devices (default lunet.devices()) are this
-- process's; world_size (default: as many as devices) and ranks (1-based
-- global ranks of the devices, default 1..#devices) describe a group whose
-- other ranks are elsewhere: in other processes (mpi, nccl), or, with the
-- local backend, in the other groups of this process made with the same
-- rendezvous name (each group then calls every collective with its own
-- ranks' tensors, in the same order; it runs once all have)
function comm.Communicator(devices, opts)
  options.check('Communicator', opts, COMM_OPTS)
  if devices == nil then devices = require('lunet').devices() end
  if not is_table(devices) then
    error('Communicator: devices must be a list of devices, got ' .. typename(devices), 2)
  end
  opts = opts or {}
  local n = #devices
  if n == 0 then error('Communicator: need at least one device', 2) end
  local ids = ffi.new('int[?]', n)
  local names = {}
  for i = 1, n do
    ids[i - 1] = core.device_id('Communicator', devices[i])
    names[i] = core.device_name(ids[i - 1])
  end
  local ranks
  if opts.ranks ~= nil then
    if #opts.ranks ~= n then
      error(('Communicator: ranks must be a list of %d ranks (one per device)'):format(n), 2)
    end
    ranks = ffi.new('int[?]', n)
    for i = 1, n do ranks[i - 1] = int_opt(opts.ranks[i], 'ranks[' .. i .. ']', 1) - 1 end
  end
  -- GPU tensors travel by NCCL: the default for a list of cuda devices
  local backend = opts.backend
  if backend == nil and names[1]:match('^cuda') then backend = 'nccl' end
  local cfg = ffi.new('ln_comm_config', { backend = backend, world_size = int_opt(opts.world_size, 'world_size', 1) or 0,
    nlocal = n, ranks = ranks, devices = ids, rendezvous = opts.rendezvous })
  local p = C.ln_comm_create(cfg)
  if p == nil then core.raise() end
  local self = setmetatable({
    handle = ffi.gc(p, C.ln_comm_free), n = n, world = C.ln_comm_size(p), names = names,
    remote = backend ~= nil and backend ~= 'local' and backend ~= 'nccl',
    buf_a = ffi.new('ln_tensor*[?]', n), buf_b = ffi.new('ln_tensor*[?]', n),
  }, Communicator)
  return self
end

function Communicator:size() return self.world end
function Communicator:local_size() return self.n end
function Communicator:devices() return { unpack(self.names) } end
function Communicator:backend() return ffi.string(C.ln_comm_backend_name(self.handle)) end

-- the 1-based global ranks this process holds, in local order
function Communicator:ranks()
  local r = {}
  for i = 1, self.n do r[i] = C.ln_comm_rank(self.handle, i - 1) + 1 end
  return r
end

function Communicator:__tostring()
  local s = ('Communicator(%s: %s'):format(self:backend(), table.concat(self.names, ', '))
  if self.world ~= self.n then s = s .. ('; ranks %s of %d'):format(table.concat(self:ranks(), ', '), self.world) end
  return s .. ')'
end

-- (comm.allreduce(list), a '.' for a ':', failed deep inside: said so)
local function me(self, fn)
  if getmetatable(self) ~= Communicator then
    options.raise(('%s: call it as a method, comm:%s(...) (got %s for the communicator)'):format(fn, fn, typename(self)))
  end
end

-- 0-based global rank from a 1-based rank or the name of a local device
local function rank(self, fn, r)
  if type(r) == 'number' and r % 1 == 0 and r >= 1 and r <= self.world then return r - 1 end
  if type(r) == 'string' then
    for i = 1, self.n do if self.names[i] == r then return C.ln_comm_rank(self.handle, i - 1) end end
  end
  error(('%s: rank must be 1..%d or one of the devices %s, got %s'):format(fn, self.world,
    table.concat(self.names, ', '), tostring(r)), 3)
end

local function fill(self, fn, buf, list, what)
  if not is_table(list) then error(('%s: %s must be a list of %d tensors'):format(fn, what, self.n), 3) end
  if #list ~= self.n then
    if self.n == self.world then
      error(('%s: %s has %d tensors, the communicator has %d ranks'):format(fn, what, #list, self.n), 3)
    end
    error(('%s: %s has %d tensors, this process holds %d of the communicator\'s %d ranks'):format(fn, what,
      #list, self.n, self.world), 3)
  end
  for i = 1, self.n do
    local t = list[i]
    if not T.is_tensor(t) then error(('%s: %s[%d] must be a tensor, got %s'):format(fn, what, i, typename(t)), 3) end
    buf[i - 1] = t.p
  end
end

local REDUCE_OPTS = {
  allreduce = { op = 'string', compress = 'string|boolean', async = 'boolean' },
  reduce_scatter = { op = 'string', compress = 'string|boolean' },
}
local BROADCAST_OPTS = { root = 'number|string' }

local function reduce_opts(fn, opts)
  local op, wire = 0, -1
  if opts ~= nil then
    options.check(fn, opts, REDUCE_OPTS[fn])
    if opts.op ~= nil then
      op = ops[opts.op]
      if not op then error(('%s: unknown op %s (sum, avg, max, min)'):format(fn, tostring(opts.op)), 3) end
    end
    if opts.compress ~= nil and opts.compress ~= false then
      wire = wires[opts.compress]
      if not wire then
        error(('%s: unknown compress %s (bf16, fp16)'):format(fn, tostring(opts.compress)), 3)
      end
    end
  end
  return op, wire
end

local function check(rc) if rc ~= 0 then core.raise() end end

-- the n tensors of buf were written in place by a collective: no autograd
-- history records it (as a write under no_grad), but a tensor a backward
-- saved is refused at that backward (autograd.graph.check_saved) rather than
-- differentiated with the values received
local function written(buf, n)
  for i = 0, n - 1 do C.ln_storage_bump_unrecorded(buf[i]) end
end

-- the caller's file:line outside lunet's own files, for a backend across
-- processes to name when ranks call different collectives
local own = debug.getinfo(1, 'S').source:match('^@(.*[/\\])comm%.lua$')
local function site(self)
  if not self.remote then return end
  for lvl = 3, 12 do
    local info = debug.getinfo(lvl, 'Sl')
    if not info then break end
    local src = info.source
    if not own or src:sub(1, 1) ~= '@' or src:sub(2, #own + 1) ~= own then
      C.ln_comm_set_site(self.handle, ('%s:%d'):format(src:gsub('^@', ''), info.currentline))
      return
    end
  end
end

-- allreduce(tensors[, {op = 'sum'|'avg'|'max'|'min', compress = 'bf16'|'fp16',
-- async = true}]): in place. async: queued on the devices' communication
-- streams, after the work queued so far on each compute stream, which goes
-- on meanwhile; call comm:wait() before the compute streams read the results.
function Communicator:allreduce(list, opts)
  me(self, 'allreduce')
  fill(self, 'allreduce', self.buf_a, list, 'tensors')
  local op, wire = reduce_opts('allreduce', opts)
  site(self)
  if opts and opts.async then
    check(C.ln_comm_allreduce_async(self.handle, self.buf_a, op, wire))
  else
    check(C.ln_comm_allreduce(self.handle, self.buf_a, op, wire))
  end
  written(self.buf_a, self.n)
  return list
end

-- wait(): each device's compute stream waits for its communication stream
-- (the async collectives queued so far)
function Communicator:wait() me(self, 'wait'); check(C.ln_comm_wait(self.handle)) end

-- broadcast(tensors[, {root = 1}]): every tensor gets the root's values
function Communicator:broadcast(list, opts)
  me(self, 'broadcast')
  options.check('broadcast', opts, BROADCAST_OPTS)
  fill(self, 'broadcast', self.buf_a, list, 'tensors')
  local root = rank(self, 'broadcast', opts and opts.root or 1)
  site(self)
  check(C.ln_comm_broadcast(self.handle, self.buf_a, root))
  written(self.buf_a, self.n)
  return list
end

-- a list of new tensors, one per local rank, on its device
local function outputs(self, like, numel)
  local r = {}
  for i = 1, self.n do
    r[i] = require('lunet').empty(numel, { dtype = like[i].dtype, device = self.names[i] })
  end
  return r
end

-- reduce_scatter(inputs[, outputs][, opts]): rank r's output = op over ranks of chunk r
function Communicator:reduce_scatter(ins, outs, opts)
  me(self, 'reduce_scatter')
  if opts == nil and is_table(outs) and not T.is_tensor(outs[1]) then outs, opts = nil, outs end
  fill(self, 'reduce_scatter', self.buf_b, ins, 'inputs')
  if outs == nil then
    local m = ins[1]:numel() / self.world
    if m % 1 ~= 0 then
      error(('reduce_scatter: inputs have %d elements, not a multiple of %d ranks'):format(ins[1]:numel(), self.world), 2)
    end
    outs = outputs(self, ins, m)
  end
  fill(self, 'reduce_scatter', self.buf_a, outs, 'outputs')
  local op, wire = reduce_opts('reduce_scatter', opts)
  site(self)
  check(C.ln_comm_reduce_scatter(self.handle, self.buf_a, self.buf_b, op, wire))
  written(self.buf_a, self.n)
  return outs
end

-- allgather(inputs[, outputs]): every output = the inputs of all ranks, flat, in rank order
function Communicator:allgather(ins, outs)
  me(self, 'allgather')
  fill(self, 'allgather', self.buf_b, ins, 'inputs')
  outs = outs or outputs(self, ins, ins[1]:numel() * self.world)
  fill(self, 'allgather', self.buf_a, outs, 'outputs')
  site(self)
  check(C.ln_comm_allgather(self.handle, self.buf_a, self.buf_b))
  written(self.buf_a, self.n)
  return outs
end

-- send(t, dst): the rank on t's device sends to rank dst; recv(t, src) fills t in place
function Communicator:send(t, dst)
  me(self, 'send')
  T.need_tensor('send', t, 'tensor')
  check(C.ln_comm_send(self.handle, t.p, rank(self, 'send', dst)))
end

function Communicator:recv(t, src)
  me(self, 'recv')
  T.need_tensor('recv', t, 'tensor')
  check(C.ln_comm_recv(self.handle, t.p, rank(self, 'recv', src)))
  C.ln_storage_bump_unrecorded(t.p)
  return t
end

function Communicator:barrier()
  me(self, 'barrier')
  site(self)
  check(C.ln_comm_barrier(self.handle))
end

-- How ranks early at this communicator's collectives waited for the last:
-- slept (a thread wake-up then delayed them), awake (woke as the late ones
-- neared the collective on their compute streams and met them awake); counts
-- since it was made, of the work run so far
local meet = ffi.new('int64_t[2]')
function Communicator:meet_stats()
  check(C.ln_comm_meet_stats(self.handle, meet))
  return { slept = tonumber(meet[0]), awake = tonumber(meet[1]) }
end

-- NCCL's version (22803 for 2.28.3), or nil and why it is not available
-- (no CUDA backend; libnccl.so.2 missing: dlopen's message)
function comm.nccl_version()
  local v = C.ln_nccl_version()
  if v < 0 then return nil, ffi.string(C.ln_last_error()) end
  return v
end

-- a new NCCL unique id (256 hex digits): one rank makes it, every rank of
-- the group passes it as rendezvous (lunet.distributed hands it over MPI)
local uid = ffi.new('char[257]')
function comm.nccl_unique_id()
  if C.ln_nccl_unique_id(uid, 257) ~= 0 then core.raise() end
  return ffi.string(uid)
end

comm.ops = ops
return comm
