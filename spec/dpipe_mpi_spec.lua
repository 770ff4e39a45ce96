-- parallel.Pipeline across processes (Pipeline(model, {group = dist.world()})):
-- spec/dpipe/*.lua under `mpirun -np 2` and `-np 3`, each with a hard
-- deadline (timeout -s KILL: a hang fails the spec). Pending (visibly) only
-- where mpirun is not installed.
local shell = require 'shell'

local have_mpirun = shell.sh('command -v mpirun'):match('mpirun') ~= nil

-- spec/dpipe/<script> under mpirun -np n, one thread a rank, n virtual devices each
local function launch(n, script, deadline, env)
  return shell.mpirun(n, 'spec/dpipe/' .. script, 'OMP_NUM_THREADS=1 LUNET_CPU_DEVICES=' .. n .. ' ' .. (env or ''),
    deadline or 60)
end

describe('Pipeline with a group, in one process (a group of one: one stage)', function()
  local lunet = require 'lunet'
  local nn = lunet.nn
  local function model()
    lunet.manual_seed(3)
    return nn.Sequential { nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3) }
  end
  local function group() return lunet.comm.Communicator({ 'cpu:0' }) end

  it('trains as the model itself, and evaluates', function()
    local x, y = lunet.randn(10, 4), lunet.randint(1, 4, { 10 })
    local ref, pipe = model(), lunet.parallel.Pipeline(model(), { group = group(), chunks = 3, schedule = 'gpipe' })
    local o1, o2 = lunet.optim.Adam(ref:parameters(), { lr = 0.1 }), lunet.optim.Adam(pipe:parameters(), { lr = 0.1 })
    local crit = nn.CrossEntropyLoss()
    for _ = 1, 3 do
      o1:zero_grad(); o2:zero_grad()
      local a = crit(ref(x), y)
      a:backward(); o1:step()
      local b = pipe:forward_loss(crit, x, y)
      b:backward(); o2:step()
      assert.near(a:item(), b:item(), 1e-5 * a:item())
    end
    local want = ref:state_dict()
    for k, t in pairs(pipe:state_dict()) do assert.is_true((t - want[k]):abs():max():item() < 1e-5, k) end
    local l = lunet.no_grad(function() return pipe:forward_loss(crit, x, y) end)
    assert.is_true((l:output() - ref(x)):abs():max():item() < 1e-5)
    assert.truthy(pipe:schedule_text():find('gpipe, 1 stage over processes, 3 micro-batches', 1, true))
  end)

  it('rejects what it cannot do, naming it', function()
    local function rejects(opts, msg)
      local ok, err = pcall(lunet.parallel.Pipeline, model(), opts)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(msg, 1, true), tostring(err))
    end
    rejects({ group = group(), devices = { 'cpu:0' } }, 'Pipeline: devices and group exclude each other')
    rejects({ group = {} }, 'Pipeline: group must be a lunet.comm Communicator')
    rejects({ group = group(), balance = 'time' }, "Pipeline: balance 'time' across processes needs sample = x")
    rejects({ group = group(), replicas = 2 }, 'Pipeline: 1 processes cannot hold 2 replicas')
    rejects({ group = group(), chunks = 0 }, 'Pipeline: chunks must be an integer >= 1, got 0')
    rejects({ group = group(), schedule = 'interleaved' }, 'Pipeline: the interleaved schedule runs its stages in one process')
    rejects({ group = group(), balance = { 1, 2 } }, 'Pipeline: balance has 2 entries for 1 stages')
    local pipe = lunet.parallel.Pipeline(model(), { group = group() })
    local crit = nn.CrossEntropyLoss()
    local function fails(fn, msg)
      local ok, err = pcall(fn)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(msg, 1, true), tostring(err))
    end
    fails(function() return pipe(lunet.randn(2, 4)) end, 'Pipeline: forward: across processes, run pipe:forward_loss')
    fails(function() return pipe:forward_loss(crit, nil, lunet.tensor({ 1 })) end,
      'Pipeline: forward_loss: input must be a tensor, got nil')
    fails(function() return pipe:forward_loss(crit, lunet.randn(2, 4), lunet.tensor({ 1, 2, 3 })) end,
      'Pipeline: forward_loss: target has 3 rows, the input 2')
    fails(function() return pipe:forward_loss(nn.Linear(2, 2), lunet.randn(2, 4), lunet.tensor({ 1, 2 })) end,
      'Pipeline: forward_loss: criterion must be an nn loss module')
    fails(function() return pipe:balance_report() end, 'Pipeline: balance_report: not measured across processes')
    fails(function() return pipe:to('cpu:1') end, 'Pipeline: to: this stage lives on cpu:0')
    local l = pipe:forward_loss(crit, lunet.randn(4, 4), lunet.randint(1, 4, { 4 }))
    fails(function() return l:item() end, 'Pipeline: loss:item: the 1F1B schedule computes the loss during backward')
    l:backward()
    assert.is_true(l:item() > 0)
    fails(function() return l:backward() end, 'Pipeline: backward: already run for this batch')
  end)
end)

describe('Pipeline over processes', function()
  if not have_mpirun then
    it('needs Open MPI', function() pending('mpirun not installed: apt-get install openmpi-bin libopenmpi-dev') end)
    return
  end
  for _, n in ipairs({ 2, 3 }) do
    it(('-np %d: %d stages train as one process (GPipe, 1F1B and zero-bubble; chunks 1, 3, 8 of a batch of 11; SGD, Adam; '
      .. 'checkpointing with deferred BatchNorm; MSELoss; reduction sum; balance time and memory measured by rank 0); '
      .. 'full_state_dict on rank 0; a forward_loss before the last backward an error on every rank; abandon()'):format(n, n), function()
      local out, rc = launch(n, 'train.lua')
      assert.equal(0, rc, out)
      shell.ranks_ok(out, n)
      for r = 0, n - 1 do
        local _, oks = out:gsub(('rank %d ok '):format(r), '')
        assert.equal(24, oks, out)
      end
    end)
  end

  it('-np 4 as 2 pipelines x 2 stages (replicas = 2): each stage\'s gradients averaged over its 2 processes, '
    .. 'the second pipeline\'s parameters made the first\'s; the same training as one process', function()
    local out, rc = launch(4, 'train.lua', 90, 'DPIPE_REPLICAS=2')
    assert.equal(0, rc, out)
    shell.ranks_ok(out, 4)
    for r = 0, 3 do
      local _, oks = out:gsub(('rank %d ok '):format(r), '')
      assert.equal(24, oks, out)
    end
  end)

  for _, n in ipairs({ 2, 3 }) do
    it(('-np %d: an error in stage 2 ends every rank with a named error, no hang'):format(n), function()
      local t0 = os.time()
      local out, rc = launch(n, 'error.lua', 60)
      assert.is_true(os.time() - t0 < 40, 'took ' .. (os.time() - t0) .. ' s:\n' .. out)
      assert.is_not.equal(0, rc, out)
      assert.truthy(out:find('rank 1 raises: [^\n]*Pipeline: forward of micro%-batch 1 at stage 2 %(process rank 1, '
        .. 'cpu:0%): Bomb: a bug in this layer'), out)
      for r = 0, n - 1 do
        if r ~= 1 then
          local line = out:match(('rank %d error: [^\n]*'):format(r))
          assert.truthy(line, ('rank %d did not fail:\n%s'):format(r, out))
          assert.truthy(line:find('Pipeline: ', 1, true), line)
          -- (its message, or its end, or, on a loaded machine, the end of
          -- a rank that stopped for it: whichever reaches this rank first)
          assert.truthy(line:find('stage 2 failed (its rank raised the error)', 1, true)
            or line:find('rank 1 %(host %S+, pid %d+%) has ended')
            or line:find('rank %d+ %(host %S+, pid %d+%) is gone'), line)
        end
      end
    end)
  end

  it('-np 3: the failed stage\'s rank catches the error and goes on; the others fail at once all the same', function()
    local out, rc = launch(3, 'error.lua', 60, 'DPIPE_CATCH=1')
    assert.equal(0, rc, out)
    shell.ranks_ok(out, 3)
    assert.truthy(out:find('rank 1 raises: [^\n]*Bomb: a bug in this layer'), out)
    for _, r in ipairs({ 0, 2 }) do
      local t, line = out:match(('rank %d error after ([%%d.]+) s: ([^\n]*)'):format(r))
      assert.truthy(line, ('rank %d did not fail:\n%s'):format(r, out))
      assert.truthy(line:find('stage 2 failed (its rank raised the error)', 1, true), line)
      assert.is_true(tonumber(t) < 2, line)   -- (rank 1 ends only 3 s later)
    end
  end)
end)

describe('README, Pipelines across processes', function()
  local function lunet_checkpoint_load(path) return require('lunet.checkpoint').load(path) end
  if not have_mpirun then
    it('needs Open MPI', function() pending('mpirun not installed: apt-get install openmpi-bin libopenmpi-dev') end)
    return
  end
  it('its Lua block runs as pipe.lua under its `mpirun -np 2` line, as written', function()
    local readme = shell.readfile(shell.root .. 'README.md')
    local sec = readme:match('\n### Pipelines across processes\n(.-)\n## ')
    assert.truthy(sec, 'README has no section "Pipelines across processes"')
    local code = sec:match('```lua\n(.-)```')
    local cmd = 'mpirun --allow-run-as-root --bind-to none -np 2 luajit pipe.lua'
    assert.truthy(sec:find(cmd, 1, true), 'README no longer shows ' .. cmd)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute('mkdir -p ' .. dir) == 0)
    local f = assert(io.open(dir .. '/pipe.lua', 'w'))
    f:write(code)
    f:close()
    local run = cmd:gsub('mpirun', 'mpirun' .. shell.mpirun_exports():gsub('%%', '%%%%'), 1)
    local out, rc = shell.sh(('cd %s && LD_PRELOAD= LUA_PATH="%slua/?.lua;%slua/?/init.lua;;" timeout -s KILL 60 sh -c "%s"')
      :format(dir, shell.root, shell.root, run))
    local saved = io.open(dir .. '/model.safetensors') ~= nil
    local ok_ckpt, ckpt = pcall(lunet_checkpoint_load, dir .. '/run.ckpt')
    os.execute('rm -rf ' .. dir)
    assert.equal(0, rc, out)
    assert.truthy(out:find('^true%s+3\n$'), out)   -- rank 0 only
    assert.is_true(saved)
    -- fit's checkpoint: the whole model, written by one rank
    assert.is_true(ok_ckpt, tostring(ckpt))
    assert.equal(5, ckpt.epoch)
    for _, k in ipairs({ '0.weight', '2.bias', '4.weight' }) do assert.truthy(ckpt.model[k], k) end
  end)
end)
