-- Run by spec/mpi_spec.lua: the last rank kills itself (SIGKILL) in the
-- middle of a loop of all-reduces; every other rank must raise a Lua error
-- naming it ("allreduce: rank 2 (host h, pid p) is gone"), not hang.
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local info = dist.init{timeout = 60}
local R, N = info.rank, info.world_size
local world = dist.world()
local victim = N - 1
local t = lunet.ones({100000})
for step = 1, 1e9 do
  if R == victim and step == 20 then
    io.stdout:write(('rank %d pid %d host %s dies\n'):format(R, info.pid, info.host)); io.stdout:flush()
    os.execute('kill -9 ' .. info.pid)
  end
  local ok, err = pcall(function()
    world:allreduce({t}, {op = 'avg'})
    lunet.synchronize()
  end)
  if not ok then
    io.stdout:write(('rank %d error at step %d: %s\n'):format(R, step, tostring(err))); io.stdout:flush()
    os.exit(3)
  end
end
