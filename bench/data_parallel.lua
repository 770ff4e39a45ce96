-- DataParallel scaling on virtual CPU devices (make bench).
--   luajit bench/data_parallel.lua [--steps S] [--groups G] [--rounds R] [--batch B] [--bucket-mb M] [--models seed,lenet5,resnet8]
--     [--comm]
-- For each model at global batch B (128):
--   efficiency = throughput(2 devices x 1 core) / (2 x throughput(1 device x 1 core)), training
--                with crit(dp(x), y) (eff) and with dp:forward_loss(crit, x, y) (f-loss: the loss
--                on each replica's shard, no gathered output, no device waiting for another
--                before the last bucket)
--   hidden     = share of the all-reduce time hidden behind backward (bucket_mb 0.05, so that
--                these small models get several buckets):
--                1 - exposed / allred, where
--                allred  = time of the all-reduce of every gradient bucket alone (the same
--                          async path on the comm streams, then wait), best of 5 x 4;
--                exposed = time from the end of backward on the last device to the end of
--                          the all-reduce: stream timestamps on each compute stream just
--                          before the last bucket's launch (which runs it on the compute
--                          streams) and just after the Reducer's _end_backward (which waits
--                          for the comm streams),
--                          max(after) - max(before) (a device waiting for a slower one's
--                          gradients is skew, not communication), median over 30 steps.
--   awake      = share of those steps in which the replica done early met the late one
--                awake at the last bucket (it woke as the late one began its last layer)
--                instead of sleeping until it came (Communicator:meet_stats()).
--   indep      = the efficiency of two independent copies of the model, one per device,
--                each training on half the batch (no communication at all): the ceiling
--                for any data-parallel scheme on this machine; of-ind = DataParallel's
--                throughput over that pair's.
--   1st lead   = how long before the end of backward (last device) the first bucket's
--                all-reduce had finished on the comm stream (median over the steps): the
--                launches do not wait for the whole backward when this is a good part of it.
--   d-step     = step(DataParallel) - step(same inside dp:no_sync): the all-reduce's cost
--                in step time, shown for reference; it is the difference of two step
--                times ~100x larger than the all-reduce, so it is mostly noise here.
-- With --comm, then the all-reduce bandwidth for 1-256 MB beside memcpy
-- (bench/comm.lua, which `make bench` also runs on its own).
-- Needs 2 cores; run it on a quiet machine (see `uptime`).
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local ffi = require 'ffi'
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
  lunet.reset_jit()   -- (jit.flush() alone leaves what LuaJIT blacklisted interpreted)
  for _ = 1, 4 do collectgarbage() end
  lunet.synchronize()
end

local function batch(shape)
  local s = { BATCH }
  for i, d in ipairs(shape) do s[i + 1] = d end
  return lunet.randn(s), lunet.randint(1, 11, { BATCH })
end

-- seconds per call of step: the best of GROUPS timed groups of STEPS calls,
-- after 8 calls of warm-up (the JIT compiles the step's traces in the first few)
local function best_time(step)
  for _ = 1, 8 do step() end
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

-- seconds per training step
local function time_steps(model, params, x, y, opts)
  local opt = optim.SGD(params, { lr = 0.01, momentum = 0.9 })
  local crit = nn.CrossEntropyLoss()
  return best_time(function()
    opt:zero_grad()
    local go = function() crit(model(x), y):backward() end
    if opts and opts.forward_loss then go = function() model:forward_loss(crit, x, y):backward() end end
    if opts and opts.no_sync then model:no_sync(go) else go() end
    opt:step()
  end)
end

-- seconds per step of two independent copies of a model, one per device, each
-- training on half the batch (no scatter, gather or all-reduce): what any
-- data-parallel scheme could reach on these two cores, whose throughput with
-- both busy is often well below twice one's (shared memory bandwidth, clock,
-- the hypervisor taking time: the steal printed below)
local function time_independent(name, x, y)
  local half = math.floor(BATCH / 2)
  local m, opt, xs, ys = {}, {}, {}, {}
  for k = 1, 2 do
    local dev = 'cpu:' .. (k - 1)
    lunet.manual_seed(1)
    m[k] = models[name].make():to(dev)
    opt[k] = optim.SGD(m[k]:parameters(), { lr = 0.01, momentum = 0.9 })
    xs[k] = x:narrow(1, 1 + (k - 1) * half, half):to(dev)
    ys[k] = y:narrow(1, 1 + (k - 1) * half, half):to(dev)
  end
  local crit = nn.CrossEntropyLoss()
  return best_time(function()
    for k = 1, 2 do
      opt[k]:zero_grad()
      crit(m[k](xs[k]), ys[k]):backward()
      opt[k]:step()
    end
  end)
