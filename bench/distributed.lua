-- Distributed training across processes (make bench). All-reduce half:
-- lunet's mpi backend (lunet.distributed, comm:allreduce across processes)
-- against Open MPI's own MPI_Allreduce timed by bench/mpi_allreduce.c, the
-- same sizes in the same run, launches alternated. For a float32 buffer of S
-- bytes per rank summed in place, the figure is S / time (GB/s, 1e9 bytes),
-- nccl-tests' algorithm bandwidth; lunet's time includes its signature
-- exchange and the synchronisation that reads the result.
--   luajit bench/distributed.lua [--np 2] [--runs R] [--sizes 64,256] [--best]
-- (--best: the fastest run of each instead of the median, for a loaded machine;
-- then the training half, bench/distributed_train.lua, unless --no-train)
-- Run by itself under mpirun (OMPI_COMM_WORLD_SIZE set) it is the ranks'
-- program of the lunet side.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path

local args = {}
for i = 1, #arg do if arg[i]:match('^%-%-') then args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end end
local NP = tonumber(args.np) or 2
local RUNS = tonumber(args.runs) or 5
local SIZES = {}
for mb in tostring(args.sizes or '64,256'):gmatch('[%d.]+') do SIZES[#SIZES + 1] = tonumber(mb) end

-- ---- the ranks: lunet's side ----------------------------------------------------------
if os.getenv('OMPI_COMM_WORLD_SIZE') then
  local ffi = require 'ffi'
  local lunet = require 'lunet'
  local dist = require 'lunet.distributed'
  local info = dist.init()
  local world = dist.world()
  if not pcall(ffi.typeof, 'struct lunet_bench_timespec') then
    ffi.cdef [[
      struct lunet_bench_timespec { long tv_sec; long tv_nsec; };
      int lunet_bench_clock(int clk, struct lunet_bench_timespec *ts) __asm__("clock_gettime");
    ]]
  end
  local ts = ffi.new('struct lunet_bench_timespec')
  local function now()
    ffi.C.lunet_bench_clock(1, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
  end
  for _, mb in ipairs(SIZES) do
    local n = math.floor(mb * 1e6 / 4)
    local x = lunet.arange(n):float():fmod(7) * 1e-3
    world:allreduce({x}); lunet.synchronize()   -- warm-up
    for _ = 1, RUNS do
      world:barrier(); lunet.synchronize()
      local t0 = now()
      world:allreduce({x})
      lunet.synchronize()
      local t = now() - t0
      if info.rank == 0 then print(('lunet_mpi %d %.6f'):format(n * 4, t)) end
    end
  end
  dist.finalize()
  return
end

-- ---- the driver -------------------------------------------------------------------------
local function sh(cmd)
  local p = io.popen(cmd .. ' 2>&1')
  local out = p:read('*a')
  local ok = p:close()
  return out, ok
end
if not sh('command -v mpirun'):match('mpirun') then
  print('distributed: Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev); skipped')
  return
end
local exe = 'build/bench_mpi_allreduce'
local out, ok = sh('mpicc -O2 bench/mpi_allreduce.c -o ' .. exe)
if not ok then error('distributed: cannot build ' .. exe .. ':\n' .. out) end
local root = sh('id -u'):match('^0') and '--allow-run-as-root ' or ''
local mpirun = ('mpirun %s--oversubscribe -np %d '):format(root, NP)
local sizes = table.concat(SIZES, ' ')

local times = { mpi_allreduce = {}, lunet_mpi = {} }
local function collect(text)
  for who, bytes, t in text:gmatch('(%S+) (%d+) ([%d.]+)\n') do
    if times[who] then
      local b = tonumber(bytes)
      times[who][b] = times[who][b] or {}
      table.insert(times[who][b], tonumber(t))
    end
  end
end
-- alternate the two programs, one run each per launch, so both see the same load
for _ = 1, RUNS do
  local o1, ok1 = sh(('%s %s 1 %s'):format(mpirun, exe, sizes))
  if not ok1 then error('distributed: ' .. exe .. ' failed:\n' .. o1) end
  collect(o1)
  local o2, ok2 = sh(('%s luajit bench/distributed.lua --runs 1 --sizes %s'):format(mpirun, table.concat(SIZES, ',')))
  if not ok2 then error('distributed: the lunet ranks failed:\n' .. o2) end
  collect(o2)
end

local function pick(list)
  table.sort(list)
  return args.best and list[1] or list[math.floor((#list + 1) / 2)]
end
print(('all-reduce across %d processes (%s of %d runs), in place, float32 sum; GB/s = bytes per rank / time')
  :format(NP, args.best and 'fastest' or 'median', RUNS))
print(('%10s %14s %14s %8s'):format('size', 'MPI_Allreduce', 'lunet mpi', 'ratio'))
for _, mb in ipairs(SIZES) do
  local b = math.floor(mb * 1e6 / 4) * 4
  local a, l = times.mpi_allreduce[b], times.lunet_mpi[b]
  if a and l then
    local ta, tl = pick(a), pick(l)
    print(('%8g MB %11.2f GB/s %9.2f GB/s %7.1f%%'):format(mb, b / ta / 1e9, b / tl / 1e9, 100 * ta / tl))
  end
end

-- the training half (DistributedDataParallel: 1 process x 1 core against 2 x 1 core)
if not args['no-train'] then
  print()
  dofile('bench/distributed_train.lua').run()
end
