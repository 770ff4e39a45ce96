-- tools/pty.lua: run a command on a pseudo-terminal and talk to it, as a
-- user at a terminal would (used by spec/repl_spec.lua). LuaJIT FFI over
-- glibc: posix_openpt + posix_spawn with POSIX_SPAWN_SETSID, so the child
-- gets the pty as its controlling terminal and no fork happens in Lua.
--   local pty = dofile('tools/pty.lua')
--   local p = pty.spawn('HOME=/tmp/h bin/lunet')
--   p:send('1+1\r'); assert(p:expect('2'))
--   p:close()
local ffi = require 'ffi'

local decls = {
  'int posix_openpt(int flags);', 'int grantpt(int fd);', 'int unlockpt(int fd);',
  'char *ptsname(int fd);',
  'typedef struct { long opaque_[64]; } lnpty_fa_t;',
  'typedef struct { long opaque_[64]; } lnpty_attr_t;',
  'int posix_spawn_file_actions_init(lnpty_fa_t *fa);',
  'int posix_spawn_file_actions_destroy(lnpty_fa_t *fa);',
  'int posix_spawn_file_actions_addopen(lnpty_fa_t *fa, int fd, const char *path, int oflag, unsigned mode);',
  'int posix_spawn_file_actions_adddup2(lnpty_fa_t *fa, int fd, int newfd);',
  'int posix_spawn_file_actions_addclose(lnpty_fa_t *fa, int fd);',
  'int posix_spawnattr_init(lnpty_attr_t *a);', 'int posix_spawnattr_destroy(lnpty_attr_t *a);',
  'int posix_spawnattr_setflags(lnpty_attr_t *a, short flags);',
  'int posix_spawn(int *pid, const char *path, const lnpty_fa_t *fa, const lnpty_attr_t *a, char *const argv[], char *const envp[]);',
  'extern char **environ;',
  'struct lnpty_pollfd { int fd; short events; short revents; };',
  'int poll(struct lnpty_pollfd *fds, unsigned long n, int timeout);',
  'long read(int fd, void *buf, unsigned long n);', 'long write(int fd, const void *buf, unsigned long n);',
  'int close(int fd);', 'int kill(int pid, int sig);', 'int waitpid(int pid, int *status, int options);',
  'struct lnpty_winsize { unsigned short row, col, xpixel, ypixel; };',
  'int ioctl(int fd, unsigned long req, ...);',
}
for _, d in ipairs(decls) do pcall(ffi.cdef, d) end
local C = ffi.C

local O_RDWR, O_NOCTTY, O_CLOEXEC = 2, 256, 524288
local POSIX_SPAWN_SETSID, TIOCSWINSZ, POLLIN, WNOHANG = 0x80, 0x5414, 1, 1

local P = {}
P.__index = P

local M = {}

-- Start `cmdline` (a /bin/sh command line) on a new pty.
function M.spawn(cmdline, opts)
  opts = opts or {}
  local master = C.posix_openpt(O_RDWR + O_NOCTTY + O_CLOEXEC)
  assert(master >= 0, 'posix_openpt failed')
  assert(C.grantpt(master) == 0 and C.unlockpt(master) == 0, 'grantpt/unlockpt failed')
  local slave = ffi.string(C.ptsname(master))
  local ws = ffi.new('struct lnpty_winsize', opts.rows or 24, opts.cols or 200, 0, 0)
  C.ioctl(master, TIOCSWINSZ, ws)
  local fa, attr = ffi.new('lnpty_fa_t'), ffi.new('lnpty_attr_t')
  C.posix_spawn_file_actions_init(fa)
  C.posix_spawn_file_actions_addopen(fa, 0, slave, O_RDWR, 0)  -- session leader: becomes its ctty
  C.posix_spawn_file_actions_adddup2(fa, 0, 1)
  C.posix_spawn_file_actions_adddup2(fa, 0, 2)
  C.posix_spawnattr_init(attr)
  C.posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSID)
  local argv = ffi.new('char *[4]')
  local a0, a1, a2 = ffi.new('char[?]', 8, '/bin/sh'), ffi.new('char[?]', 3, '-c'),
    ffi.new('char[?]', #cmdline + 1, cmdline)
  argv[0], argv[1], argv[2], argv[3] = a0, a1, a2, nil
  local pid = ffi.new('int[1]')
  local rc = C.posix_spawn(pid, '/bin/sh', fa, attr, argv, C.environ)
  C.posix_spawn_file_actions_destroy(fa)
  C.posix_spawnattr_destroy(attr)
  if rc ~= 0 then C.close(master); error('posix_spawn failed: ' .. rc) end
  return setmetatable({ fd = master, pid = pid[0], out = '', seen = 0, eof = false }, P)
end

-- Read what is available within `ms` milliseconds; false at end of file.
function P:pump(ms)
  if self.eof then return false end
  local pfd = ffi.new('struct lnpty_pollfd', self.fd, POLLIN, 0)
  if C.poll(pfd, 1, ms) <= 0 then return true end
  local buf = ffi.new('char[4096]')
  local n = C.read(self.fd, buf, 4096)
  if n <= 0 then self.eof = true; return false end   -- EIO: the child closed the pty
  self.out = self.out .. ffi.string(buf, n)
  return true
end

function P:send(s)
  assert(C.write(self.fd, s, #s) == #s, 'write to the pty failed')
end

-- Wait until `text` (plain) appears after the last match; returns the output
-- up to and including it, or nil on timeout / end of file.
function P:expect(text, timeout)
  local waited, limit = 0, (timeout or 10) * 1000
  while true do
    local i, j = self.out:find(text, self.seen + 1, true)
    if i then
      local chunk = self.out:sub(self.seen + 1, j)
      self.seen = j
      return chunk
    end
    if self.eof or waited >= limit then return nil end
    self:pump(50)
    waited = waited + 50
  end
end

-- Wait until `text` shows in the output since the last match once terminal
-- escapes are removed (readline may redraw a line in pieces); true or nil.
function P:expect_clean(text, timeout)
  local waited, limit = 0, (timeout or 10) * 1000
  while true do
    if M.clean(self.out:sub(self.seen + 1)):find(text, 1, true) then return true end
    if self.eof or waited >= limit then return nil end
    self:pump(50)
    waited = waited + 50
  end
end

-- Wait for the child to exit (killing it after `timeout` s); returns its status.
function P:close(timeout)
  local status = ffi.new('int[1]')
  local waited, limit = 0, (timeout or 10) * 1000
  while C.waitpid(self.pid, status, WNOHANG) == 0 do
    if waited >= limit then C.kill(self.pid, 9); C.waitpid(self.pid, status, 0); break end
    self:pump(50)
    waited = waited + 50
  end
  while self:pump(0) do if self.eof then break end end
  C.close(self.fd)
  return status[0]
end

-- the output without terminal escape sequences and carriage returns
function M.clean(s)
  return (s:gsub('\27%[[%d;?]*%a', ''):gsub('\27[=>]', ''):gsub('[\1-\8\11-\31]', ''))
end

return M
