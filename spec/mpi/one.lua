-- A plain `luajit script.lua`: a world of one, no MPI loaded (the spec
-- points LUNET_MPI_LIB nowhere: loading it would fail).
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
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
for _, bad in ipairs({{1}, {}, {0, 0}, 'x'}) do
  assert(not pcall(dist.group, bad))
end
print(('rank %d of %d, local %d of %d, launcher %s, backend %s, allreduce %g, group %g'):format(info.rank,
  info.world_size, info.local_rank, info.local_size, info.launcher, w:backend(), t:sum():item(), u:sum():item()))
dist.finalize()
