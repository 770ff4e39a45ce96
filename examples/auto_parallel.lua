-- The planner choosing a strategy and saying why, then training with it.
--
--   LUNET_CPU_DEVICES=2 luajit examples/auto_parallel.lua [--smoke] [--batch 64]
--
-- 1. lunet.parallel.plan profiles the CNN's layers on the first device and
--    the link between the devices, and prints every candidate (one device,
--    data parallel, pipelines of 2..N stages with their chunks and schedule)
--    with its predicted step time, memory per device, bytes on the wire and
--    bubble, and the choice in a sentence.
-- 2. The same plan with each device holding less memory than the model and
--    its Adam state need: data parallel no longer fits.
-- 3. lunet.parallel.auto wraps the model as planned and lunet.fit trains it
--    briefly, logging the measured step time beside the predicted one.
-- 4. lunet.parallel.simulate: the chosen strategy on 8..1024 devices of a
--    cluster (25 GB/s links, 5 us latency, devices 50x this one).
local lunet = require 'lunet'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local args = {}
for i = 1, #arg do if arg[i]:sub(1, 2) == '--' then args[arg[i]:sub(3)] = arg[i + 1] or true end end
local smoke = args.smoke
local batch = tonumber(args.batch) or 64
lunet.manual_seed(0)

local function cnn()
  return nn.Sequential {
    nn.Conv2d(3, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(64, 64, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, 10),
  }
end

local devices = lunet.devices()
local model = cnn()
local sample = lunet.randn(batch, 3, 32, 32)
print(('%d device(s): %s; batch %d'):format(#devices, table.concat(devices, ', '), batch))

-- 1. the plan
local plan = lunet.parallel.plan(model, sample, { devices = devices, batch = batch, runs = smoke and 1 or 3 })
print(plan)

-- 2. the same model and profile, each device holding a little more than the
--    leanest pipeline needs (the plan keeps a tenth of a device free)
local lean
for _, c in ipairs(plan.candidates) do
  if c.kind == 'pipeline' and (not lean or c.peak < lean.peak) then lean = c end
end
if lean then
  local small = math.floor(lean.peak / 0.9 * 1.05)
  print(('\nif each device held %.1f MB:'):format(small / 2 ^ 20))
  local ok, tight = pcall(lunet.parallel.plan, nil, nil, { devices = devices, batch = batch, profile = plan.profile,
    link = plan.link, together = plan.together, memory = small })
  print(ok and tight.reason or tight)   -- (nothing fits: the error says what each would need)
end

-- 3. train as planned (the plan's choice among what this build makes), the
--    3 candidates predicted fastest (and each other kind's fastest) tried
--    for a few steps first: the measured fastest wins
local wrapped = lunet.parallel.auto(cnn(), sample, { devices = devices, batch = batch, runs = smoke and 1 or 3,
  trials = 3 })
print('\nauto: ' .. wrapped.auto_plan.reason)
local ds = data.Synthetic { n = smoke and batch * 4 or batch * 40, shape = { 3, 32, 32 }, classes = 10, seed = 0 }
local loader = data.DataLoader(ds, { batch_size = batch, shuffle = true })
local opt = optim.Adam(wrapped:parameters(), { lr = 1e-3 })
lunet.fit(wrapped, loader, { epochs = smoke and 1 or 2, optimizer = opt, progress = false })

-- 4. beyond this machine
print('\nsimulated on a cluster (25 GB/s, 5 us, each device 50x this one):')
print(lunet.parallel.simulate(wrapped.auto_plan, { devices = { 8, 64, 512, 1024 }, bandwidth = 25e9,
  latency = 5e-6, device_speed = 50, overlap = 1 }))
