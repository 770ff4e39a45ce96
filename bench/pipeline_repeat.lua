-- How far apart bench/pipeline.lua's figure for one pipeline lands when it
-- is measured again (issue 19: the planner's grid scores predictions
-- against these figures, so their spread bounds what any cost model can
-- reach):
--   luajit bench/pipeline_repeat.lua [--devices 2] [--chunks 16] [--schedule gpipe] [--builds 6]
-- LeNet-5 at batch 64 over devices virtual CPU devices, a fixed balance (the
-- planner's would move with the profile), timed as the grid times a
-- candidate (warm-up, then the median of 5 groups of at least 4 steps and
-- 80 ms). Printed, each over --builds fresh builds (the JIT reset between,
-- as the grid does):
--   same build:  one build timed --builds times in a row
--   rebuilds:    a fresh build each time, warmed up as the grid does
--                (profile_devices.warm_up)
--   settled:     a fresh build each time, warmed up until LuaJIT recorded
--                no trace for 20 steps (at most 1 s)
-- "apart" is the largest over the smallest, as the grid's repeatability line.
-- Needs idle cores: run it alone.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local lunet = require 'lunet'
local nn, optim = lunet.nn, lunet.optim

local args = {}
for i = 1, #arg, 2 do
  local k = arg[i]:match('^%-%-(.+)')
  if not k or arg[i + 1] == nil then error('usage: luajit bench/pipeline_repeat.lua [--devices N] [--chunks M] [--schedule S] [--builds B]') end
  args[k] = arg[i + 1]
end
for k in pairs(args) do
  if not ({ devices = 1, chunks = 1, schedule = 1, builds = 1 })[k] then error('pipeline_repeat: unknown option --' .. k) end
end
local DEVICES = tonumber(args.devices) or 2
local CHUNKS = tonumber(args.chunks) or 16
local SCHEDULE = args.schedule or 'gpipe'
local BUILDS = tonumber(args.builds) or 6
assert(DEVICES == 2 or DEVICES == 4, '--devices: 2 or 4')
lunet.set_cpu_devices(DEVICES)
local BALANCE = DEVICES == 2 and { 6, 6 } or { 3, 3, 3, 3 }   -- (LeNet-5's 12 atoms)
local Pipeline = require 'lunet.parallel.Pipeline'
local warm_up = require('lunet.parallel.profile_devices').warm_up

local function lenet5()
  return nn.Sequential { nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
    nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10) }
end

local traces = 0
jit.attach(function() traces = traces + 1 end, 'trace')
-- warmed up until the JIT is quiet: 20 steps in a row that recorded no trace
local function warm_settled(step)
  local t0, quiet = lunet.clock(), 0
  for _ = 1, 2000 do
    local seen = traces
    step()
    quiet = traces == seen and quiet + 1 or 0
    if quiet >= 20 or lunet.clock() - t0 > 1 then return end
  end
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

local devices = {}
for d = 1, DEVICES do devices[d] = 'cpu:' .. (d - 1) end
local function free_all()
  lunet.reset_jit()
  for _ = 1, 4 do collectgarbage() end
  lunet.synchronize()
  for _, d in ipairs(lunet.devices('cpu')) do lunet.empty_cache(d) end
end
local function build()
  local x, y = lunet.randn({ 64, 1, 32, 32 }), lunet.randint(1, 11, { 64 })
  local pipe = Pipeline(lenet5(), { devices = devices, chunks = CHUNKS, schedule = SCHEDULE, balance = BALANCE })
  local opt = optim.Adam(pipe:parameters(), { lr = 1e-4 })
  local crit = nn.CrossEntropyLoss()
  return function() opt:zero_grad(); pipe:forward_loss(crit, x, y):backward(); opt:step() end
end
-- bench/pipeline.lua's time_steps: seconds a step, the median of 5 groups
local function time_steps(step, warm)
  if warm then warm(step) end
  lunet.synchronize()
  local t0 = lunet.clock()
  step()
  lunet.synchronize()
  local n = math.max(4, math.min(200, math.ceil(0.08 / math.max(lunet.clock() - t0, 1e-6))))
  local ts = {}
  for g = 1, 5 do
    t0 = lunet.clock()
    for _ = 1, n do step() end
    lunet.synchronize()
    ts[g] = (lunet.clock() - t0) / n
  end
  return median(ts)
end

local same, rebuilt, settled = {}, {}, {}
free_all()
local step = build()
for i = 1, BUILDS do same[i] = time_steps(step, i == 1 and warm_up or nil) end
step = nil
for i = 1, BUILDS do
  free_all(); step = build(); rebuilt[i] = time_steps(step, warm_up); step = nil
  free_all(); step = build(); settled[i] = time_steps(step, warm_settled); step = nil
end

local function line(name, ts)
  local s, lo, hi = {}, math.huge, 0
  for i, t in ipairs(ts) do
    s[i] = ('%.2f'):format(t * 1e3)
    lo, hi = math.min(lo, t), math.max(hi, t)
  end
  print(('  %-11s %s ms  (apart %.0f%%)'):format(name, table.concat(s, ' '), (hi / lo - 1) * 100))
end
print(('LeNet-5, batch 64, %d devices, %d chunks, %s, balance {%s}; load average %s'):format(DEVICES, CHUNKS, SCHEDULE,
  table.concat(BALANCE, ', '), (io.open('/proc/loadavg'):read('*l') or '?'):match('^(%S+ %S+ %S+)')))
line('same build', same)
line('rebuilds', rebuilt)
line('settled', settled)
