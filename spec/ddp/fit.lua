-- One rank of spec/ddp_mpi_spec.lua's fit case: lunet.fit over a
-- DistributedDataParallel with the loader sharded by rank (its default under
-- lunet.distributed). DDP_PHASE=A (run with 2 processes): 3 steps of epoch 1,
-- a checkpoint after each (rank 0 writes DDP_CKPT). DDP_PHASE=B (3
-- processes): resumes from it and finishes 2 epochs; every rank checks its
-- parameters against one device trained on the same global batches (3 of 8
-- samples, then 12 per step), and the epoch's loss against the mean of that
-- reference's step losses. Prints "rank R ok ..."/"rank R FAIL ...", "rank R done".
package.path = package.path .. ';' .. (arg[0]:match('^(.*)ddp/fit%.lua$') or 'spec/') .. '?.lua'
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local common = require 'ddp.common'
local data = lunet.data
local info = dist.init{ timeout = 60 }
local W, R = info.world_size, info.rank
local phase, path = os.getenv('DDP_PHASE'), os.getenv('DDP_CKPT')
local BS, N = 4, 48   -- per-rank batch, samples

local function say(fmt, ...) io.stdout:write(('rank %d ' .. fmt .. '\n'):format(R, ...)); io.stdout:flush() end

lunet.manual_seed(11)
local X, Y = lunet.randn(N, 3, 8, 8), lunet.randint(1, 6, { N })
local ds = data.TensorDataset(X, Y)
local function opt_for(params) return lunet.optim.SGD(params, { lr = 0.05, momentum = 0.9 }) end

lunet.manual_seed(5)
local model = common.model()
local ddp = lunet.parallel.DistributedDataParallel(model)
local loader = data.DataLoader(ds, { batch_size = BS, shuffle = true, seed = 1 })
assert(loader.num_replicas == W and loader.rank == R, 'the loader shards by the world by default')
local opt = opt_for(ddp:parameters())

if phase == 'A' then
  lunet.fit(ddp, loader, { epochs = 2, optimizer = opt, checkpoint = path, checkpoint_every = { steps = 1 },
    max_steps = 3, quiet = true })
  say('ok phase A')
else
  local hist = lunet.fit(ddp, loader, { epochs = 2, optimizer = opt, checkpoint = path, resume = true, progress = false })
  -- the reference: one device, global batches = consecutive batches of an unsharded loader of 4
  lunet.manual_seed(5)
  local ref = common.model()
  local ropt = opt_for(ref:parameters())
  local crit = lunet.nn.CrossEntropyLoss()
  local l4 = data.DataLoader(ds, { batch_size = BS, shuffle = true, seed = 1, num_replicas = 1, copy = true })
  local epoch2 = {}
  for epoch = 1, 2 do
    local batches = {}
    for x, y in l4:iter() do batches[#batches + 1] = { x, y } end
    local b, step = 1, 0
    while b <= #batches do
      local k = (epoch == 1 and step < 3) and 2 or 3   -- global batch: 2 ranks' then 3 ranks'
      local xs, ys = {}, {}
      for j = b, b + k - 1 do xs[#xs + 1], ys[#ys + 1] = batches[j][1], batches[j][2] end
      b, step = b + k, step + 1
      ropt:zero_grad()
      local loss = crit(ref(lunet.cat(xs, 1)), lunet.cat(ys, 1))
      loss:backward()
      ropt:step()
      if epoch == 2 then epoch2[#epoch2 + 1] = loss:item() end
    end
  end
  local w = common.worst(common.state(ddp.module).params, common.state(ref).params)
  local mean = 0
  for _, l in ipairs(epoch2) do mean = mean + l / #epoch2 end
  local got = hist[#hist].train_loss
  if w > 1e-5 then say('FAIL resume: parameters differ from one device by %g', w)
  elseif math.abs(got - mean) > 1e-5 * mean then say('FAIL resume: epoch 2 loss %.7g, one device %.7g', got, mean)
  else say('ok resume with %d ranks after 2: parameters and loss as one device (%g, loss %.6f)', W, w, got) end
end
say('done')
dist.finalize()
