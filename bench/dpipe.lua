-- A Pipeline across processes (issue 20): its throughput against one
-- process, and what fit's per-step agreement costs it.
--   luajit bench/dpipe.lua [--models wide,lenet5,resnet8] [--groups 7]
-- Launches itself under mpirun (one core a rank, Open MPI's default binding
-- for 2 ranks; OMP_NUM_THREADS=1, one virtual device a rank). Per model, at
-- batch 64 (wide: 256, as bench/pipeline.lua's target):
--   - 1 process training the plain model, against 2 processes running a
--     2-stage pipeline over them (balance = 'time', 8 micro-batches, 1F1B);
--     throughput ratio (the in-process pipeline over 2 virtual devices is
--     bench/pipeline.lua's figure);
--   - the pipeline's step with and without pipe:any_rank(false) after it
--     (fit does it each step so that every rank stops at the step where one
--     saw Ctrl-C), in alternating groups each started by a barrier.
-- Each figure: the median of the groups.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path

local args = {}
for i = 1, #arg do if arg[i]:match('^%-%-') then args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end end

if not os.getenv('OMPI_COMM_WORLD_SIZE') then
  local function sh(cmd)
    local p = io.popen(cmd .. ' 2>&1')
    local out = p:read('*a')
    return out, p:close()
  end
  if not sh('command -v mpirun'):match('mpirun') then
    print('dpipe: Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev); skipped')
    return
  end
  local root = sh('id -u'):match('^0') and '--allow-run-as-root ' or ''
  local f = io.open('/proc/loadavg')
  print('dpipe: load average ' .. (f and f:read('*l') or '?'))
  if f then f:close() end
  for name in tostring(args.models or 'wide,lenet5,resnet8'):gmatch('[^,]+') do
    local res = {}
    for _, np in ipairs({ 1, 2 }) do
      local out, ok = sh(('MODEL=%s GROUPS=%s OMP_NUM_THREADS=1 LUNET_CPU_DEVICES=1 mpirun %s--oversubscribe -np %d luajit %s')
        :format(name, tostring(args.groups or 7), root, np, arg[0]))
      if not ok then error('dpipe: the ranks failed:\n' .. out) end
      res[np] = out
    end
    local one = tonumber(res[1]:match('STEP ([%d.]+)'))
    local with, without, counts = res[2]:match('AGREE ([%d.]+) ([%d.]+) (%S+)')
    with, without = tonumber(with), tonumber(without)
    print(('dpipe: %s: 1 process %.2f ms a step; 2 processes, a 2-stage pipeline %s: %.2f ms (%.2fx); '
      .. 'with any_rank after each step %.2f ms (%+.1f%%)'):format(name, one, counts, without, one / without, with,
      (with / without - 1) * 100))
  end
  return
end

local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local nn, optim = lunet.nn, lunet.optim
local info = dist.init{ timeout = 60 }
local R, W = info.rank, info.world_size
local world = dist.world()
local name = os.getenv('MODEL') or 'lenet5'
local GROUPS = tonumber(os.getenv('GROUPS')) or 7
local models = {
  lenet5 = { 64, { 1, 32, 32 }, function() return nn.Sequential { nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84),
    nn.ReLU(), nn.Linear(84, 10) } end },
  resnet8 = { 64, { 3, 32, 32 }, function() return nn.Sequential { nn.Conv2d(3, 16, 3, { padding = 1, bias = false }),
    nn.BatchNorm2d(16), nn.ReLU(), nn.BasicBlock(16, 16, 1), nn.BasicBlock(16, 32, 2), nn.BasicBlock(32, 64, 2),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10) } end },
  wide = { 256, { 3, 32, 32 }, function() return nn.Sequential {
    nn.Conv2d(3, 32, 3, { padding = 1 }), nn.ReLU(), nn.Conv2d(32, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, { padding = 1 }), nn.ReLU(), nn.Conv2d(64, 64, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10) } end },
}
local spec = models[name] or error('dpipe: no model ' .. name)
local B, shape = spec[1], spec[2]
local x = lunet.randn({ B, shape[1], shape[2], shape[3] })
local y = lunet.randint(1, 11, { B })
local crit = nn.CrossEntropyLoss()
local m = spec[3]()
local step, pipe
if W == 1 then
  local opt = optim.Adam(m:parameters(), { lr = 1e-4 })
  step = function() opt:zero_grad(); crit(m(x), y):backward(); opt:step() end
else
  pipe = lunet.parallel.Pipeline(m, { group = world, chunks = 8, schedule = '1f1b', balance = 'time',
    sample = R == 0 and x or nil })
  local opt = optim.Adam(pipe:parameters(), { lr = 1e-4 })
  local xr, yr = R == 0 and x or nil, R == W - 1 and y or nil
  step = function() opt:zero_grad(); pipe:forward_loss(crit, xr, yr):backward(); opt:step() end
end
for _ = 1, 5 do step() end
lunet.synchronize()
local t0 = lunet.clock()
step()
lunet.synchronize()
-- groups of about a quarter second (every rank the same count: the most any asks)
local n = lunet.tensor({ math.max(3, math.ceil(0.25 / (lunet.clock() - t0))) }, { dtype = 'float64' })
world:allreduce({ n }, { op = 'max' })
local N = n:item()
local function group(agree)
  lunet.synchronize()
  world:barrier()
  local t = lunet.clock()
  for _ = 1, N do
    step()
    if agree then pipe:any_rank(false) end
  end
  lunet.synchronize()
  return (lunet.clock() - t) / N
end
local function median(xs) table.sort(xs); return xs[math.floor((#xs + 1) / 2)] end
if W == 1 then
  local ts = {}
  for g = 1, GROUPS do ts[g] = group(false) end
  print(('STEP %.4f'):format(median(ts) * 1e3))
else
  local with, without = {}, {}
  for g = 1, GROUPS do
    for _, agree in ipairs({ g % 2 == 0, g % 2 == 1 }) do
      local list = agree and with or without
      list[#list + 1] = group(agree)
    end
  end
  if R == 0 then print(('AGREE %.4f %.4f {%s}'):format(median(with) * 1e3, median(without) * 1e3, table.concat(pipe.counts, ','))) end
end
