-- Run by spec/mpi_spec.lua: the last rank ends with a Lua error while the
-- others go on calling collectives; they must fail naming it within seconds
-- (its exit ends its MPI and tells them), not wait for the timeout.
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local info = dist.init{timeout = 120}
local R, N = info.rank, info.world_size
local world = dist.world()
local t = lunet.ones({1000})
for step = 1, 1e9 do
  if R == N - 1 and step == 5 then
    io.stdout:write(('rank %d pid %d raises\n'):format(R, info.pid)); io.stdout:flush()
    error('a bug in the last rank')
  end
  local ok, err = pcall(function() world:allreduce({t}); lunet.synchronize() end)
  if not ok then
    io.stdout:write(('rank %d error at step %d: %s\n'):format(R, step, tostring(err))); io.stdout:flush()
    os.exit(3)
  end
end
