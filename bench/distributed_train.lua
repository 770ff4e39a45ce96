-- DistributedDataParallel training throughput across processes (issue 20, item 7's training half;
-- bench/distributed.lua, the all-reduce half, calls it as well):
--   luajit bench/distributed_train.lua [--steps S] [--groups G] [--batch B] [--models lenet5,resnet8]
-- For each model, at global batch B (128): images/s of 1 process x 1 core (batch B) and of
-- 2 processes x 1 core each (B / 2 a process, gradients all-reduced by the mpi backend), both
-- launched with mpirun --bind-to core (each process one core, OMP_NUM_THREADS=1), training with
-- ddp:forward_loss(crit, x, y) and SGD; scaling = throughput(2) / (2 x throughput(1)).
-- indep: the same scaling for 2 independent processes (the plain model, B / 2 each, no
-- communication at all): the ceiling of any data-parallel scheme on the machine as it is
-- (other load, memory bandwidth); of-ind = DDP's throughput over that pair's.
-- Time: the best of G groups of S steps, after 8 warm-up steps, each group ended by a barrier.
-- Needs 2 cores; run it on a quiet machine (it prints the load average before and after).
-- As a worker (under mpirun: OMPI_COMM_WORLD_SIZE is set) it times the models and rank 0
-- prints "RESULT <model> <images/s>".
package.path = './lua/?.lua;./lua/?/init.lua;./bench/?.lua;' .. package.path

local args = {}
for i = 1, #arg do
  local k = arg[i]:match('^%-%-(.+)')
  if k then
    local v = arg[i + 1]
    if v == nil or v:match('^%-%-') then v = true end
    args[k] = v
  end
end
local STEPS = tonumber(args.steps) or 5
local GROUPS = tonumber(args.groups) or 5
local BATCH = tonumber(args.batch) or 128
local MODELS = args.models or 'lenet5,resnet8'

local function loadavg()
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or '?'
  if f then f:close() end
  return s:match('^(%S+ %S+ %S+)') or s
end

local M = {}

-- the worker: this process's rank of the world times each model
function M.worker()
  local lunet = require 'lunet'
  local dist = require 'lunet.distributed'
  local models = require 'models'
  local info = dist.init{ threads = 1 }
  local W = info.world_size
  local b = math.floor(BATCH / W)
  for name in MODELS:gmatch('[^,]+') do
    local spec = models[name] or error('unknown model ' .. name)
    lunet.manual_seed(1)
    local indep = os.getenv('LUNET_BENCH_INDEP') ~= nil
    local ddp = lunet.parallel.DistributedDataParallel(spec.build(lunet.nn),
      indep and { group = require('lunet.comm').Communicator({ info.device }) } or nil)
    local opt = lunet.optim.SGD(ddp:parameters(), { lr = 0.01, momentum = 0.9 })
    local crit = lunet.nn.CrossEntropyLoss()
    local shape = { b }
    for i, d in ipairs(spec.input) do shape[i + 1] = d end
    local x, y = lunet.randn(shape), lunet.randint(1, 11, { b })
    local function step()
      opt:zero_grad()
      ddp:forward_loss(crit, x, y):backward()
      opt:step()
    end
    for _ = 1, 8 do step() end
    lunet.synchronize(); dist.barrier()
    local best = math.huge
    for _ = 1, GROUPS do
      local t0 = lunet.clock()
      for _ = 1, STEPS do step() end
      lunet.synchronize(); dist.barrier()
      best = math.min(best, (lunet.clock() - t0) / STEPS)
    end
    -- every rank's time: the slowest counts
    local t = lunet.tensor({ best }, { dtype = 'float64' })
    dist.world():allreduce({ t }, { op = 'max' })
    best = t:item()
    if info.rank == 0 then print(('RESULT %s %.1f'):format(name, b * W / best)); io.stdout:flush() end
  end
  dist.finalize()
end

-- the driver: mpirun -np 1 and -np 2, then the table
function M.run()
  local here = debug.getinfo(1, 'S').source:match('^@(.*)$')
  local function launch(n, indep)
    local cmd = ('%smpirun --allow-run-as-root --bind-to core -np %d -x OMP_NUM_THREADS=1 -x LUA_PATH%s luajit %s '
      .. '--steps %d --groups %d --batch %d --models %s 2>&1'):format(indep and 'LUNET_BENCH_INDEP=1 ' or '', n,
      indep and ' -x LUNET_BENCH_INDEP' or '', here, STEPS, GROUPS, BATCH, MODELS)
    local p = io.popen(cmd)
    local out = p:read('*a')
    p:close()
    local r = {}
    for name, v in out:gmatch('RESULT (%S+) (%S+)') do r[name] = tonumber(v) end
    if not next(r) then error('bench/distributed_train.lua: no result from ' .. cmd .. ':\n' .. out) end
    return r
  end
  local before = loadavg()
  local one, two, ind = launch(1), launch(2), launch(2, true)
  print(('DistributedDataParallel training, global batch %d, best of %d x %d steps (load %s before, %s after)')
    :format(BATCH, GROUPS, STEPS, before, loadavg()))
  print(('%-10s %12s %12s %9s %9s %8s'):format('model', '1x1 img/s', '2x1 img/s', 'scaling', 'indep', 'of-ind'))
  for name in MODELS:gmatch('[^,]+') do
    print(('%-10s %12.0f %12.0f %8.1f%% %8.1f%% %7.1f%%'):format(name, one[name], two[name],
      100 * two[name] / (2 * one[name]), 100 * ind[name] / (2 * one[name]), 100 * two[name] / ind[name]))
  end
end

if os.getenv('OMPI_COMM_WORLD_SIZE') then M.worker()
elseif arg and arg[0] and arg[0]:match('distributed_train%.lua$') then M.run() end   -- (else the caller runs M.run)
return M
