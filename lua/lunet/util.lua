-- lunet.util: small helpers shared by modules: a monotonic clock, a median,
-- a JIT reset, atomic file writes.
local ffi = require 'ffi'
pcall(ffi.cdef, [[
struct ln_timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk_id, struct ln_timespec *tp);
]])

local util = {}
local ts = ffi.new('struct ln_timespec')
local CLOCK_MONOTONIC = 1

-- Seconds from an arbitrary origin, monotonic, sub-microsecond resolution.
function util.clock()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- The q-quantile (0 < q <= 1) of a non-empty list of numbers, the nearest
-- element (sorts the list in place): 0.25, the lower quartile.
function util.quantile(xs, q)
  table.sort(xs)
  return xs[math.max(1, math.floor(q * #xs + 0.5))]
end

-- The median of a list of numbers (sorts the list in place).
function util.median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

-- Flushes LuaJIT's traces and lets every function of lunet's loaded modules
-- be compiled again, as in a fresh process; returns how many functions.
-- jit.flush() alone keeps what LuaJIT gave up on (a function or loop whose
-- traces aborted again and again is "blacklisted": interpreted for the rest
-- of the process) and every later trace that reaches such a function aborts.
-- lunet's small shared helpers (the tensor wrapper among them) get
-- blacklisted while their callers still run interpreted, so after a plain
-- flush the machinery around the kernels stays interpreted (a pipeline's
-- cost per action about doubled). jit.on(f, true) clears f's blacklisting and
-- that of the functions defined in it. The REPL's reader stays as it is (it
-- turns the JIT off on purpose).
local function is_lunet_module(name)
  return type(name) == 'string' and (name == 'lunet' or name:sub(1, 6) == 'lunet.') and name ~= 'lunet.repl'
end

-- (by where it was loaded from: lunet's files, and the autograd layers it compiles)
local function is_lunet_function(f)
  local source = debug.getinfo(f, 'S').source
  return (source:find('[/\\]lunet[/\\]') ~= nil and source:find('[/\\]lunet[/\\]repl%.lua$') == nil)
    or source:sub(1, 16) == '=autograd layer '
end

function util.reset_jit()
  jit.flush()
  local seen, count = {}, 0
  local function visit(x)
    local kind = type(x)
    if (kind ~= 'table' and kind ~= 'function') or seen[x] or x == _G or x == package.loaded then return end
    seen[x] = true
    if kind == 'function' then
      if not is_lunet_function(x) then return end
      jit.on(x, true)
      count = count + 1
      local i = 1
      while true do
        local name, value = debug.getupvalue(x, i)
        if name == nil then break end
        visit(value)
        i = i + 1
      end
    else
      local mt = getmetatable(x)
      if type(mt) == 'table' then visit(mt) end
      if rawget(x, '_record') ~= nil then return end   -- a tensor: no functions of its own
      for k, v in next, x do visit(k); visit(v) end
    end
  end
  for name, mod in pairs(package.loaded) do
    if is_lunet_module(name) then visit(mod) end
  end
  visit(debug.getregistry().lunet_tensor_mt)
  return count
end

-- Atomic file writes, through C's one implementation (c/core/file.c: a
-- temporary file beside path, fsync, rename, fsync of the directory; symbolic
-- links followed; on failure the temporary file removed and an existing path
-- untouched). Errors read "fn: cannot write 'path': why", raised at the
-- user's line. core is required here, not at the top: lunet.core's own
-- dependencies load this file.
local AtomicFile = {}
AtomicFile.__index = AtomicFile

local function lib() return require('lunet.core') end

-- (C would stop at a NUL byte and write somewhere else)
local function check_path(fn, path)
  if type(path) ~= 'string' or path == '' then
    require('lunet.options').fail(fn, 'path must be a non-empty string, got ' .. (type(path) == 'string' and 'an empty one' or type(path)))
  end
  if path:find('\0', 1, true) then require('lunet.options').fail(fn, ("cannot write '%s': the path contains a NUL byte"):format(path:gsub('%z', '\\0'))) end
end

-- util.atomic_open(fn, path) -> f: f:write(ptr, n) / f:write(string),
-- f:commit(), f:abort([why]) (why given: raises "fn: cannot write 'path': why").
-- A file dropped without commit is removed when collected.
function util.atomic_open(fn, path)
  check_path(fn, path)
  local core = lib()
  local h = core.C.ln_afile_open(fn, path)
  if h == nil then core.raise() end
  return setmetatable({ h = ffi.gc(h, core.C.ln_afile_abort), fn = fn, path = path }, AtomicFile)
end

function AtomicFile:write(ptr, n)
  if type(ptr) == 'string' then ptr, n = ptr, #ptr end
  if lib().C.ln_afile_write(self.h, ptr, n) ~= 0 then self:abort() end
end

function AtomicFile:commit()
  local core, h = lib(), self.h
  self.h = nil
  ffi.gc(h, nil)   -- commit frees it, failed or not
  if core.C.ln_afile_commit(h) ~= 0 then core.raise() end
end

-- removes the temporary file; raises the write's error, or why when given
function AtomicFile:abort(why)
  local core, h = lib(), self.h
  if h == nil then return end
  self.h = nil
  if why then core.C.ln_afile_fail(h, why) end
  ffi.gc(h, nil)
  local msg = core.last_error()
  core.C.ln_afile_abort(h)
  require('lunet.options').raise(msg)
end

-- util.write_file(fn, path, bytes[, n]): a string, or a pointer to n bytes.
function util.write_file(fn, path, bytes, n)
  check_path(fn, path)
  local core = lib()
  if type(bytes) == 'string' then n = #bytes end
  if core.C.ln_file_write_atomic(fn, path, bytes, n) ~= 0 then core.raise() end
end

return util
