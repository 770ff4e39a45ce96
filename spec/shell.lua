-- Helpers for specs that run commands and read files of the checkout:
-- shell.root (the checkout, with a trailing slash), shell.sh(cmd) -> output
-- (stdout and stderr), exit status; shell.readfile(path).
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

return M
