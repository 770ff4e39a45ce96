-- Fashion-MNIST over N processes with DistributedDataParallel:
--   mpirun --allow-run-as-root --bind-to none -np 2 luajit examples/distributed.lua [--full] [--smoke]
--   luajit examples/distributed.lua            -- the same script alone: a world of one
-- Each process takes a shard of every epoch (the DataLoader's default under
-- lunet.distributed) and its share of the cores; the gradients are averaged
-- across processes in buckets while backward runs. The global batch is 64
-- whatever N (64 / N a process, as examples/fashion_mnist.lua's), so N
-- processes train the same model as one. Rank 0 prints, logs and checkpoints.
-- Default: 1 epoch; --full: 4 epochs (examples/fashion_mnist.lua's run);
-- --smoke: a few steps on a subset, for CI.
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local args = {}
for i = 1, #arg do args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end
local smoke = args.smoke ~= nil
local epochs = tonumber(args.epochs) or (args.full and 4 or 1)
local info = dist.init()
local W = info.world_size
local main = info.rank == 0
local function say(...) if main then print(...) end end

lunet.manual_seed(1)   -- every rank builds the same split and model (rank 0's is broadcast anyway)
local root = args.root or os.getenv('FASHION_MNIST') or '/usr/share/datasets/fashion-mnist'
local full = data.FashionMNIST { root = root, train = true }
local test = data.FashionMNIST { root = root, train = false }
if smoke then
  full = data.Subset(full, lunet.arange(1, 1537):totable())
  test = data.Subset(test, lunet.arange(1, 513):totable())
end
local nval = smoke and 512 or 5000
local train, val = unpack(data.random_split(full, { #full - nval, nval }, 1))
local normalize = data.transforms.Normalize({ 0.2860 }, { 0.3530 })
local batch = tonumber(args.batch) or 64
if batch % W ~= 0 then error(('examples/distributed.lua: --batch %d is not a multiple of %d processes'):format(batch, W)) end
-- sharded by rank: every rank uses the same seed
local train_loader = data.DataLoader(train, { batch_size = math.floor(batch / W), shuffle = true, seed = 1, transform = normalize })
local val_loader = data.DataLoader(val, { batch_size = 500, transform = normalize })
local test_loader = data.DataLoader(test, { batch_size = 500, transform = normalize })

local model = nn.Sequential {
  nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(),
  nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
  nn.Linear(128, 10),
}
local ddp = lunet.parallel.DistributedDataParallel(model, { sync_bn = args['sync-bn'] ~= nil })
-- each rank its own dropout masks from here on (the model is rank 0's, the
-- loader's order its seed's)
lunet.manual_seed(1000 + info.rank)
say(('%d process%s (%s), %d thread%s each; %d images a step, %d a process'):format(W, W == 1 and '' or 'es',
  ddp.group:backend(), info.threads, info.threads == 1 and '' or 's', batch, math.floor(batch / W)))

local opt = optim.Adam(ddp:parameters(), { lr = 2e-3 })
local sched = optim.OneCycleLR(opt, { max_lr = 4e-3, total_steps = epochs * #train_loader })
local t0 = lunet.clock()
lunet.fit(ddp, train_loader, {
  epochs = epochs, optimizer = opt, scheduler = sched, scheduler_step = 'step', val_loader = val_loader,
  max_steps = smoke and 10 or nil, checkpoint = args.checkpoint, resume = args.checkpoint ~= nil, log = args.log,
})
local result = lunet.Trainer(ddp):evaluate(test_loader)   -- (every rank's shard, summed)
say(('test accuracy: %.2f%% (%d epoch%s, %d process%s, %.0f s)'):format(100 * result.acc, epochs,
  epochs == 1 and '' or 's', W, W == 1 and '' or 'es', lunet.clock() - t0))
dist.finalize()
