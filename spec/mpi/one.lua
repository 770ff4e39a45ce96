-- A plain `luajit script.lua`: a world of one, no MPI loaded (the spec
-- points LUNET_MPI_LIB nowhere: loading it would fail).
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
assert(not dist.is_initialized())
local function fails(want, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok and tostring(err):find(want, 1, true), ('expected %q, got %s'):format(want, tostring(err)))
end
fails('distributed.world: call distributed.init() first', dist.world)
fails('distributed.rank: call distributed.init() first', dist.rank)
fails("distributed.init: unknown option 'timout' (did you mean 'timeout'?)", dist.init, {timout = 3})
fails('distributed.init: timeout must be a number of seconds > 0, got -1', dist.init, {timeout = -1})
fails("distributed.init: option 'timeout' must be a number", dist.init, {timeout = 'x'})
assert(not dist.is_initialized())
local info = dist.init()
assert(dist.init() == info, 'init is idempotent')
assert(dist.rank() == 0 and dist.world_size() == 1 and dist.local_rank() == 0)
assert(type(info.host) == 'string' and info.pid > 0 and info.device == 'cpu:0')
local w = dist.world()
local t = lunet.tensor({1, 2, 3})
w:allreduce({t})
local g = dist.group({0})
local u = lunet.tensor({1, 2, 3})
g:allreduce({u})
dist.barrier()
fails('distributed.group: ranks[1] must be a process rank 0..0, got 1', dist.group, {1})
fails('distributed.group: ranks must be a non-empty list of process ranks (0-based)', dist.group, {})
fails('distributed.group: process rank 0 is listed twice', dist.group, {0, 0})
fails('distributed.group: ranks must be a non-empty list', dist.group, 'x')
print(('rank %d of %d, local %d of %d, launcher %s, backend %s, allreduce %g, group %g'):format(info.rank,
  info.world_size, info.local_rank, info.local_size, info.launcher, w:backend(), t:sum():item(), u:sum():item()))
dist.finalize()
