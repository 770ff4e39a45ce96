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

describe('lunet.fit over a Pipeline across processes', function()
  if not have_mpirun then
    it('needs Open MPI', function() pending('mpirun not installed: apt-get install openmpi-bin libopenmpi-dev') end)
    return
  end
  for _, c in ipairs({ { 2, 1 }, { 4, 2 } }) do
    local n, k = c[1], c[2]
    it(('-np %d%s: GPipe (SGD) and 1F1B (Adam, accumulate 2) with a val loader give one process\'s history and '
      .. 'parameters; a loader sharded by rank, or seeded apart, is refused on every rank'):format(n,
      k > 1 and (' as %d pipelines x %d stages'):format(k, n / k) or ''), function()
      local out, rc = launch(n, 'DPFIT_PHASE=fit DPFIT_REPLICAS=' .. k)
      assert.equal(0, rc, out)
      all_ok(out, n, 4)
    end)
  end

  it('a checkpoint written by -np 2 (mid-epoch, Adam) resumes with -np 2, with -np 3, as 2 x 2 and in one process: '
    .. 'the same history and parameters as an uninterrupted run', function()
    local path = os.tmpname()
    local function copy(to) assert(os.execute(('cp %s %s'):format(path, to)) == 0) end
    os.remove(path)
    local out, rc = launch(2, 'DPFIT_PHASE=save DPFIT_CKPT=' .. path)
    assert.equal(0, rc, out)
    all_ok(out, 2, 1)
    local copies = {}
    for i = 1, 3 do copies[i] = path .. '.' .. i; copy(copies[i]) end
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
    resume(4, copies[2], 'DPFIT_REPLICAS=2')
    -- the unwrapped model in a process of its own (no mpirun: a world of one)
    local r = shell.root
    out, rc = shell.sh(('cd %s && LD_PRELOAD="${LD_PRELOAD:-}" LUA_PATH="%slua/?.lua;%slua/?/init.lua;%sspec/?.lua;;" '
      .. 'DPFIT_PHASE=one DPFIT_CKPT=%s timeout -s KILL 60 luajit spec/dpfit/fit.lua'):format(r, r, r, r, copies[3]))
    os.remove(path)
    for i = 1, 3 do os.remove(copies[i]) end
    assert.equal(0, rc, out)
    all_ok(out, 1, 1)
  end)
end)
