-- DataParallel scaling on virtual CPU devices (make bench).
--   luajit bench/data_parallel.lua [--steps S] [--batch B] [--bucket-mb M] [--models seed,lenet5,resnet8]
--     [--no-comm-bench]
-- For each model at global batch B (128):
--   efficiency = throughput(2 devices x 1 core) / (2 x throughput(1 device x 1 core))
--   hidden     = share of the all-reduce time hidden behind backward:
--                1 - (step(DataParallel) - step(no all-reduce)) / time(all-reduce of every gradient alone)
-- then the all-reduce bandwidth for 1-256 MB beside memcpy (bench/comm.lua).
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
local STEPS = tonumber(args.steps) or 4
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
  for _ = 1, 2 do
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
    for _, b in ipairs(dp.buckets) do dp.comm:allreduce(b.flat, { op = 'sum', compress = dp.compress }) end
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

local f = io.popen('uptime'); local up = f:read('*l') or ''; f:close()
print(('lunet %s DataParallel bench: global batch %d, %d timed steps x 2 (best), %d cores; %s'):format(
  lunet.version, BATCH, STEPS, C.ln_num_cores(), up:match('load average.*') or up))

-- one device, one core
lunet.set_cpu_devices(1)
C.ln_set_device_threads(0, 1)
local one = {}
for _, name in ipairs(order) do
  lunet.manual_seed(1)
  local m = models[name].make()
  local x, y = batch(models[name].shape)
  one[name] = time_steps(m, m:parameters(), x, y)
end
free_all()

-- two devices, one core each
lunet.set_cpu_devices(2)
C.ln_set_device_threads(0, 1); C.ln_set_device_threads(1, 1)
local head = ('%-8s %8s %10s %10s %8s %10s %10s %10s %8s'):format('model', 'params', '1 dev img/s',
  '2 dev img/s', 'eff', 'no-comm s', 'allred s', 'overlap s', 'hidden')
print(head)
print(('-'):rep(#head))
for _, name in ipairs(order) do
  lunet.manual_seed(1)
  local x, y = batch(models[name].shape)
  local dp = lunet.parallel.DataParallel(models[name].make(), { bucket_mb = BUCKET_MB })
  local t2 = time_steps(dp, dp:parameters(), x, y)
  -- the hidden share with small buckets (these models are far below 25 MB)
  local dpo = lunet.parallel.DataParallel(models[name].make(), { bucket_mb = OVERLAP_MB })
  local t_ov = time_steps(dpo, dpo:parameters(), x, y)
  local t_nc = time_steps(dpo, dpo:parameters(), x, y, { no_sync = true })
  local t_ar = time_allreduce(dpo)
  local hidden = 1 - math.max(0, math.min(1, (t_ov - t_nc) / t_ar))
  local best2 = math.min(t2, t_ov)
  print(('%-8s %8d %10.1f %10.1f %7.1f%% %10.4f %10.5f %10.4f %7.0f%%'):format(name,
    dp.module:num_parameters(), BATCH / one[name], BATCH / best2, 100 * one[name] / (2 * best2),
    t_nc, t_ar, t_ov, 100 * hidden))
  print(('%-8s   (bucket_mb %g: %.1f img/s, eff %.1f%%; bucket_mb %g: %d buckets, %.1f img/s)'):format('',
    BUCKET_MB, BATCH / t2, 100 * one[name] / (2 * t2), OVERLAP_MB, #dpo.buckets, BATCH / t_ov))
  dp, dpo = nil, nil
  free_all()
end
lunet.set_cpu_devices(1)

if not args['no-comm-bench'] then
  print()
  io.stdout:flush()
  os.execute('luajit bench/comm.lua --runs 3')
end
