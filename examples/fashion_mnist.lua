-- Train a small CNN on Fashion-MNIST and report test accuracy.
--   luajit examples/fashion_mnist.lua [--epochs N] [--smoke]
-- (make demo runs this; --smoke trains a few steps on a subset, for CI.)
local lunet = require 'lunet'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local args = {}
for i = 1, #arg do args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end
local smoke = args.smoke ~= nil
local epochs = tonumber(args.epochs) or (smoke and 1 or 4)
lunet.manual_seed(1)

local root = args.root or os.getenv('FASHION_MNIST') or '/usr/share/datasets/fashion-mnist'
local train = data.FashionMNIST { root = root, train = true }
local test = data.FashionMNIST { root = root, train = false }
if smoke then
  train = data.Subset(train, lunet.arange(1, 1025):totable())
  test = data.Subset(test, lunet.arange(1, 513):totable())
end
local normalize = data.transforms.Normalize({ 0.2860 }, { 0.3530 })
local train_loader = data.DataLoader(train, { batch_size = 64, shuffle = true, seed = 1,
  workers = 1, transform = normalize })
local test_loader = data.DataLoader(test, { batch_size = 500, transform = normalize })

local model = nn.Sequential {
  nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(),
  nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
  nn.Linear(128, 10),
}
print(model)

local opt = optim.Adam(model:parameters(), { lr = 2e-3 })
local sched = optim.OneCycleLR(opt, { max_lr = 4e-3, total_steps = epochs * #train_loader })
local t0 = lunet.clock()
local history = lunet.fit(model, train_loader, {
  epochs = epochs, optimizer = opt, scheduler = sched, scheduler_step = 'step',
  val_loader = test_loader, log = args.log, plot = args.plot or (not smoke and 'build/fashion_mnist_curves.svg' or nil),
})
local last = history[#history]
print(('test accuracy: %.2f%% (%d test images, %d epochs, %.0f s)'):format(100 * last.val_acc, #test,
  epochs, lunet.clock() - t0))
