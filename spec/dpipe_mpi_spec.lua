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

describe('Pipeline over processes', function()
  if not have_mpirun then
    it('needs Open MPI', function() pending('mpirun not installed: apt-get install openmpi-bin libopenmpi-dev') end)
    return
  end
  for _, n in ipairs({ 2, 3 }) do
    it(('-np %d: %d stages train as one process (GPipe and 1F1B; chunks 1, 3, 8 of a batch of 11; SGD, Adam; '
      .. 'checkpointing with deferred BatchNorm); full_state_dict on rank 0'):format(n, n), function()
      local out, rc = launch(n, 'train.lua')
      assert.equal(0, rc, out)
      shell.ranks_ok(out, n)
      for r = 0, n - 1 do
        local _, oks = out:gsub(('rank %d ok '):format(r), '')
        assert.equal(13, oks, out)
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
      assert.equal(13, oks, out)
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
          -- (its message, or its end: whichever comes first)
          assert.truthy(line:find('stage 2 failed (its rank raised the error)', 1, true)
            or line:find('rank 1 %(host %S+, pid %d+%) has ended'), line)
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
    os.execute('rm -rf ' .. dir)
    assert.equal(0, rc, out)
    assert.truthy(out:find('^true%s+3\n$'), out)   -- rank 0 only
    assert.is_true(saved)
  end)
end)
