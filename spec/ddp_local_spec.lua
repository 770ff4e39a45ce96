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

describe('parallel.DistributedDataParallel: bad input', function()
  setup(function() lunet.set_cpu_devices(2) end)
  teardown(function()
    jit.flush()
    for _ = 1, 4 do collectgarbage() end
    pcall(lunet.synchronize)
    lunet.set_cpu_devices(1)
  end)

  it('names the problem', function()
    local one = lunet.comm.Communicator({ 'cpu:0' })
    local two = lunet.comm.Communicator({ 'cpu:0', 'cpu:1' })
    local m = common.model()
    local cases = {
      { function() DDP(42, { group = one }) end, 'DistributedDataParallel: expected an nn.Module, got number' },
      { function() DDP(m, { group = two }) end, 'DistributedDataParallel: group holds 2 ranks in this process; one process holds one rank' },
      { function() DDP(m, { group = {} }) end, 'DistributedDataParallel: group must be a lunet.comm Communicator' },
      { function() DDP(m, { group = one, bucket_md = 1 }) end, 'bucket_md' },
      { function() DDP(m, { group = one, balance = { 1, 2 } }) end, 'DistributedDataParallel: balance has 2 weights for 1 devices' },
      { function() DDP(m, { group = one, accumulate = 0 }) end, 'DistributedDataParallel: accumulate must be an integer >= 1, got 0' },
      { function() DDP(m, { group = one }):join(5) end, 'DistributedDataParallel: join: expected an iterator function' },
      { function() DDP(m, { group = one })('x') end, 'DistributedDataParallel: forward: input must be a tensor, got string' },
      { function() DDP(m, { group = one }):forward_loss(lunet.nn.ReLU(), lunet.zeros(2, 3, 8, 8), lunet.zeros(2)) end,
        'DistributedDataParallel: forward_loss: criterion must be an nn loss module' },
      { function() DDP(m, { group = one }):forward_loss(lunet.nn.CrossEntropyLoss(), lunet.zeros(2, 3, 8, 8), lunet.zeros(3)) end,
        'DistributedDataParallel: forward_loss: target has 3 rows, the input 2' },
      { function() lunet.data.DataLoader(lunet.data.TensorDataset(lunet.zeros(4, 2)), { group = two }) end,
        'DataLoader: group must be a lunet.comm Communicator holding one rank in this process' },
    }
    for i, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, 'case ' .. i)
      assert.matches(c[2], tostring(err), 1, true)
    end
  end)

  it('a world of one: trains as the plain module, join ends with the iterator', function()
    lunet.manual_seed(3)
    local m = common.model()
    local ref = m:clone()
    local ddp = DDP(m, { group = lunet.comm.Communicator({ 'cpu:0' }) })
    assert.equal(0, ddp.rank); assert.equal(1, ddp.world_size); assert.is_true(ddp:is_main())
    local o1, o2 = common.opt('sgd', ddp:parameters()), common.opt('sgd', ref:parameters())
    local crit = lunet.nn.CrossEntropyLoss()
    local list = {}
    for i = 1, 3 do list[i] = { lunet.randn(5, 3, 8, 8), lunet.randint(1, 6, { 5 }) } end
    local i, steps = 0, 0
    for x, y in ddp:join(function() i = i + 1; if list[i] then return list[i][1], list[i][2] end end) do
      o1:zero_grad(); ddp:forward_loss(crit, x, y):backward(); o1:step()
      o2:zero_grad(); crit(ref(x), y):backward(); o2:step()
      steps = steps + 1
    end
    assert.equal(3, steps)
    assert.is_true(common.worst(ddp.module:parameters(), ref:parameters()) <= 1e-6)
    assert.same({ 7, 11 }, ddp:sum_numbers({ 7, 11 }))
  end)
end)

describe('DataLoader sharding', function()
  it('group = a communicator of one rank: its size and rank; a state converts to another rank count', function()
    local ds = lunet.data.TensorDataset(lunet.arange(48):view(48, 1), lunet.arange(48))
    local g = lunet.comm.Communicator({ 'cpu:0' }, { world_size = 2, ranks = { 2 }, rendezvous = 'ddp-loader' })
    local l2 = lunet.data.DataLoader(ds, { batch_size = 4, group = g, seed = 1, shuffle = true })
    assert.equal(2, l2.num_replicas); assert.equal(1, l2.rank); assert.equal(6, #l2)
    local it = l2:iter()
    for _ = 1, 3 do it() end
    local st = l2:state_dict()
    assert.same({ 3, 2, 48 }, { st.position, st.num_replicas, st.total })
    -- 3 batches of 4 on 2 ranks = 24 samples = 2 batches of 4 on 3 ranks
    local l3 = lunet.data.DataLoader(ds, { batch_size = 4, num_replicas = 3, rank = 0, seed = 1, shuffle = true })
    l3:load_state_dict(st)
    assert.equal(2, l3.position)
    -- its next batch is samples 24 + 3 * (0..3) of the epoch's order
    local full = lunet.data.DataLoader(ds, { batch_size = 48, seed = 1, shuffle = true, num_replicas = 1 })
    local order = select(2, full:iter()()):totable()
    local _, y = l3:iter()()
    assert.same({ order[25], order[28], order[31], order[34] }, y:totable())
    local other = lunet.data.DataLoader(lunet.data.TensorDataset(lunet.zeros(40, 1)), { batch_size = 4, num_replicas = 3, rank = 0 })
    local ok, err = pcall(other.load_state_dict, other, st)
    assert.is_false(ok)
    assert.matches('the state is for a dataset of 48 samples, this loader has 40', err, 1, true)
  end)
end)