end

-- seconds for the all-reduce of every gradient bucket alone, on the path
-- DataParallel takes (the comm streams, then the compute streams wait)
local function time_allreduce(dp)
  local function once()
    for _, b in ipairs(dp.reducer.buckets) do
      dp.comm:allreduce(b.flat, { op = 'avg', compress = dp.reducer.compress, async = true })
    end
    dp.comm:wait()
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

-- seconds per step from the end of backward on the last device to the end
-- of the all-reduce: stamps on each compute stream just before and just after
-- the Reducer's _end_backward;
-- max(after) - max(before), so that a device waiting for a slower one's
-- gradients (skew, not communication) does not count; median over the steps
local stamps = ffi.new("double[?]", 2 * 16)
local function time_exposed(dp, x, y, steps)
  local opt = optim.SGD(dp:parameters(), { lr = 0.01, momentum = 0.9 })
  local crit = nn.CrossEntropyLoss()
  -- Reducer:_end_backward runs when autograd has queued the last
  -- backward op: it launches any bucket not yet launched and makes the
  -- compute streams wait for the comm streams
  local ids = {}
  for k = 1, dp.n do ids[k] = C.ln_comm_device(dp.comm.handle, k - 1) end
  -- and the end of the first bucket's all-reduce on the comm stream of
  -- device 1: how long before the end of backward it was done
  local first
  -- "before" is stamped where backward's compute ends: before each launch
  -- (the last one wins; DataParallel runs the last bucket on the compute
  -- streams, so the stamp must precede it) and, when buckets are left for
  -- _end_backward to launch, at its start
  local red, Reducer = dp.reducer, require('lunet.parallel.Reducer')
  red._launch = function(self, b)
    for k = 1, self.n do C.ln_stream_timestamp(ids[k], stamps + 2 * k - 2) end
    Reducer._launch(self, b)
    if not first then first = true; C.ln_comm_stream_timestamp(ids[1], stamps + 2 * self.n) end
  end
  red._end_backward = function(self, ok)
    local left = false
    for b = 1, #self.buckets do left = left or not (self.step and self.step.launched[b]) end
    if left then for k = 1, self.n do C.ln_stream_timestamp(ids[k], stamps + 2 * k - 2) end end
    Reducer._end_backward(self, ok)
    for k = 1, self.n do C.ln_stream_timestamp(ids[k], stamps + 2 * k - 1) end
  end
  local t, lead, awake = {}, {}, 0
  for s = 0, steps do
    first = nil
    local awake0 = dp.comm:meet_stats().awake
    opt:zero_grad()
    crit(dp(x), y):backward()
    opt:step()
    lunet.synchronize()
    local before, after = -math.huge, -math.huge
    for k = 1, dp.n do
      before = math.max(before, stamps[2 * k - 2])
      after = math.max(after, stamps[2 * k - 1])
    end
    if s > 0 then   -- step 0: warm-up
      if dp.comm:meet_stats().awake > awake0 then awake = awake + 1 end
      t[#t + 1] = after - before
      lead[#lead + 1] = before - stamps[2 * dp.n]
    end
  end
  table.sort(t); table.sort(lead)
  red._end_backward, red._launch = nil, nil
  local mid = math.floor((#t + 1) / 2)
  return t[mid], lead[mid], awake
end

-- CPU used by other processes while this runs (from /proc; Linux only):
-- figures taken while others were busy are not this library's
local function cpu_ticks()
  local f = io.open('/proc/stat'); if not f then return nil end
  local line = f:read('*l'); f:close()
  local v = {}
  for x in line:gmatch('%d+') do v[#v + 1] = tonumber(x) end
  local busy = v[1] + v[2] + v[3] + (v[6] or 0) + (v[7] or 0)
  local g = io.open('/proc/self/stat'); local st = g:read('*l'); g:close()
  local rest = st:match('%) (.*)')
  local fields = {}
  for x in rest:gmatch('%S+') do fields[#fields + 1] = x end
  return busy, v[1] + v[2] + v[3] + v[4] + (v[5] or 0) + (v[6] or 0) + (v[7] or 0) + (v[8] or 0),
    tonumber(fields[12]) + tonumber(fields[13]), v[8] or 0
end
local busy0, total0, own0, steal0 = cpu_ticks()

local f = io.popen('uptime'); local up = f:read('*l') or ''; f:close()
print(('lunet %s DataParallel bench: global batch %d, best of %d rounds x %d groups of %d steps, %d cores; %s'):format(
  lunet.version, BATCH, ROUNDS, GROUPS, STEPS, C.ln_num_cores(), up:match('load average.*') or up))

-- rounds alternate the two configurations, so that a burst of load from
-- elsewhere hits both; each figure is the best seen
local one, two, ov, nc, ar, nb, np, ex, lead, ind, awake, fl = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
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
    local dpl = lunet.parallel.DataParallel(models[name].make(), { bucket_mb = BUCKET_MB })
    keep(fl, name, time_steps(dpl, dpl:parameters(), x, y, { forward_loss = true }))
    dpl = nil
    keep(ind, name, time_independent(name, x, y))
    -- the hidden share with small buckets (these models are far below 25 MB)
    local dpo = lunet.parallel.DataParallel(models[name].make(), { bucket_mb = OVERLAP_MB })
    keep(ov, name, time_steps(dpo, dpo:parameters(), x, y))
    keep(nc, name, time_steps(dpo, dpo:parameters(), x, y, { no_sync = true }))
    keep(ar, name, time_allreduce(dpo))
    local e, l, a = time_exposed(dpo, x, y, 30)
    keep(ex, name, e)
    awake[name] = (awake[name] or 0) + a / 30 / ROUNDS
    lead[name] = math.max(lead[name] or -math.huge, l)
    nb[name] = #dpo.reducer.buckets
    dp, dpo = nil, nil
    free_all()
  end
end

local head = ('%-8s %7s %10s %10s %6s %6s %6s %6s | %4s %8s %8s %6s %5s %8s | %8s %8s %8s %7s'):format('model', 'params',
  '1dev img/s', '2dev img/s', 'eff', 'f-loss', 'indep', 'of-ind', 'bkts', 'allred', 'exposed', 'hidden', 'awake', '1st lead', 'step',
  'no-comm', 'small-bk', 'd-step')
print(head)
print(('-'):rep(#head))
for _, name in ipairs(order) do
  local best2 = math.min(two[name], ov[name])
  local hidden = 1 - math.max(0, math.min(1, ex[name] / ar[name]))
  print(('%-8s %7d %10.1f %10.1f %5.1f%% %5.1f%% %5.1f%% %5.1f%% | %4d %6.3fms %6.3fms %5.0f%% %4.0f%% %6.2fms | %6.2fms %6.2fms %6.2fms %5.2fms'):format(
    name, np[name], BATCH / one[name], BATCH / best2, 100 * one[name] / (2 * best2), 100 * one[name] / (2 * fl[name]),
    100 * one[name] / (2 * ind[name]),
    100 * ind[name] / best2, nb[name], 1e3 * ar[name],
    1e3 * ex[name], 100 * hidden, 100 * awake[name], 1e3 * lead[name], 1e3 * two[name], 1e3 * nc[name], 1e3 * ov[name], 1e3 * (ov[name] - nc[name])))
end
print(('(eff: the better of bucket_mb %g and %g, loss on the gathered output; f-loss: the same with'):format(
  BUCKET_MB, OVERLAP_MB))
print((' dp:forward_loss (the loss on each replica\'s shard, bucket_mb %g); indep: the same efficiency for'):format(BUCKET_MB))
print(' two independent copies of the model training on half the batch each, one per device, no communication:')
print(' the ceiling of any data-parallel scheme on this machine; of-ind = DataParallel throughput (eff) / that pair\'s;')
print((' bkts, allred, exposed, hidden, small-bk: bucket_mb %g;'):format(OVERLAP_MB))
print(' allred = all-reduce of every bucket alone; exposed = its part after the last device\'s backward ended;')
print(' hidden = 1 - exposed / allred; awake = share of the steps (all rounds) whose early replica met the late one')
print(' awake at the last bucket (Communicator:meet_stats()); 1st lead = how long before the end of backward the first bucket\'s')
print(' all-reduce was done (median); step = bucket_mb ' .. BUCKET_MB .. '; no-comm = small-bk steps inside dp:no_sync;')
print(' d-step = small-bk - no-comm: the all-reduce\'s cost in step time, mostly noise at these sizes)')
lunet.set_cpu_devices(1)
if busy0 then
  local busy1, total1, own1, steal1 = cpu_ticks()
  local others = math.max(0, (busy1 - busy0) - (own1 - own0)) / math.max(1, total1 - total0)
  local steal = (steal1 - steal0) / math.max(1, total1 - total0)
  print(('other processes used %.0f%% of the machine\'s CPU during the run, the hypervisor took %.0f%% (steal)%s'):format(
    100 * others, 100 * steal, (others > 0.05 or steal > 0.05) and ' (CONTENDED: rerun on a quiet machine)' or ''))
end

if args.comm then
  print()
  io.stdout:flush()
  os.execute('luajit bench/comm.lua --runs 3')
end
