-- Helpers for specs that run commands and read files of the checkout:
-- shell.root (the checkout, with a trailing slash), shell.sh(cmd) -> output
-- (stdout and stderr), exit status; shell.readfile(path); shell.mpirun_exports();
-- shell.mpirun(n, script, env, deadline[, until_files]) and shell.ranks_ok(out, n) for the MPI specs.
local M = {}

local here = debug.getinfo(1, 'S').source:match('^@(.*)spec/shell%.lua$')
M.root = (here == nil or here == '') and './' or here

function M.sh(cmd)
  local p = io.popen(cmd .. ' 2>&1; echo "[rc=$?]"')
  local out = p:read('*a'); p:close()
  local rc = tonumber(out:match('%[rc=(%d+)%]\n$'))
  return (out:gsub('%[rc=%d+%]\n$', '')), rc
end

function M.readfile(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('*a'); f:close(); return s
end

-- ' -x NAME=value' for mpirun, for each of the library and sanitizer settings
-- this process has: every rank gets them, while mpirun itself is started with
-- LD_PRELOAD cleared (the sanitizer's runtime must not load into it). The
-- value is written out: '-x NAME' alone would pass mpirun's own, cleared one.
function M.mpirun_exports()
  local pass = ''
  for _, v in ipairs({ 'LUNET_LIB', 'LD_PRELOAD', 'ASAN_OPTIONS', 'UBSAN_OPTIONS', 'OMP_WAIT_POLICY' }) do
    local val = os.getenv(v)
    if val then pass = pass .. (" -x %s='%s'"):format(v, val:gsub("'", "'\\''")) end
  end
  return pass
end

-- mpirun -np n luajit <script> (a path from the checkout's root) with a hard
-- deadline (timeout -s KILL: a hang fails the spec instead of stalling the
-- suite); env: extra VAR=value words for every rank. Output, exit status.
-- until_files = {dir, count}: the job is let run on after a rank dies
-- (mpirun would end the others at once) and ended once count files are in
-- dir (the ranks' reports; mpirun itself does not end then) or at the deadline;
-- the killed mpirun's session folder is removed (it would stay in /tmp).
function M.mpirun(n, script, env, deadline, until_files)
  local r = M.root
  local cmd = ('timeout -s KILL %d mpirun --allow-run-as-root --oversubscribe --bind-to none %s'
    .. '-np %d%s -x LUA_PATH="%slua/?.lua;%slua/?/init.lua;%sspec/?.lua;;" %s luajit %s'):format(deadline,
    until_files and '--mca orte_abort_on_non_zero_status 0 ' or '', n, M.mpirun_exports(), r, r, r,
    env and ('env ' .. env) or '', script)
  if until_files then
    cmd = ('%s & job=$!; i=0; while [ "$(ls %s | wc -l)" -lt %d ] && [ $i -lt %d ] && kill -0 $job 2>/dev/null; '
      .. 'do sleep 0.1; i=$((i+1)); done; sleep 0.2; mp=$(pgrep -P $job); '
      .. 'if [ -n "$mp" ]; then pkill -KILL -P $mp; kill -9 $mp; rm -rf "${TMPDIR:-/tmp}"/ompi.*/pid.$mp; fi; '
      .. 'kill -9 $job 2>/dev/null; wait $job'):format(cmd, until_files[1],
      until_files[2], deadline * 10)
  end
  -- (nothing here runs with the sanitizer's runtime preloaded: pgrep hangs
  -- under it; the ranks get it through mpirun_exports)
  return M.sh(('unset LD_PRELOAD; cd %s && %s'):format(r, cmd))
end

-- every rank of n printed "rank R done" and none a "rank R FAIL" line
function M.ranks_ok(out, n)
  for line in out:gmatch('[^\n]+') do
    assert(not line:find('^rank %d+ FAIL'), line .. '\n--- output:\n' .. out)
  end
  for r = 0, n - 1 do
    assert(out:find(('rank %d done'):format(r), 1, true), ('rank %d did not finish:\n%s'):format(r, out))
  end
end

return M
