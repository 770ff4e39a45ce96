-- The mpi collective backend and lunet.distributed across processes: runs
-- spec/mpi/*.lua under `mpirun -np 2` and `-np 3` and reads what each rank
-- printed. Every launch has a hard deadline (timeout -s KILL), so a hang
-- fails the spec instead of stalling the suite. Pending (visibly) only when
-- Open MPI's mpirun is not installed.
local shell = require 'shell'

local root = shell.root
local have_mpirun = shell.sh('command -v mpirun'):match('mpirun') ~= nil
local shim_path = (os.getenv('LUNET_LIB') or (root .. 'build/liblunet.so')):gsub('liblunet%.so$', 'liblunet_mpi.so')
local have_shim = io.open(shim_path) ~= nil

-- spec/mpi/<script> under mpirun -np n (env: extra VAR=value words)
local function launch(n, script, env, deadline, until_files)
  return shell.mpirun(n, 'spec/mpi/' .. script, env, deadline or 90, until_files)
end

-- the line of spec/mpi/kill.lua whose all-reduce fails (the errors name it)
local KILL_LINE = (function()
  local n = 0
  for l in io.lines(root .. 'spec/mpi/kill.lua') do
    n = n + 1
    if l:find('world:allreduce', 1, true) then return n end
  end
end)()

-- launch, with each rank's reports also read from the files it wrote
-- (spec/mpi/kill.lua: mpirun can lose the stdout of ranks it ends)
local function launch_reports(n, script, env, deadline)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute('mkdir -p ' .. dir) == 0, 'mkdir ' .. dir)
  -- (the job runs on until every rank has reported: mpirun would end the
  -- others as soon as one dies, on a loaded machine before they named it)
  local out = launch(n, script, 'SPEC_REPORT_DIR=' .. dir .. ' ' .. (env or ''), deadline, { dir, n })
  for r = 0, n - 1 do
    local f = io.open(('%s/rank%d'):format(dir, r))
    if f then out = out .. '\n' .. f:read('*a'); f:close() end
    os.remove(('%s/rank%d'):format(dir, r))
  end
  os.remove(dir)
  return out
end

-- every rank printed "done" and no FAIL line; the ok lines of rank 0
local function all_ok(out, n)
  shell.ranks_ok(out, n)
  local oks = 0
  for _ in out:gmatch('rank 0 ok ') do oks = oks + 1 end
  return oks
end

describe('mpi backend', function()
  if not have_mpirun then
    it('needs Open MPI', function() pending('mpirun not installed: apt-get install openmpi-bin libopenmpi-dev') end)
    return
  end
  it('is built where mpicc is (build/liblunet_mpi.so)', function()
    assert.is_true(have_shim)
  end)

  it('every collective equals the local backend, 2 processes, inline device', function()
    local out, rc = launch(2, 'ops.lua')
    assert.equal(0, rc, out)
    assert.is_true(all_ok(out, 2) >= 30, out)
  end)

  it('every collective equals the local backend, 3 processes on streams, with fp16/bf16 wires', function()
    local out, rc = launch(3, 'ops.lua', 'LUNET_CPU_DEVICES=3')
    assert.equal(0, rc, out)
    assert.is_true(all_ok(out, 3) >= 35, out)
    assert.truthy(out:find('rank 2 ok allreduce sum compress bf16 200000', 1, true), out)
  end)

  it('2 processes with 2 devices each: the fp16/bf16 wires equal local exactly', function()
    local out, rc = launch(2, 'ops.lua', 'LUNET_CPU_DEVICES=2')
    assert.equal(0, rc, out)
    assert.truthy(out:find('rank 1 ok allreduce avg compress fp16 200000', 1, true), out)
    all_ok(out, 2)
  end)
end)

describe('README, Processes and machines', function()
  if not have_mpirun then
    it('needs Open MPI', function() pending('mpirun not installed: apt-get install openmpi-bin libopenmpi-dev') end)
    return
  end
  it('its Lua block runs as train.lua under its `mpirun -np 2` line, as written', function()
    local readme = shell.readfile(root .. 'README.md')
    local sec = readme:match('\n## Processes and machines %(MPI%)\n(.-)\n## ')
    local code = sec:match('```lua\n(.-)```')
    local cmd = 'OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 luajit train.lua'
    assert.truthy(sec:find(cmd, 1, true), 'README no longer shows ' .. cmd)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute('mkdir -p ' .. dir) == 0)
    local f = assert(io.open(dir .. '/train.lua', 'w'))
    f:write(code)
    f:close()
    -- lunet from the checkout (a script in its root finds it by lunet.lua);
    -- under the sanitizers the ranks get their settings too (mpirun -x)
    local run = cmd:gsub('mpirun', 'mpirun' .. shell.mpirun_exports():gsub('%%', '%%%%'), 1)
    local out, rc = shell.sh(('cd %s && LD_PRELOAD= LUA_PATH="%slua/?.lua;%slua/?/init.lua;;" timeout -s KILL 60 sh -c "%s"')
      :format(dir, root, root, run))
    os.execute('rm -rf ' .. dir)
    assert.equal(0, rc, out)
    assert.truthy(out:find('rank 0 of 2 on %S+ %(pid %d+%): cpu:0'), out)
    assert.truthy(out:find('rank 1 of 2 on %S+ %(pid %d+%): cpu:0'), out)
    local _, trues = out:gsub('true\n', '')
    assert.equal(2, trues, out)
  end)
end)

describe('mpi backend faults', function()
  if not have_mpirun then
    it('needs Open MPI', function() pending('mpirun not installed: apt-get install openmpi-bin libopenmpi-dev') end)
    return
  end

  for _, n in ipairs({2, 3}) do
    it(('a rank killed with SIGKILL: the other %d raise an error naming it within 30 s'):format(n - 1), function()
      local t0 = os.time()
      local out = launch_reports(n, 'kill.lua', nil, 45)
      assert.is_true(os.time() - t0 < 30, 'took ' .. (os.time() - t0) .. ' s:\n' .. out)
      local pid, host = out:match(('rank %d pid (%%d+) host (%%S+) dies'):format(n - 1))
      assert.truthy(pid, out)
      for r = 0, n - 2 do
        local want = ('rank %d error at step 20: spec/mpi/kill.lua:' .. KILL_LINE .. ': allreduce: rank %d (host %s, pid %s) is gone')
          :format(r, n - 1, host, pid)
        assert.truthy(out:find(want, 1, true), want .. '\n--- output:\n' .. out)
      end
    end)
  end

  it('a rank killed on another host: named through the liveness connections (pid checks off), by every other rank', function()
    -- (LUNET_LIVENESS_ONLY: no rank looks at its host's pids, as if each
    -- were on a host of its own; with 3 ranks the ring's rank 1 waits on
    -- rank 0, alive: only the victim's ended connection can name it)
    local t0 = os.time()
    local out = launch_reports(3, 'kill.lua', 'LUNET_LIVENESS_ONLY=1', 45)
    assert.is_true(os.time() - t0 < 30, 'took ' .. (os.time() - t0) .. ' s:\n' .. out)
    local pid, host = out:match('rank 2 pid (%d+) host (%S+) dies')
    assert.truthy(pid, out)
    for r = 0, 1 do
      local want = ('rank %d error at step 20: spec/mpi/kill.lua:' .. KILL_LINE .. ': allreduce: rank 2 (host %s, pid %s) is gone')
        :format(r, host, pid)
      assert.truthy(out:find(want, 1, true), want .. '\n--- output:\n' .. out)
    end
  end)

  it('a rank that ends with a Lua error: the others fail naming it in seconds, not after the timeout', function()
    local t0 = os.time()
    local out = launch(3, 'exit.lua', nil, 60)
    assert.is_true(os.time() - t0 < 20, 'took ' .. (os.time() - t0) .. ' s:\n' .. out)
    local pid = out:match('rank 2 pid (%d+) raises')
    assert.truthy(pid, out)
    for r = 0, 1 do
      local want = ('rank %d error at step 5: spec/mpi/exit%%.lua:15: allreduce: rank 2 %%(host %%S+, pid %s%%) has ended'):format(r, pid)
      assert.truthy(out:find(want), want .. '\n--- output:\n' .. out)
    end
  end)

  it('a rank that ends while another waits to receive from it: named, and the wait called a send/recv', function()
    local t0 = os.time()
    local out = launch(2, 'recv_exit.lua', nil, 60)
    assert.is_true(os.time() - t0 < 20, 'took ' .. (os.time() - t0) .. ' s:\n' .. out)
    local pid = out:match('rank 1 pid (%d+) raises')
    assert.truthy(pid, out)
    local want = ('rank 0 recv: .*recv: rank 1 %%(host %%S+, pid %s%%) has ended .* while this send/recv waits for it'):format(pid)
    assert.truthy(out:find(want), want .. '\n--- output:\n' .. out)
  end)

  it('ranks out of step fail naming both call sites; a late rank times out; no hang', function()
    local out = launch(2, 'desync.lua', nil, 40)
    for r = 0, 1 do
      local function line(name) return out:match(('rank %d case %s: ([^\n]*)'):format(r, name)) or '(none)' end
      local l = line('different ops')
      assert.truthy(l:find('collective #0 differs across ranks (out of step): rank 0 (host ', 1, true), l)
      assert.truthy(l:find('calls allreduce (sum) of 10 float32 elements at spec/mpi/desync.lua:18; rank 1 (host', 1, true), l)
      assert.truthy(l:find('calls broadcast of 10 float32 elements from rank 0 at spec/mpi/desync.lua:19', 1, true), l)
      assert.truthy(line('different shapes'):find('allreduce %(max%) of 10 float32 elements at spec/mpi/desync%.lua:22; '
        .. 'rank 1 %(host %S+, pid %d+%) calls allreduce %(max%) of 11 float32'), line('different shapes'))
      assert.truthy(line('different reductions'):find('calls allreduce (avg) of 10', 1, true), line('different reductions'))
      local l = line('async out of step, raised at wait')
      assert.truthy(l:find('allreduce (sum) of 20 float32 elements at spec/mpi/desync.lua:28; rank 1', 1, true), l)
      -- rank 0 gives up after its timeout; the late rank 1 then finds rank 0
      -- ended (it finished the script) or times out as well
      local late = line('a rank late beyond the timeout')
      if r == 0 then assert.truthy(late:find('collective #3 timed out after 2 s', 1, true), out)
      else
        assert.truthy(late:find('collective #3 timed out after 2 s', 1, true) or
          late:find('rank 0 %(host %S+, pid %d+%) has ended %(finalize: at its exit, or after an error%) while collective #3'), out)
      end
      assert.truthy(line('after a timeout'):find('out of step for good', 1, true), out)
      assert.truthy(out:find(('rank %d done'):format(r), 1, true), out)
    end
  end)
end)

describe('distributed without a launcher', function()
  it('is a world of one with no MPI at all', function()
    local out, rc = shell.sh(('cd %s && env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u SLURM_NTASKS LUNET_MPI_LIB=/nonexistent '
      .. 'luajit -e "package.path=\'%slua/?.lua;%slua/?/init.lua;\'..package.path" spec/mpi/one.lua'):format(root, root, root))
    assert.equal(0, rc, out)
    assert.truthy(out:find('rank 0 of 1, local 0 of 1, launcher none, backend local, allreduce 6, group 6', 1, true), out)
  end)
end)
