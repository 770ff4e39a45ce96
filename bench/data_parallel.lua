-- DataParallel scaling on virtual CPU devices (make bench).
--   luajit bench/data_parallel.lua [--steps S] [--groups G] [--rounds R] [--batch B] [--bucket-mb M] [--models seed,lenet5,resnet8]
--     [--comm]
-- For each model at global batch B (128):
--   efficiency = throughput(2 devices x 1 core) / (2 x throughput(1 device x 1 core))
--   hidden     = share of the all-reduce time hidden behind backward:
--                1 - (step(DataParallel) - step(no all-reduce)) / time(all-reduce of every gradient alone)
-- With --comm, then the all-reduce bandwidth for 1-256 MB beside memcpy
-- (bench/comm.lua, which `make bench` also runs on its own).
-- Needs 2 cores; run it on a quiet machine (see `uptime`).
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local lunet = require 'lunet'
local nn, optim = lunet.nn, lunet.optim
local C = lunet.C

local args = {}
for i = 1, #arg do
  local k = arg[i]:match('^%-%-(.+)')
  if k then
    local v = arg[i + 1]
    if v == nil or v:match('^%-%-') then v = true end
    args[k] = v
  end
end
local STEPS = tonumber(args.steps) or 3     -- steps per timed group
local GROUPS = tonumber(args.groups) or 5   -- timed groups per measurement (the best counts)
local ROUNDS = tonumber(args.rounds) or 2
local BATCH = tonumber(args.batch) or 128
local BUCKET_MB = tonumber(args['bucket-mb']) or 25
local OVERLAP_MB = tonumber(args['overlap-bucket-mb']) or 0.05

