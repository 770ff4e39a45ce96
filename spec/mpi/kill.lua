-- Run by spec/mpi_spec.lua: the last rank kills itself (SIGKILL) in the
-- middle of a loop of all-reduces; every other rank must raise a Lua error
-- naming it ("allreduce: rank 2 (host h, pid p) is gone"), not hang.
local lunet = require 'lunet'
local ffi = require 'ffi'
pcall(ffi.cdef, 'void _exit(int status);')
local dist = require 'lunet.distributed'
local info = dist.init{timeout = 60}
local R, N = info.rank, info.world_size
local world = dist.world()
local victim = N - 1
local t = lunet.ones({100000})
-- each report also goes to a file of its own (SPEC_REPORT_DIR): mpirun ends
-- the job as soon as one rank dies or fails, and can lose the lines the
-- others have written to stdout by then
local function report(line)
  io.stdout:write(line); io.stdout:flush()
  local dir = os.getenv('SPEC_REPORT_DIR')
  local f = dir and io.open(('%s/rank%d'):format(dir, R), 'a')
  if f then f:write(line); f:close() end
end
for step = 1, 1e9 do
  if R == victim and step == 20 then
    report(('rank %d pid %d host %s dies\n'):format(R, info.pid, info.host))
    os.execute('kill -9 ' .. info.pid)
  end
  local ok, err = pcall(function()
    world:allreduce({t}, {op = 'avg'})
    lunet.synchronize()
  end)
  if not ok then
    report(('rank %d error at step %d: %s\n'):format(R, step, tostring(err)))
    -- (_exit: the exit handlers' MPI_Finalize would wait for the dead rank,
    -- and mpirun, told not to end the job when one rank dies, with it)
    ffi.C._exit(3)
  end
end
