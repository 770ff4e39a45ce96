-- lunet.distributed: processes as ranks (torch.distributed's role).
--   local dist = require 'lunet.distributed'
--   local info = dist.init{timeout = 300}   -- under mpirun / srun, or alone
--   local world = dist.world()              -- a lunet.comm Communicator
--   world:allreduce({grad}, {op = 'avg'})
-- Launch: `mpirun -np 4 luajit train.lua` (Open MPI), `srun -n 4 luajit
-- train.lua` (Slurm with PMI); a plain `luajit train.lua` is a world of one,
-- which needs no MPI at all. Ranks here (dist.rank(), dist.group's list) are
-- 0-based process ranks, as MPI, PyTorch and the launchers number them;
-- lunet.comm's methods number a communicator's ranks from 1 (process rank r
-- is rank r + 1 of dist.world(); of a group, its place in the list + 1).
-- Each process takes cpu:0 with its share of the cores: the cores it may run
-- on over the processes on its host, unless OMP_NUM_THREADS is set.
-- With device = 'cuda' (cuda:<local rank>) or 'cuda:i', world() and group()
-- are NCCL communicators over the processes' GPUs: the first process of the
-- group makes NCCL's unique id and MPI hands it to the others.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table = core.is_table
local options = require 'lunet.options'
local comm = require 'lunet.comm'
local C = core.C

local M = {}
-- resolved now: at exit the library's namespace may be collected before M's finalizer runs
local dist_finalize, sync_all = C.ln_dist_finalize, C.ln_sync_all
local state          -- the info table once initialised
local world_comm
local INIT_OPTS = { timeout = 'number', device = 'string', threads = 'number' }

local function envnum(...)
  for i = 1, select('#', ...) do
    local v = tonumber(os.getenv((select(i, ...))) or '')
    if v then return v end
  end
end

-- rank, size, local rank, local size from the launcher's environment (nil: none)
local function launcher()
  local size = envnum('OMPI_COMM_WORLD_SIZE')
  if size then
    return 'mpirun', envnum('OMPI_COMM_WORLD_RANK'), size, envnum('OMPI_COMM_WORLD_LOCAL_RANK') or 0,
      envnum('OMPI_COMM_WORLD_LOCAL_SIZE') or 1
  end
  size = envnum('PMIX_SIZE', 'PMI_SIZE', 'SLURM_NTASKS')
  if size then
    local rank = envnum('PMIX_RANK', 'PMI_RANK', 'SLURM_PROCID')
    local lsize = envnum('MPI_LOCALNRANKS', 'SLURM_NTASKS_PER_NODE')
    if not lsize and os.getenv('SLURM_TASKS_PER_NODE') then
      lsize = tonumber(os.getenv('SLURM_TASKS_PER_NODE'):match('^(%d+)'))
    end
    return 'pmi', rank or 0, size, envnum('MPI_LOCALRANKID', 'SLURM_LOCALID') or 0, lsize or 1
  end
end

-- init{timeout = seconds (default 300: how long a collective waits for peers
-- that live; a lost peer is reported at once), device = 'cpu:0' | 'cuda'
-- (cuda:<local rank>) | 'cuda:i', threads = n (of cpu:0)}
function M.init(opts)
  options.check('distributed.init', opts, INIT_OPTS)
  opts = opts or {}
  local timeout = opts.timeout or 300
  if type(timeout) ~= 'number' or timeout <= 0 or timeout ~= timeout then
    error('distributed.init: timeout must be a number of seconds > 0, got ' .. tostring(opts.timeout), 2)
  end
  if state then
    if opts.timeout and state.world_size > 1 and C.ln_dist_init(timeout, ffi.new('int[1]'), ffi.new('int[1]')) ~= 0 then
      core.raise()
    end
    return state
  end
  local how, rank, size, lrank, lsize = launcher()
  local info = { rank = 0, world_size = 1, local_rank = 0, local_size = 1, launcher = how or 'none' }
  if how and size > 1 then
    local r, s = ffi.new('int[1]'), ffi.new('int[1]')
    if C.ln_dist_init(timeout, r, s) ~= 0 then core.raise() end
    info.rank, info.world_size, info.local_rank, info.local_size = r[0], s[0], lrank, lsize
    if rank and rank ~= r[0] then
      error(('distributed.init: the launcher says rank %d, MPI says %d'):format(rank, r[0]), 2)
    end
    local host, pid = ffi.new('char[256]'), ffi.new('int[1]')
    if C.ln_dist_peer(r[0], host, 256, pid) ~= 0 then core.raise() end
    info.host, info.pid = ffi.string(host), pid[0]
  else
    local f = io.popen('hostname 2>/dev/null')
    info.host = f and f:read('*l') or '?'
    if f then f:close() end
    local st = io.open('/proc/self/stat')
    info.pid = st and tonumber(st:read('*a'):match('^(%d+)')) or 0
    if st then st:close() end
  end
  info.device = opts.device == 'cuda' and 'cuda:' .. info.local_rank or opts.device or 'cpu:0'
  core.device_id('distributed.init', info.device)
  local host_dev = info.device:match('^cuda') and 'cpu:0' or info.device
  local threads = opts.threads
  if not threads and not os.getenv('OMP_NUM_THREADS') then
    -- (ln_num_cores: the cores this process may run on; mpirun binds each of 2 ranks to one)
    threads = math.max(1, math.floor(C.ln_num_cores() / info.local_size))
  end
  if threads then require('lunet').set_num_threads(threads, host_dev) end
  info.threads = require('lunet').get_num_threads(host_dev)
  state = info
  return info
end

local function need(fn)
  if not state then error(fn .. ': call distributed.init() first', 3) end
  return state
end

function M.is_initialized() return state ~= nil end
function M.rank() return need('distributed.rank').rank end
function M.world_size() return need('distributed.world_size').world_size end
function M.local_rank() return need('distributed.local_rank').local_rank end
function M.info() return need('distributed.info') end

-- The sharding a DataLoader made from now on takes by default (num_replicas,
-- rank): the world's, or the one a Pipeline across processes sets (its
-- ranks read the same batches, each pipeline its shard)
local data_shard
function M.data_shard()
  local s = need('distributed.data_shard')
  if data_shard then return data_shard[1], data_shard[2] end
  return s.world_size, s.rank
end
function M.set_data_shard(num_replicas, rank)
  need('distributed.set_data_shard')
  if type(num_replicas) ~= 'number' or num_replicas < 1 or num_replicas % 1 ~= 0 or type(rank) ~= 'number'
      or rank < 0 or rank >= num_replicas or rank % 1 ~= 0 then
    error(('distributed.set_data_shard: expected num_replicas >= 1 and 0 <= rank < num_replicas, got %s, %s'):format(
      tostring(num_replicas), tostring(rank)), 2)
  end
  data_shard = { num_replicas, rank }
end

-- NCCL's unique id for a group: its first process (mine == 1: this
-- process's 1-based place in it) makes it, mpi_comm (the group over MPI, on
-- cpu:0) hands it to the others
local function nccl_id(mpi_comm, mine)
  local lunet = require 'lunet'
  local id = lunet.zeros(256, { dtype = 'uint8', device = 'cpu:0' })
  if mine == 1 then id:copy_(lunet.tensor({ comm.nccl_unique_id():byte(1, -1) }, { dtype = 'uint8' })) end
  mpi_comm:broadcast({ id }, { root = 1 })
  return string.char(unpack(id:totable()))