local models = {
  seed = { shape = { 3, 32, 32 }, make = function()
    return nn.Sequential { nn.Conv2d(3, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
      nn.Linear(16 * 16 * 16, 10) }
  end },
  lenet5 = { shape = { 1, 32, 32 }, make = function()
    return nn.Sequential { nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
      nn.Linear(84, 10) }
  end },
  resnet8 = { shape = { 3, 32, 32 }, make = function()
    return nn.Sequential { nn.Conv2d(3, 16, 3, { padding = 1, bias = false }), nn.BatchNorm2d(16), nn.ReLU(),
      nn.BasicBlock(16, 16, 1), nn.BasicBlock(16, 32, 2), nn.BasicBlock(32, 64, 2),
      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10) }
  end },
}
local order = {}
for name in (args.models or 'seed,lenet5,resnet8'):gmatch('[^,]+') do
  if not models[name] then error('unknown model ' .. name) end
  order[#order + 1] = name
end

local function free_all()
  jit.flush()
  for _ = 1, 4 do collectgarbage() end
  lunet.synchronize()
end

local function batch(shape)
  local s = { BATCH }
  for i, d in ipairs(shape) do s[i + 1] = d end
  return lunet.randn(s), lunet.randint(1, 11, { BATCH })
end

-- seconds per training step (median of a few timed groups after a warm-up)
local function time_steps(model, params, x, y, opts)
  local opt = optim.SGD(params, { lr = 0.01, momentum = 0.9 })
  local crit = nn.CrossEntropyLoss()
  local function step()
    opt:zero_grad()
    local go = function() crit(model(x), y):backward() end
    if opts and opts.no_sync then model:no_sync(go) else go() end
    opt:step()
  end
  step(); step()
  lunet.synchronize()
  local best = math.huge
  for _ = 1, GROUPS do
    local t0 = lunet.clock()
    for _ = 1, STEPS do step() end
    lunet.synchronize()
    best = math.min(best, (lunet.clock() - t0) / STEPS)
  end
  return best
end

-- seconds for the all-reduce of every gradient bucket alone
local function time_allreduce(dp)
  local function once()
    for _, b in ipairs(dp.buckets) do dp.comm:allreduce(b.flat, { op = 'avg', compress = dp.compress }) end
  end
  once(); lunet.synchronize()
  local best = math.huge
  for _ = 1, 5 do
    local t0 = lunet.clock()
    for _ = 1, 4 do once() end
    lunet.synchronize()
    best = math.min(best, (lunet.clock() - t0) / 4)
  end
  return best
end

-- CPU used by other processes while this runs (from /proc; Linux only):
-- figures taken while others were busy are not this library's
local function cpu_ticks()
  local f = io.open('/proc/stat'); if not f then return nil end
  local line = f:read('*l'); f:close()
  local v = {}
  for x in line:gmatch('%d+') do v[#v + 1] = tonumber(x) end
  local busy = v[1] + v[2] + v[3] + (v[6] or 0) + (v[7] or 0) + (v[8] or 0)
  local g = io.open('/proc/self/stat'); local st = g:read('*l'); g:close()
  local rest = st:match('%) (.*)')
  local fields = {}
  for x in rest:gmatch('%S+') do fields[#fields + 1] = x end
  return busy, v[1] + v[2] + v[3] + v[4] + (v[5] or 0) + (v[6] or 0) + (v[7] or 0) + (v[8] or 0),
    tonumber(fields[12]) + tonumber(fields[13])
end
local busy0, total0, own0 = cpu_ticks()

local f = io.popen('uptime'); local up = f:read('*l') or ''; f:close()
print(('lunet %s DataParallel bench: global batch %d, best of %d rounds x %d groups of %d steps, %d cores; %s'):format(
  lunet.version, BATCH, ROUNDS, GROUPS, STEPS, C.ln_num_cores(), up:match('load average.*') or up))

-- rounds alternate the two configurations, so that a burst of load from
-- elsewhere hits both; each figure is the best seen
local one, two, ov, nc, ar, nb, np = {}, {}, {}, {}, {}, {}, {}
local function keep(t, k, v) t[k] = math.min(t[k] or math.huge, v) end
for _ = 1, ROUNDS do
  -- one device, one core
  lunet.set_cpu_devices(1)
  C.ln_set_device_threads(0, 1)
  for _, name in ipairs(order) do
    lunet.manual_seed(1)
    local m = models[name].make()
    local x, y = batch(models[name].shape)
    keep(one, name, time_steps(m, m:parameters(), x, y))
    np[name] = m:num_parameters()
  end
  free_all()
  -- two devices, one core each
  lunet.set_cpu_devices(2)
  C.ln_set_device_threads(0, 1); C.ln_set_device_threads(1, 1)
  for _, name in ipairs(order) do
    lunet.manual_seed(1)
    local x, y = batch(models[name].shape)
    local dp = lunet.parallel.DataParallel(models[name].make(), { bucket_mb = BUCKET_MB })
    keep(two, name, time_steps(dp, dp:parameters(), x, y))
    -- the hidden share with small buckets (these models are far below 25 MB)
    local dpo = lunet.parallel.DataParallel(models[name].make(), { bucket_mb = OVERLAP_MB })
    keep(ov, name, time_steps(dpo, dpo:parameters(), x, y))
    keep(nc, name, time_steps(dpo, dpo:parameters(), x, y, { no_sync = true }))
    keep(ar, name, time_allreduce(dpo))
    nb[name] = #dpo.buckets
    dp, dpo = nil, nil
    free_all()
  end
end

local head = ('%-8s %8s %11s %11s %7s %9s %9s %9s %9s %7s'):format('model', 'params', '1dev img/s',
  '2dev img/s', 'eff', 'step 2dev', 'no-comm', 'small-bkt', 'allred', 'hidden')
print(head)
print(('-'):rep(#head))
for _, name in ipairs(order) do
  local best2 = math.min(two[name], ov[name])
  local hidden = 1 - math.max(0, math.min(1, (ov[name] - nc[name]) / ar[name]))
  print(('%-8s %8d %11.1f %11.1f %6.1f%% %8.2fms %8.2fms %8.2fms %8.3fms %6.0f%%'):format(name, np[name],
    BATCH / one[name], BATCH / best2, 100 * one[name] / (2 * best2), 1e3 * two[name], 1e3 * nc[name],
    1e3 * ov[name], 1e3 * ar[name], 100 * hidden))
end
print(('(eff uses the better of bucket_mb %g and %g; no-comm = the same steps inside dp:no_sync;'):format(
  BUCKET_MB, OVERLAP_MB))
print((' small-bkt = bucket_mb %g; allred = all-reduce of every gradient alone; hidden = 1 - (small-bkt - no-comm) / allred)'):format(OVERLAP_MB))
lunet.set_cpu_devices(1)
if busy0 then
  local busy1, total1, own1 = cpu_ticks()
  local others = math.max(0, (busy1 - busy0) - (own1 - own0)) / math.max(1, total1 - total0)
  print(('other processes used %.0f%% of the machine\'s CPU during the run%s'):format(100 * others,
    others > 0.05 and ' (CONTENDED: rerun on a quiet machine)' or ''))
end

if args.comm then
  print()
  io.stdout:flush()
  os.execute('luajit bench/comm.lua --runs 3')
end
