-- One rank of spec/ddp_mpi_spec.lua (under mpirun, LUNET_CPU_DEVICES = the
-- world size): DistributedDataParallel over lunet.distributed's world against
-- single-process DataParallel over W virtual devices, which every rank
-- computes for itself on the same batches. Prints "rank R ok CASE" or
-- "rank R FAIL CASE: why" per case, then "rank R done".
package.path = package.path .. ';' .. (arg[0]:match('^(.*)ddp/train%.lua$') or 'spec/') .. '?.lua'
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local common = require 'ddp.common'
local info = dist.init{ timeout = 60 }
local W, R = info.world_size, info.rank
local world = dist.world()

local function say(fmt, ...) io.stdout:write(('rank %d ' .. fmt .. '\n'):format(R, ...)); io.stdout:flush() end

local function weights()
  local w = {}
  for k = 1, W do w[k] = k end
  return w
end

local cases = {
  { 'sgd even', { B = 12, optim = 'sgd' } },
  { 'adam forward_loss uneven', { B = 11, optim = 'adam', forward_loss = true } },
  { 'accumulate', { B = 12, micro = 2, accumulate = 2, optim = 'sgd', forward_loss = true } },
  { 'no_sync', { B = 12, micro = 3, no_sync = true, optim = 'adam' } },
  { 'bn', { B = 12, bn = true, optim = 'sgd' } },
  { 'sync_bn uneven', { B = 11, bn = true, sync_bn = true, optim = 'adam', forward_loss = true } },
  { 'balance weights', { B = 13, balance = weights(), optim = 'sgd', forward_loss = true } },
  { 'compress bf16', { B = 12, compress = 'bf16', optim = 'sgd' } },
  { 'balance auto', { B = 16, steps = 8, balance = 'auto', optim = 'adam', forward_loss = true } },
}

local function run(o)
  local ref, ref_losses = common.reference(W, o)
  local data, model = common.setup(o)
  local p0 = common.state(model)
  local ddp = common.ddp(model, world, o, R + 1)
  local opt = common.opt(o.optim, ddp:parameters())
  local losses = {}
  for s = 1, #data do
    local rows = common.rows(W, o, R + 1, data[s][1][1]:size(1))
    for _, l in ipairs(common.step(ddp, opt, o, data[s], rows)) do losses[#losses + 1] = l end
  end
  local st = common.state(ddp.module)
  local w, tol = common.params_differ(st, ref, p0, o)
  if w > tol then return ('parameters differ from DataParallel by %g'):format(w) end
  if o.bn and (R == 0 or o.sync_bn) then
    local b = common.worst(st.bufs, ref.bufs)
    if b > 1e-5 then return ('buffers differ from DataParallel by %g'):format(b) end
  end
  if o.balance == 'auto' then
    -- the split follows every rank's measured speed, the same on every rank
    local gb = ddp.global_balance
    if not gb.speed[1] then return 'no speed was ever exchanged' end
    local w = lunet.tensor(gb.weights, { dtype = 'float64' })
    local lo, hi = w:clone(), w:clone()
    world:allreduce({ lo }, { op = 'min' }); world:allreduce({ hi }, { op = 'max' })
    if (hi - lo):abs():max():item() ~= 0 then return 'the ranks split the batch differently' end
  end
  if o.forward_loss then
    for i, l in ipairs(losses) do
      local a, b = l:item(), ref_losses[i]
      if math.abs(a - b) > 1e-5 * math.abs(b) then return ('loss %d is %g, DataParallel %g'):format(i, a, b) end
    end
  end
end

local only = os.getenv('DDP_CASE')
for _, c in ipairs(cases) do
  if not only or only == c[1] then
    local ok, err = pcall(run, c[2])
    if ok and err == nil then say('ok %s', c[1]) else say('FAIL %s: %s', c[1], tostring(err)) end
  end
end

-- uneven inputs: rank r has 2 + r batches; join ends the loop on every rank
-- after 2 steps, and the ranks stay identical
do
  lunet.manual_seed(3)
  local ddp = lunet.parallel.DistributedDataParallel(common.model(), { group = world })
  local opt = common.opt('sgd', ddp:parameters())
  local crit = lunet.nn.CrossEntropyLoss()
  local list = {}
  for i = 1, 2 + R do list[i] = { lunet.randn(4, 3, 8, 8), lunet.randint(1, 6, { 4 }) } end
  local i = 0
  local function iter() i = i + 1; local b = list[i]; if b then return b[1], b[2] end end
  local steps = 0
  for x, y in ddp:join(iter) do
    opt:zero_grad(); ddp:forward_loss(crit, x, y):backward(); opt:step()
    steps = steps + 1
  end
  local p = ddp.module:parameters()[1]
  local lo, hi = p:clone(), p:clone()
  world:allreduce({ lo }, { op = 'min' }); world:allreduce({ hi }, { op = 'max' })
  local spread = (hi - lo):abs():max():item()
  if steps == 2 and spread == 0 and ddp.joined == (R > 0) then say('ok join')
  else say('FAIL join: %d steps, parameters spread %g, joined %s', steps, spread, tostring(ddp.joined)) end
end

-- fit with loaders of different lengths (not sharded): every rank stops
-- after the shortest's batches, accumulating in the same groups
do
  lunet.manual_seed(4)
  local n = 16 + 4 * R
  local ds = lunet.data.TensorDataset(lunet.randn(n, 3, 8, 8), lunet.randint(1, 6, { n }))
  local loader = lunet.data.DataLoader(ds, { batch_size = 4, num_replicas = 1, shuffle = true, seed = 1 })
  local ddp = lunet.parallel.DistributedDataParallel(common.model(), { group = world, accumulate = 3 })
  local opt = common.opt('sgd', ddp:parameters())
  local trainer = lunet.Trainer(ddp, { epochs = 2, optimizer = opt, quiet = true })
  trainer:fit(loader)
  local p = ddp.module:parameters()[1]
  local lo, hi = p:clone(), p:clone()
  world:allreduce({ lo }, { op = 'min' }); world:allreduce({ hi }, { op = 'max' })
  local spread = (hi - lo):abs():max():item()
  -- 4 batches an epoch on every rank (the shortest's), in groups of 3 and 1: 2 steps an epoch
  if trainer.step == 4 and spread == 0 then say('ok fit uneven loaders')
  else say('FAIL fit uneven loaders: %d steps, parameters spread %g', trainer.step, spread) end
end

say('done')
dist.finalize()
