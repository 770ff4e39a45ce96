-- What the DistributedDataParallel specs share: a tiny model, deterministic
-- batches, the single-process DataParallel reference, and one rank's step.
-- Used in one process (spec/ddp_local_spec.lua: the ranks are groups of one
-- world under the local backend, driven one after another) and under mpirun
-- (spec/ddp/train.lua: one rank per process).
local lunet = require 'lunet'
local nn, optim = lunet.nn, lunet.optim

local M = {}

function M.model(bn)
  -- (no conv bias before BatchNorm: its true gradient is 0, and Adam would amplify the rounding noise)
  local layers = { nn.Conv2d(3, 4, 3, { padding = 1, bias = not bn }) }
  if bn then layers[#layers + 1] = nn.BatchNorm2d(4) end
  for _, m in ipairs({ nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 6), nn.ReLU(),
    nn.Linear(6, 5) }) do layers[#layers + 1] = m end
  return nn.Sequential(layers)
end

function M.opt(kind, params)
  if kind == 'adam' then return optim.Adam(params, { lr = 0.01 }) end
  return optim.SGD(params, { lr = 0.1, momentum = 0.9 })
end

-- o: seed, steps, micro (batches a step), B (the global batch), bn
-- -> data[step][micro] = {x, y} (global batches), the model rank 0 starts from
function M.setup(o)
  lunet.manual_seed(o.seed or 7)
  local data = {}
  for s = 1, o.steps or 3 do
    data[s] = {}
    for j = 1, o.micro or 1 do
      data[s][j] = { lunet.randn(o.B or 12, 3, 8, 8), lunet.randint(1, 6, { o.B or 12 }) }
    end
  end
  return data, M.model(o.bn)
end

-- the parameters and buffers as cpu:0 tensors
function M.state(m)
  return lunet.no_grad(function()
    local p, b = {}, {}
    for i, t in ipairs(m:parameters()) do p[i] = t:to('cpu:0'):clone() end
    for i, t in ipairs(m:buffers()) do b[i] = t:to('cpu:0'):clone() end
    return { params = p, bufs = b }
  end)
end

local function dp_opts(o)
  return { accumulate = o.accumulate, compress = o.compress, sync_bn = o.sync_bn, bucket_mb = o.bucket_mb or 0.0005,
    balance = o.balance }
end

-- one optimizer step of `model` (a DataParallel, or a DDP given its rank's
-- rows) over the micro-batches; returns the loss tensors/objects
function M.step(model, opt, o, micro, rows)
  local crit = nn.CrossEntropyLoss()
  opt:zero_grad()
  local losses = {}
  for j, b in ipairs(micro) do
    local x, y = b[1], b[2]
    if rows then x, y = x:narrow(1, rows[1], rows[2]), y:narrow(1, rows[1], rows[2]) end
    local function go()
      local loss
      if o.forward_loss then loss = model:forward_loss(crit, x, y) else local out = model(x); loss = crit(out, y:to(out.device)) end
      loss:backward()
      losses[j] = loss
    end
    if o.no_sync and j < #micro then model:no_sync(go) else go() end
  end
  opt:step()
  return losses
end

-- DataParallel over W virtual devices (cpu:0 .. cpu:W-1): its final state and losses
function M.reference(W, o)
  local data, model = M.setup(o)
  local devs = {}
  for k = 1, W do devs[k] = 'cpu:' .. (k - 1) end
  local dpo = dp_opts(o)
  dpo.devices = devs
  local dp = lunet.parallel.DataParallel(model, dpo)
  local opt = M.opt(o.optim, dp:parameters())
  local losses = {}
  for s = 1, #data do
    for _, l in ipairs(M.step(dp, opt, o, data[s])) do losses[#losses + 1] = l:item() end
  end
  return M.state(dp.module), losses, dp
end

-- rank r's rows {first, count} of a global batch of B: DataParallel's split
-- (with balance = list/'auto' the DDP takes them itself: nil)
function M.rows(W, o, r, B)
  if o.balance then return nil end
  local sizes = lunet.parallel.Balance(W, 'even'):split(B)
  local first = 1
  for k = 1, r - 1 do first = first + sizes[k] end
  return { first, sizes[r] }
end

-- a DDP for rank r (1-based) over group; the model of ranks other than the
-- first is perturbed first: the broadcast at construction must undo it
function M.ddp(model, group, o, r)
  if r > 1 then lunet.no_grad(function() for _, p in ipairs(model:parameters()) do p:add_(0.05 * r) end end) end
  local dpo = dp_opts(o)
  dpo.group = group
  return lunet.parallel.DistributedDataParallel(model, dpo)
end

-- the worst relative difference of the parameters st from the reference's
-- (with compress, of the updates from p0: the wire carries ~3 digits, and
-- the backends may round the sum in another order), and its tolerance
function M.params_differ(st, ref, p0, o)
  if not o.compress then return M.worst(st.params, ref.params), 1e-5 end
  local a, b = {}, {}
  for i = 1, #ref.params do a[i], b[i] = st.params[i] - p0.params[i], ref.params[i] - p0.params[i] end
  return M.worst(a, b), 2 ^ -6
end

-- largest relative difference between two lists of tensors
function M.worst(a, b)
  local w = 0
  for i = 1, #b do
    local d = (a[i]:to('cpu:0') - b[i]):abs():max():item()
    w = math.max(w, d / math.max(b[i]:abs():max():item(), 1e-12))
  end
  return w
end

return M
