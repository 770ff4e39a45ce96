-- lunet.util: small helpers shared by modules: a monotonic clock, a median,
-- a JIT reset.
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

return util
