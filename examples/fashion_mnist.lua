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
local full = data.FashionMNIST { root = root, train = true }
local test = data.FashionMNIST { root = root, train = false }
if smoke then
  full = data.Subset(full, lunet.arange(1, 1537):totable())
  test = data.Subset(test, lunet.arange(1, 513):totable())
end
-- 5,000 training images held out for validation (each epoch); the test set
-- is measured once, at the end
local nval = smoke and 512 or 5000
local train, val = unpack(data.random_split(full, { #full - nval, nval }, 1))
local normalize = data.transforms.Normalize({ 0.2860 }, { 0.3530 })
local train_loader = data.DataLoader(train, { batch_size = 64, shuffle = true, seed = 1,
  workers = 1, transform = normalize })
local val_loader = data.DataLoader(val, { batch_size = 500, transform = normalize })
local test_loader = data.DataLoader(test, { batch_size = 500, transform = normalize })

local model = nn.Sequential {
  nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(),
  nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
  nn.Linear(128, 10),
}
print(model)
print(('%s training, %s validation, %s test images'):format(nn.Module.format_count(#train),
  nn.Module.format_count(#val), nn.Module.format_count(#test)))

local plot = args.plot or (not smoke and 'build/fashion_mnist_curves.svg' or nil)
local opt = optim.Adam(model:parameters(), { lr = 2e-3 })
local sched = optim.OneCycleLR(opt, { max_lr = 4e-3, total_steps = epochs * #train_loader })
local t0 = lunet.clock()
lunet.fit(model, train_loader, {
  epochs = epochs, optimizer = opt, scheduler = sched, scheduler_step = 'step',
  val_loader = val_loader, log = args.log, plot = plot,
})
local result = lunet.Trainer(model):evaluate(test_loader)
print(('test accuracy: %.2f%% (%s test images, %d epoch%s, %.0f s)'):format(100 * result.acc,
  nn.Module.format_count(#test), epochs, epochs == 1 and '' or 's', lunet.clock() - t0))
if plot then print(('loss and accuracy curves: %s (open it in a browser)'):format(plot)) end
if args.log then print(('metrics per epoch: %s'):format(args.log)) end
