-- Data-parallel training on Fashion-MNIST over every device.
--   luajit examples/data_parallel.lua [--devices N] [--epochs N] [--sync-bn]
--     [--compress bf16|fp16] [--balance auto] [--accumulate K] [--smoke]
-- Without GPUs, --devices N (or LUNET_CPU_DEVICES=N) splits the CPU into N
-- virtual devices. --smoke trains a few steps on a subset (CI).
local lunet = require 'lunet'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local args = {}
for i = 1, #arg do
  local k = arg[i]:match('^%-%-(.+)')
  if k then
    local v = arg[i + 1]
    if v == nil or v:match('^%-%-') then v = true end
    args[k] = v
  end
end
local smoke = args.smoke ~= nil
if args.devices then lunet.set_cpu_devices(tonumber(args.devices)) end
local epochs = tonumber(args.epochs) or (smoke and 1 or 3)
lunet.manual_seed(1)

local root = args.root or os.getenv('FASHION_MNIST') or '/usr/share/datasets/fashion-mnist'
local train = data.FashionMNIST { root = root, train = true }
local test = data.FashionMNIST { root = root, train = false }
if smoke then
  train = data.Subset(train, lunet.arange(1, 1025):totable())
  test = data.Subset(test, lunet.arange(1, 513):totable())
end
local normalize = data.transforms.Normalize({ 0.2860 }, { 0.3530 })
local train_loader = data.DataLoader(train, { batch_size = 128, shuffle = true, seed = 1, workers = 1,
  transform = normalize })
local test_loader = data.DataLoader(test, { batch_size = 500, transform = normalize })

local model = nn.Sequential {
  nn.Conv2d(1, 16, 3, { padding = 1, bias = false }), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(16, 32, 3, { padding = 1, bias = false }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(),
  nn.Linear(32 * 7 * 7, 128), nn.ReLU(),
  nn.Linear(128, 10),
}

local devices = lunet.devices()
local dp = lunet.parallel.DataParallel(model, {
  devices = devices,
  sync_bn = args['sync-bn'] ~= nil,
  compress = args.compress,
  balance = args.balance,
  accumulate = tonumber(args.accumulate),
})
print(dp)
if #devices == 1 then print('(one device: try --devices 2 or LUNET_CPU_DEVICES=2)') end

local opt = optim.SGD(dp:parameters(), { lr = 0.05, momentum = 0.9 })
local t0 = lunet.clock()
local history = lunet.fit(dp, train_loader, {
  epochs = epochs, optimizer = opt, val_loader = test_loader, log = args.log,
  max_steps = smoke and 6 or nil,
})
local last = history[#history]
print(('test accuracy: %.2f%% on %d device%s (%d epochs, %.1f s)'):format(100 * last.val_acc, #devices,
  #devices == 1 and '' or 's', epochs, lunet.clock() - t0))