end
M._nccl_id = nccl_id   -- (spec/mpi/nccl_id.lua checks the hand-over without GPUs)

-- the group's NCCL communicator over this process's GPU
local function nccl_group(s, mpi_comm, size, mine)
  return comm.Communicator({ s.device }, { backend = 'nccl', world_size = size, ranks = { mine },
    rendezvous = nccl_id(mpi_comm, mine) })
end

-- every process, as one Communicator (backend 'mpi'; 'local' in a world of
-- one; 'nccl' where the device is a GPU)
function M.world()
  local s = need('distributed.world')
  if not world_comm then
    local gpu = s.device:match('^cuda')
    if s.world_size == 1 then world_comm = comm.Communicator({ s.device })
    elseif gpu then
      world_comm = nccl_group(s, comm.Communicator({ 'cpu:0' }, { backend = 'mpi' }), s.world_size, s.rank + 1)
    else world_comm = comm.Communicator({ s.device }, { backend = 'mpi' }) end
  end
  return world_comm
end

-- group(ranks): the processes listed (0-based process ranks), in that order,
-- as a Communicator; called by those processes only (others get nil)
function M.group(ranks)
  local s = need('distributed.group')
  if not is_table(ranks) or #ranks == 0 then
    error('distributed.group: ranks must be a non-empty list of process ranks (0-based)', 2)
  end
  local mine, seen = nil, {}
  for i, r in ipairs(ranks) do
    if type(r) ~= 'number' or r % 1 ~= 0 or r < 0 or r >= s.world_size then
      error(('distributed.group: ranks[%d] must be a process rank 0..%d, got %s'):format(i, s.world_size - 1,
        tostring(r)), 2)
    end
    if seen[r] then error(('distributed.group: process rank %d is listed twice'):format(r), 2) end
    seen[r] = true
    if r == s.rank then mine = i end
  end
  if not mine then return nil end
  if s.world_size == 1 then return comm.Communicator({ s.device }) end
  if s.device:match('^cuda') then
    return nccl_group(s, comm.Communicator({ 'cpu:0' }, { backend = 'mpi', rendezvous = table.concat(ranks, ',') }),
      #ranks, mine)
  end
  return comm.Communicator({ s.device }, { backend = 'mpi', rendezvous = table.concat(ranks, ',') })
end

function M.barrier()
  local w = M.world()
  w:barrier()
  require('lunet').synchronize(state.device)
end

-- finalize(): MPI ends (collectives still queued run first); also at exit
function M.finalize()
  if not state then return end
  local rc = world_comm and sync_all() or 0
  world_comm = nil
  if state.world_size > 1 and dist_finalize() ~= 0 then core.raise() end
  if rc ~= 0 then core.raise() end
end

-- at exit (lua_close collects it): Open MPI counts a process that ends
-- without MPI_Finalize as failed
local at_exit = newproxy(true)
getmetatable(at_exit).__gc = function() pcall(M.finalize) end
M[at_exit] = true

return M
