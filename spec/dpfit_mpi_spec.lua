-- lunet.fit over a Pipeline across processes: spec/dpfit/fit.lua under
-- `mpirun -np 2` and `-np 4` (2 pipelines x 2 stages), each with a hard
-- deadline (timeout -s KILL: a hang fails the spec). Pending (visibly) only
-- where mpirun is not installed.
local shell = require 'shell'

local have_mpirun = shell.sh('command -v mpirun'):match('mpirun') ~= nil

-- spec/dpfit/fit.lua under mpirun -np n, one thread a rank, n virtual devices each
local function launch(n, env)
  return shell.mpirun(n, 'spec/dpfit/fit.lua', 'OMP_NUM_THREADS=1 LUNET_CPU_DEVICES=' .. n .. ' ' .. env, 60)
end

-- every rank printed "done", none a FAIL line, and each `count` ok lines
local function all_ok(out, n, count)
  shell.ranks_ok(out, n)
  for r = 0, n - 1 do
    local _, oks = out:gsub(('rank %d ok '):format(r), '')
    assert.equal(count, oks, out)
  end
end

describe('lunet.fit over a Pipeline with a group, in one process (a group of one: one stage)', function()
  local lunet = require 'lunet'
  local nn, optim, data = lunet.nn, lunet.optim, lunet.data
  local function model(extra)
    lunet.manual_seed(3)
    local m = nn.Sequential { nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3) }
    if extra then m:add(nn.Tanh()); m:add(nn.Linear(3, 3)) end
    return m
  end
  local function pipe(m) return lunet.parallel.Pipeline(m or model(), { group = lunet.comm.Communicator({ 'cpu:0' }), chunks = 3 }) end
  lunet.manual_seed(4)
  local ds = data.TensorDataset(lunet.randn(30, 4), lunet.randint(1, 4, { 30 }))
  local function loader(o) return data.DataLoader(ds, { batch_size = 8, shuffle = true, seed = 2, num_replicas = o or 1 }) end
  local function opts(m, more)
    local o = { epochs = 2, optimizer = optim.Adam(m:parameters(), { lr = 0.05 }), val_loader = loader(), quiet = true,
      progress = false }
    for k, v in pairs(more or {}) do o[k] = v end
    return o
  end
  local function tmp() local p = os.tmpname(); os.remove(p); return p end

  it('trains, evaluates and checkpoints as the model itself; the checkpoint resumes in the model', function()
    local ref, p = model(), pipe()
    local rh = lunet.fit(ref, loader(), opts(ref))
    local path = tmp()
    local h = lunet.fit(p, loader(), opts(p, { checkpoint = path, checkpoint_every = { steps = 1 }, max_steps = 5 }))
    assert.equal(2, #h)
    for _, k in ipairs({ 'train_loss', 'train_acc', 'val_loss', 'val_acc' }) do
      assert.near(rh[1][k], h[1][k], 1e-5 * math.max(rh[1][k], 1), k)
    end
    -- the checkpoint: the whole model's state and an optimizer of one group over model:parameters()
    local st = lunet.checkpoint.load(path)
    assert.equal(4, #st.optimizer.param_groups[1].params)
    assert.truthy(st.optimizer.state[4].exp_avg)
    local m = model()
    local h2 = lunet.fit(m, loader(), opts(m, { checkpoint = path, resume = true }))
    os.remove(path)
    for _, k in ipairs({ 'train_loss', 'train_acc', 'val_loss', 'val_acc' }) do
      assert.near(rh[2][k], h2[2][k], 1e-5 * math.max(rh[2][k], 1), k)
    end
    local want = ref:state_dict()
    for k, t in pairs(m:state_dict()) do assert.is_true((t - want[k]):abs():max():item() < 1e-5, k) end
  end)

  it('distributed.set_data_shard (which a Pipeline across processes calls) checks its arguments', function()
    local dist = require 'lunet.distributed'
    dist.init()
    local n, r = dist.data_shard()
    assert.has_error(function() dist.set_data_shard(2, 2) end,
      'distributed.set_data_shard: expected num_replicas >= 1 and 0 <= rank < num_replicas, got 2, 2')
    assert.has_error(function() dist.set_data_shard(0, 0) end,
      'distributed.set_data_shard: expected num_replicas >= 1 and 0 <= rank < num_replicas, got 0, 0')
    assert.same({ n, r }, { dist.data_shard() })
  end)

  it('refuses what it cannot do, naming it', function()
    local function fails(fn, msg)
      local ok, err = pcall(fn)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(msg, 1, true), tostring(err))
    end
    local p = pipe()
    fails(function() lunet.fit(p, loader(), opts(p, { loss = nn.CrossEntropyLoss({ weight = lunet.ones(3) }) })) end,
      'fit: a Pipeline across processes computes the loss on its last stage (forward_loss), which takes')
    fails(function() lunet.fit(p, loader(2), opts(p)) end,
      'fit: the loader of process rank 0 is sharded as rank 0 of 2, but the ranks of a pipeline across processes read the '
      .. 'same batches')
    local path = tmp()
    -- one process's checkpoint of an optimizer with 2 groups: which parameters they hold is not saved
    local one = model()
    local ps = one:parameters()
    lunet.fit(one, loader(), opts(one, { checkpoint = path, epochs = 1,
      optimizer = optim.SGD({ { params = { ps[1], ps[3] } }, { params = { ps[2], ps[4] } } }, { lr = 0.1 }) }))
    ps = p:parameters()
    fails(function()
      lunet.fit(p, loader(), opts(p, { checkpoint = path, resume = true,
        optimizer = optim.SGD({ { params = { ps[1], ps[3] } }, { params = { ps[2], ps[4] } } }, { lr = 0.1 }) }))
    end, 'Pipeline: resuming: the checkpoint\'s optimizer has 2 param groups but no model_params saying which of the '
      .. 'model\'s parameters they hold')
    -- a checkpoint of another model
    local other = model(true)
    lunet.fit(other, loader(), opts(other, { checkpoint = path, epochs = 1 }))
    fails(function() lunet.fit(p, loader(), opts(p, { checkpoint = path, resume = true })) end,
      'Pipeline: resuming: the checkpoint\'s optimizer holds 6 params, the whole model 4')
    os.remove(path)
  end)
end)

