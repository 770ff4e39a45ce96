-- Helpers for specs that run commands and read files of the checkout:
-- shell.root (the checkout, with a trailing slash), shell.sh(cmd) -> output
-- (stdout and stderr), exit status; shell.readfile(path); shell.mpirun_exports().
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

return M
