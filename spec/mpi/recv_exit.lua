-- Run by spec/mpi_spec.lua: rank 1 ends with a Lua error while rank 0 waits
-- to receive from it; rank 0 must fail naming it, and saying that a recv
-- (not a numbered collective) waited, within seconds.
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local info = dist.init{timeout = 120}
local world = dist.world()
if info.rank == 1 then
  io.stdout:write(('rank 1 pid %d raises\n'):format(info.pid)); io.stdout:flush()
  error('a bug in rank 1')
end
local t = lunet.zeros({1000})
-- (the Lua API counts ranks from 1: rank 2 is MPI's rank 1)
local ok, err = pcall(function() world:recv(t, 2); lunet.synchronize() end)
io.stdout:write(('rank 0 recv: %s\n'):format(ok and 'returned' or tostring(err))); io.stdout:flush()
os.exit(ok and 0 or 3)