describe('lunet.fit over a Pipeline across processes', function()
  if not have_mpirun then
    it('needs Open MPI', function() pending('mpirun not installed: apt-get install openmpi-bin libopenmpi-dev') end)
    return
  end
  for _, c in ipairs({ { 2, 1 }, { 3, 1 }, { 4, 2 } }) do
    local n, k = c[1], c[2]
    it(('-np %d%s: GPipe (SGD) and 1F1B (Adam, accumulate 2) with a val loader give one process\'s history and '
      .. 'parameters; a loader sharded by rank, or seeded apart (hybrid: or with a batch of fewer rows than pipelines), '
      .. 'is refused on every rank'):format(n,
      k > 1 and (' as %d pipelines x %d stages'):format(k, n / k) or ''), function()
      local out, rc = launch(n, 'DPFIT_PHASE=fit DPFIT_REPLICAS=' .. k)
      assert.equal(0, rc, out)
      all_ok(out, n, k > 1 and 5 or 4)
    end)
  end

  it('SIGINT on one rank stops every rank after the same step (no hang); the checkpoint then written resumes as an '
    .. 'uninterrupted run', function()
    local path = os.tmpname()
    os.remove(path)
    local out, rc = launch(2, 'DPFIT_PHASE=sigint DPFIT_CKPT=' .. path)
    assert.equal(0, rc, out)
    all_ok(out, 2, 1)
    out, rc = launch(2, 'DPFIT_PHASE=resume DPFIT_CKPT=' .. path)
    os.remove(path)
    assert.equal(0, rc, out)
    all_ok(out, 2, 1)
  end)

  it('a checkpoint written by -np 2 (mid-epoch, Adam) resumes with -np 2, with -np 3 and in one process, one written '
    .. 'by 2 x 2 with 2 x 2: the same history and parameters as an uninterrupted run', function()
    local path, hybrid = os.tmpname(), os.tmpname()
    local function copy(to) assert(os.execute(('cp %s %s'):format(path, to)) == 0) end
    os.remove(path)
    os.remove(hybrid)
    local out, rc = launch(2, 'DPFIT_PHASE=save DPFIT_CKPT=' .. path)
    assert.equal(0, rc, out)
    all_ok(out, 2, 1)
    out, rc = launch(4, 'DPFIT_PHASE=save DPFIT_REPLICAS=2 DPFIT_CKPT=' .. hybrid)
    assert.equal(0, rc, out)
    all_ok(out, 4, 1)
    local copies = {}
    for i = 1, 2 do copies[i] = path .. '.' .. i; copy(copies[i]) end
    local function resume(n, file, env)
      local o, r = launch(n, 'DPFIT_PHASE=resume DPFIT_CKPT=' .. file .. ' ' .. (env or ''))
      assert.equal(0, r, o)
      all_ok(o, n, 1)
      local _, resumed = o:gsub('resumed from', '')
      local _, epochs = o:gsub('epoch 2/2', '')
      assert.equal(1, resumed, 'one rank prints:\n' .. o)
      assert.equal(1, epochs, 'one rank prints:\n' .. o)
    end
    resume(2, path)
    resume(3, copies[1])
    resume(4, hybrid, 'DPFIT_REPLICAS=2')
    -- the unwrapped model in a process of its own (no mpirun: a world of one)
    local r = shell.root
    out, rc = shell.sh(('cd %s && LD_PRELOAD="${LD_PRELOAD:-}" LUA_PATH="%slua/?.lua;%slua/?/init.lua;%sspec/?.lua;;" '
      .. 'DPFIT_PHASE=one DPFIT_CKPT=%s timeout -s KILL 60 luajit spec/dpfit/fit.lua'):format(r, r, r, r, copies[2]))
    os.remove(path)
    os.remove(hybrid)
    for i = 1, 2 do os.remove(copies[i]) end
    assert.equal(0, rc, out)
    all_ok(out, 1, 1)
  end)
end)
