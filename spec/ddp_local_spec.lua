-- parallel.DistributedDataParallel in one process: W ranks modelled as W
-- groups of one rank each in one world of the local backend (rendezvous),
-- driven one after another by this thread. Each rank queues its whole step
-- (forward, backward and its bucket all-reduces, optimizer step) without
-- waiting for the others: the collectives run on the devices' streams once
-- every rank has queued them. After a few steps every rank's parameters
-- equal single-process DataParallel over W virtual devices on the same
-- global batches. (spec/ddp_mpi_spec.lua runs the same over processes.)
local lunet = require 'lunet'
local common = require 'ddp.common'
local DDP = lunet.parallel.DistributedDataParallel

local world_id = 0

-- the W ranks trained side by side; returns each rank's final state and the
-- losses (rank 1's loss objects' items)
local function run_world(W, o)
  world_id = world_id + 1
  local name = 'ddp-spec-' .. world_id
  local data, model0 = common.setup(o)
  local p0 = common.state(model0)
  -- everything a rank reads is on its device before any rank queues a
  -- collective: a copy from another rank's device would wait for that
  -- device's stream, held in a collective until this rank joins it (a cycle
  -- that separate processes cannot have)
  local models, local_data = {}, {}
  for r = 1, W do
    local dev = 'cpu:' .. (r - 1)
    models[r] = (r == 1 and model0 or model0:clone()):to(dev)
    local_data[r] = {}
    for s = 1, #data do
      local_data[r][s] = {}
      for j, b in ipairs(data[s]) do local_data[r][s][j] = { b[1]:to(dev), b[2]:to(dev) } end
    end
  end
  lunet.synchronize()
  local ranks = {}
  for r = 1, W do
    local g = lunet.comm.Communicator({ 'cpu:' .. (r - 1) }, { world_size = W, ranks = { r }, rendezvous = name })
    local ddp = common.ddp(models[r], g, o, r)
    ranks[r] = { ddp = ddp, opt = common.opt(o.optim, ddp:parameters()), group = g }
  end
  local losses = {}
  for s = 1, #data do
    local per = {}
    for r = 1, W do
      local rows = common.rows(W, o, r, data[s][1][1]:size(1))
      per[r] = common.step(ranks[r].ddp, ranks[r].opt, o, local_data[r][s], rows)
    end
    losses[s] = per
  end
  local states, items = {}, {}
  for r = 1, W do states[r] = common.state(ranks[r].ddp.module) end
  for s = 1, #data do for _, l in ipairs(losses[s][1]) do items[#items + 1] = l:item() end end
  return states, items, p0
end

local function check(W, o)
  local ref, ref_losses = common.reference(W, o)
  local states, losses, p0 = run_world(W, o)
  for r = 1, W do
    local w, tol = common.params_differ(states[r], ref, p0, o)
    assert.is_true(w <= tol, ('rank %d: parameters differ from DataParallel by %g'):format(r, w))
    -- (without sync_bn, ranks other than 0 keep their shard's running stats
    -- until the next forward's broadcast, as DataParallel's replicas)
    if o.bn and (r == 1 or o.sync_bn) then
      local b = common.worst(states[r].bufs, ref.bufs)
      assert.is_true(b <= tol, ('rank %d: buffers differ from DataParallel by %g'):format(r, b))
    end
  end
  if o.forward_loss then
    for i = 1, #ref_losses do
      assert.is_true(math.abs(losses[i] - ref_losses[i]) <= 1e-5 * math.abs(ref_losses[i]),
        ('loss %d: %g, DataParallel %g'):format(i, losses[i], ref_losses[i]))
    end
  end
end

describe('parallel.DistributedDataParallel (ranks as groups of one process)', function()
  for _, W in ipairs({ 2, 3 }) do
    describe(('%d ranks'):format(W), function()
      setup(function() lunet.set_cpu_devices(W) end)
      teardown(function()
        jit.flush()
        for _ = 1, 4 do collectgarbage() end
        pcall(lunet.synchronize)
        lunet.set_cpu_devices(1)
      end)

      it('SGD, ddp(x) on each rank\'s shard of an even batch: DataParallel\'s parameters', function()
        check(W, { B = 12, optim = 'sgd' })
      end)
      it('Adam, forward_loss over an uneven split (batch 11): DataParallel\'s parameters and losses', function()
        check(W, { B = 11, optim = 'adam', forward_loss = true })
      end)
      it('accumulate = 2, and no_sync', function()
        check(W, { B = 12, micro = 2, accumulate = 2, optim = 'sgd', forward_loss = true })
        check(W, { B = 12, micro = 3, no_sync = true, optim = 'adam' })
      end)
      it('BatchNorm: buffers broadcast from rank 0; sync_bn: the global batch\'s statistics', function()
        check(W, { B = 12, bn = true, optim = 'sgd' })
        check(W, { B = 11, bn = true, sync_bn = true, optim = 'adam', forward_loss = true })
      end)
      it('balance = a list of weights: each rank takes its rows of the global batch', function()
        local w = {}
        for k = 1, W do w[k] = k end
        check(W, { B = 13, balance = w, optim = 'sgd', forward_loss = true })
      end)
      it("compress = 'bf16'", function()
        check(W, { B = 12, compress = 'bf16', optim = 'sgd' })
      end)
    end)
  end
end)
