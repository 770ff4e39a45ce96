-- Fashion-MNIST on a CNN cut into a pipeline whose stages are processes:
--   mpirun --allow-run-as-root --bind-to none -np 2 luajit examples/distributed_pipeline.lua [--smoke]
--   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 luajit examples/distributed_pipeline.lua --replicas 2
--   luajit examples/distributed_pipeline.lua     -- a world of one: one stage
-- Process rank r runs stage r + 1 (with --replicas k: k pipelines of W / k
-- stages, each stage's gradients averaged over its k copies). Every rank
-- reads the same batches (the loader is not sharded: num_replicas = 1); the
-- first stage's rank uses the images, the last's the labels. The last
-- stage's rank computes the accuracy; rank 0 prints and saves the model.
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
local loader = data.DataLoader(full, { batch_size = 64, shuffle = true, seed = 1, transform = normalize, num_replicas = 1 })
local test_loader = data.DataLoader(test, { batch_size = 256, transform = normalize, num_replicas = 1 })

local opt = optim.Adam(pipe:parameters(), { lr = 2e-3 })   -- this rank's stage's
local crit = nn.CrossEntropyLoss()
local t0, steps = lunet.clock(), 0
for epoch = 1, tonumber(args.epochs) or 1 do
  local sum, n = 0, 0
  for x, y in loader:iter() do
    opt:zero_grad()
    local loss = pipe:forward_loss(crit, first and x or nil, last and y or nil)
    loss:backward()
    opt:step()
    sum, n, steps = sum + loss:item(), n + 1, steps + 1   -- (the same loss on every rank)
    if smoke and steps == 6 then break end
  end
  if rank == 0 then print(('epoch %d: loss %.4f (%d steps, %.0f s)'):format(epoch, sum / n, n, lunet.clock() - t0)) end
end

-- test accuracy: the outputs are on the last stage's ranks (of every pipeline)
pipe:eval()
local correct, seen = 0, 0
lunet.no_grad(function()
  for x, y in test_loader:iter() do
    local l = pipe:forward_loss(crit, first and x or nil, last and y or nil)
    if rank == S - 1 then   -- (the first pipeline's outputs, its rows of the batch, are on its last rank)
      local out = l:output()
      local rows = out:size(1)
      correct = correct + out:argmax(2):eq(y:narrow(1, 1, rows)):sum():item()
      seen = seen + rows
    end
  end
end)
if rank == S - 1 then print(('test accuracy: %.2f%% (the first pipeline\'s %d of %d test images)'):format(
  100 * correct / seen, seen, #test)) end
local sd = pipe:full_state_dict()   -- every rank calls it; rank 0 gets the whole model
if rank == 0 and args.save then lunet.save(args.save, sd); print('saved ' .. args.save) end
dist.finalize()
