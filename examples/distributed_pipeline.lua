-- Fashion-MNIST on a CNN cut into a pipeline whose stages are processes:
--   mpirun --allow-run-as-root --bind-to none -np 2 luajit examples/distributed_pipeline.lua [--smoke]
--   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 luajit examples/distributed_pipeline.lua --replicas 2
--   luajit examples/distributed_pipeline.lua     -- a world of one: one stage
--   options: [--schedule 1f1b|gpipe|zb] [--chunks 4] [--replicas k] [--save PATH [--resume]] [--smoke]
-- Process rank r runs stage r + 1 (with --replicas k: k pipelines of W / k
-- stages, each stage's gradients averaged over its k copies). lunet.fit
-- trains it as any model: every rank calls it alike; the ranks of a pipeline
-- read the same batches (with k pipelines, each its shard of 64 / k images of
-- every batch of 64); the first stage's rank uses the images, the last's the
-- labels and computes the accuracy, which every rank's history holds; the
-- last stage's rank (of the first pipeline) prints. --save PATH
-- writes a checkpoint of the whole model and Adam's state after each epoch
-- (lunet.fit's checkpoint; --resume continues from it, with any number of
-- processes, or in one).
-- Default: 1 epoch on 6,000 images; --smoke: a few steps, for CI.
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local args = {}
for i = 1, #arg do if arg[i]:sub(1, 2) == '--' then args[arg[i]:sub(3)] = arg[i + 1] or true end end
local smoke = args.smoke
local info = dist.init()
local W, rank = info.world_size, info.rank
local replicas = tonumber(args.replicas) or 1
local S = W / replicas
local first, last = rank % S == 0, rank % S == S - 1

lunet.manual_seed(1)   -- the same model and split on every rank
local model = nn.Sequential {
  nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(16, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10),
}
local pipe = lunet.parallel.Pipeline(model, { group = dist.world(), replicas = replicas,
  chunks = tonumber(args.chunks) or 4, schedule = args.schedule or '1f1b' })
if rank == 0 then print(pipe:schedule_text()) end
io.stdout:write(('rank %d: %s\n'):format(rank, pipe:extra_repr())); io.stdout:flush()

local root = args.root or os.getenv('FASHION_MNIST') or '/usr/share/datasets/fashion-mnist'
local full = data.FashionMNIST { root = root, train = true }
local test = data.FashionMNIST { root = root, train = false }
full = data.Subset(full, lunet.arange(1, (smoke and 640 or tonumber(args.images) or 6000) + 1):totable())
test = data.Subset(test, lunet.arange(1, (smoke and 256 or 2000) + 1):totable())
local normalize = data.transforms.Normalize({ 0.2860 }, { 0.3530 })
-- (made after the pipeline: each pipeline's shard by default, num_replicas = pipe.replicas, rank = pipe.replica - 1)
local loader = data.DataLoader(full, { batch_size = 64 / replicas, shuffle = true, seed = 1, transform = normalize })
local test_loader = data.DataLoader(test, { batch_size = 256 / replicas, transform = normalize })

local opt = optim.Adam(pipe:parameters(), { lr = 2e-3 })   -- this rank's stage's
local history = lunet.fit(pipe, loader, { epochs = tonumber(args.epochs) or 1, optimizer = opt,
  val_loader = test_loader, max_steps = smoke and 6 or nil, checkpoint = args.save, resume = args.resume and true,
  progress = not smoke and 'lines' or false })
local last = history[#history]   -- (the same on every rank)
if pipe:is_main() then
  print(('test accuracy: %.2f%% (%d test images)'):format(100 * last.val_acc, #test))
end
dist.finalize()
