-- A CNN too big for one device's memory, trained as a pipeline over 2-4
-- devices on Fashion-MNIST.
--
--   luajit examples/pipeline.lua [--devices 2] [--memory 128] [--images 6000] [--epochs 1]
--                                [--full] [--schedule 1f1b|gpipe|interleaved|zb] [--chunks 8] [--smoke]
--
-- The devices are virtual CPU devices cpu:1..N, each limited to --memory MB
-- (default 136; LUNET_CPU_MEMORY, when set, wins); cpu:0 holds the data. The model's parameters, gradients
-- and Adam state need about 150 MB: one device runs out of memory (the
-- script shows it), while a pipeline cuts the model into stages balanced by
-- measured time within each device's limit. By default it trains one epoch
-- on 6,000 training images (a minute or two on two cores); --full trains on
-- all 55,000 (5,000 held out for validation), --smoke a few steps for CI.
local lunet = require 'lunet'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local args = {}
for i = 1, #arg do if arg[i]:sub(1, 2) == '--' then args[arg[i]:sub(3)] = arg[i + 1] or true end end
local smoke = args.smoke
local ndev = tonumber(args.devices) or 2
if ndev < 2 or ndev > 4 then error('--devices must be 2, 3 or 4', 0) end
-- cpu:0 holds the data set and builds the model (no limit); cpu:1..N are the limited devices
lunet.set_cpu_devices(ndev + 1)
local devices = {}
for k = 1, ndev do
  devices[k] = 'cpu:' .. k
  if not os.getenv('LUNET_CPU_MEMORY') then lunet.C.ln_memory_set_limit(k, (tonumber(args.memory) or 136) * 2 ^ 20) end
end
local limit = lunet.memory_limit(devices[1])
lunet.manual_seed(1)

local function cnn()
  return nn.Sequential {
    nn.Conv2d(1, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(64 * 7 * 7, 1536), nn.ReLU(),
    nn.Linear(1536, 1536), nn.ReLU(),
    nn.Linear(1536, 1536), nn.ReLU(),
    nn.Linear(1536, 10),
  }
end

local root = args.root or os.getenv('FASHION_MNIST') or '/usr/share/datasets/fashion-mnist'
local full = data.FashionMNIST { root = root, train = true }
local test = data.FashionMNIST { root = root, train = false }
local ntrain = args.full and #full or (smoke and 640 or tonumber(args.images) or 6000)
local nval = args.full and 5000 or (smoke and 128 or 1000)
full = data.Subset(full, lunet.arange(1, ntrain + 1):totable())
if not args.full then test = data.Subset(test, lunet.arange(1, (smoke and 256 or 2000) + 1):totable()) end
local train, val = unpack(data.random_split(full, { #full - nval, nval }, 1))
local normalize = data.transforms.Normalize({ 0.2860 }, { 0.3530 })
local batch = 64
local train_loader = data.DataLoader(train, { batch_size = batch, shuffle = true, seed = 1, transform = normalize })
local val_loader = data.DataLoader(val, { batch_size = 256, transform = normalize })
local test_loader = data.DataLoader(test, { batch_size = 256, transform = normalize })

local model = cnn()
local n = model:num_parameters()
print(('model: %s parameters; with gradients and Adam state %.0f MB; each of %d devices holds %.0f MB'):format(
  nn.Module.format_count(n), 16 * n / 2 ^ 20, ndev, limit / 2 ^ 20))

-- one device: a training step runs out of memory
do
  local one = cnn():to(devices[1])
  local opt = optim.Adam(one:parameters())
  local x, y = train_loader:iter()()
  x, y = x:to(devices[1]), y:to(devices[1])
  local ok, err = pcall(function()
    opt:zero_grad()
    nn.CrossEntropyLoss()(one(x), y):backward()
    opt:step()
    lunet.synchronize()
  end)
  print(ok and 'one device: the step fit (raise --memory no further, or lower it)'
    or ('one device: %s'):format(tostring(err):gsub('^[^:\n]*:%d+: ', '', 1)))
  one, opt, x, y = nil, nil, nil, nil
  jit.flush()   -- (compiled traces keep the last tensors they saw)
  for _ = 1, 4 do pcall(lunet.synchronize); collectgarbage() end
  print(('%s after it: %.1f MB in use'):format(devices[1], lunet.memory_allocated(devices[1]) / 2 ^ 20))
  for _, d in ipairs(devices) do lunet.reset_peak_memory_stats(d) end
end

-- the pipeline: stages balanced by measured time within each device's memory
local x0 = train_loader:iter()()
local pipe = lunet.parallel.Pipeline(model, { devices = devices, chunks = tonumber(args.chunks) or 8,
  schedule = args.schedule or '1f1b', sample = x0 })
print(pipe:balance_report())
print(pipe:schedule_text())

local epochs = tonumber(args.epochs) or 1
local opt = optim.Adam(pipe:parameters(), { lr = 1e-3 })
local t0 = lunet.clock()
lunet.fit(pipe, train_loader, { epochs = epochs, optimizer = opt, val_loader = val_loader,
  max_steps = smoke and 6 or nil, log = args.log })
local result = lunet.Trainer(pipe):evaluate(test_loader)
for _, d in ipairs(devices) do
  print(('%s: peak %.0f MB of %.0f MB'):format(d, lunet.max_memory_allocated(d) / 2 ^ 20, limit / 2 ^ 20))
end
print(('test accuracy: %.2f%% (%s test images, %.0f s)'):format(100 * result.acc, nn.Module.format_count(#test),
  lunet.clock() - t0))
