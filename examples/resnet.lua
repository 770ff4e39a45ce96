-- ResNet-8 with BatchNorm on CIFAR-shaped data (3x32x32, 10 classes).
--   luajit examples/resnet.lua [--cifar DIR] [--epochs N] [--smoke]
-- Without --cifar it trains on a synthetic CIFAR-shaped dataset.
local lunet = require 'lunet'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local args = {}
for i = 1, #arg do args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end
local smoke = args.smoke ~= nil
lunet.manual_seed(0)

-- conv 16 -> three BasicBlocks (16, 32, 64 channels; strides 1, 2, 2) -> pool -> linear
local function resnet8(classes)
  return nn.Sequential {
    nn.Conv2d(3, 16, 3, { padding = 1, bias = false }), nn.BatchNorm2d(16), nn.ReLU(),
    nn.BasicBlock(16, 16, 1),
    nn.BasicBlock(16, 32, 2),
    nn.BasicBlock(32, 64, 2),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes),
  }
end

local train, test
if args.cifar then
  train = data.CIFAR10 { root = args.cifar, train = true }
  test = data.CIFAR10 { root = args.cifar, train = false }
else
  train = data.Synthetic { n = smoke and 256 or 2048, shape = { 3, 32, 32 }, classes = 10, seed = 1 }
  test = data.Synthetic { n = smoke and 128 or 512, shape = { 3, 32, 32 }, classes = 10, seed = 2 }
end
local loader = data.DataLoader(train, { batch_size = 64, shuffle = true, seed = 0 })
local test_loader = data.DataLoader(test, { batch_size = 256 })

local model = resnet8(10)
print(model)
local opt = optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9, weight_decay = 5e-4 })
local epochs = tonumber(args.epochs) or (smoke and 1 or 3)
local history = lunet.fit(model, loader, {
  epochs = epochs, optimizer = opt, val_loader = test_loader,
  scheduler = optim.CosineAnnealingLR(opt, { T_max = epochs }),
  max_steps = smoke and 4 or nil,
})
print(('final: train loss %.4f, val acc %.2f%%'):format(history[#history].train_loss, 100 * history[#history].val_acc))
