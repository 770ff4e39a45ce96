-- lunet.core: loads liblunet.so and its declarations, and holds the small
-- shared helpers (error raising, dtype and device names) every module uses.
local ffi = require 'ffi'

local core = {}

-- LuaJIT's default trace limits (1000 traces, 512 KB of machine code) fill
-- within a CNN's first training steps; a full trace cache is flushed whole,
-- and the steps after each flush run interpreted while the traces are
-- recorded again (the planner's trials and profiles timed those). Raised once,
-- at load; a script may still set its own with jit.opt.start.
if jit and jit.opt then
  jit.opt.start('maxtrace=8000', 'maxrecord=16000', 'maxmcode=16384', 'maxside=400', 'maxsnap=1000', 'maxirconst=1000')
end

-- The Tensor metatable (lunet.tensor fills it in). One per process, as the
-- autograd: a second load of lunet (busted reloads modules per spec file)
-- makes tensors of the same type.
local registry = debug.getregistry()
core.tensor_mt = registry.lunet_tensor_mt or {}
registry.lunet_tensor_mt = core.tensor_mt

-- A tensor is a Lua table with the fields p and _record (lunet.tensor), so
-- code that takes "a table or ..." asks is_table, which a tensor is not.
-- (Tested by a raw field rather than getmetatable: LuaJIT 2.1.0-beta3's
-- traces of getmetatable on tables of varying metatables gave wrong results
-- in about one run in three; rawget's do not.)
function core.is_table(x) return type(x) == 'table' and rawget(x, '_record') == nil end
function core.is_tensor(x) return type(x) == 'table' and rawget(x, '_record') ~= nil and rawget(x, 'p') ~= nil end
-- type(x) for error messages, 'tensor' for a tensor
function core.typename(x) return core.is_tensor(x) and 'tensor' or type(x) end

-- The .so is found next to this file (source tree: ../../build, installed:
-- the luarocks LIBDIR), so no LD_LIBRARY_PATH is needed. LUNET_LIB overrides.
-- Installed layouts (make install, luarocks): <prefix>/share/lua/5.1/lunet/
-- holds the modules and <prefix>/lib/lua/5.1/liblunet.so the library.
local function find_library()
  local env = os.getenv('LUNET_LIB')
  if env and env ~= '' then return env end
  local here = debug.getinfo(1, 'S').source:match('^@(.*)lunet[/\\]core%.lua$') or './lua/'
  local candidates = { here .. '../build/liblunet.so', here .. 'liblunet.so' }
  local prefix = here:match('^(.*)share[/\\]lua[/\\]5%.1[/\\]$')
  if prefix then candidates[#candidates + 1] = prefix .. 'lib/lua/5.1/liblunet.so' end
  for _, path in ipairs(candidates) do
    local f = io.open(path, 'rb')
    if f then f:close(); return path end
  end
  local found = package.searchpath('liblunet', package.cpath:gsub('%?%.so', 'lib?.so') .. ';' .. package.cpath)
  return found or 'lunet'
end

if not pcall(ffi.typeof, 'ln_tensor') then ffi.cdef(require 'lunet.cdef') end

-- How OpenMP threads wait between parallel regions. libgomp's default spins
-- first: fastest on idle cores, several times slower beside other work on
-- the same cores; passive (sleep at once) is the reverse (bench/RESULTS.md,
-- "OpenMP wait policy"). lunet picks by the machine's load when it loads:
-- passive when the 1-minute load average already fills the online cores,
-- else libgomp's default. libgomp reads the environment once, when it loads
-- with liblunet below, so this happens before ffi.load. OMP_WAIT_POLICY or
-- GOMP_SPINCOUNT set by the user is left as it is.
function core.choose_wait_policy(load, ncpu)
  if type(load) ~= 'number' or type(ncpu) ~= 'number' or ncpu < 1 then return 'default' end
  return load >= ncpu - 0.5 and 'passive' or 'default'
end

local function machine_load()
  local f = io.open('/proc/loadavg', 'r')
  local load = f and tonumber((f:read('*l') or ''):match('^(%S+)'))
  if f then f:close() end
  pcall(ffi.cdef, 'long sysconf(int name);')
  local ok, n = pcall(function() return tonumber(ffi.C.sysconf(84)) end)   -- _SC_NPROCESSORS_ONLN
  return load, ok and n or nil
end

core.wait_policy = 'user'
if os.getenv('OMP_WAIT_POLICY') == nil and os.getenv('GOMP_SPINCOUNT') == nil then
  core.wait_policy = core.choose_wait_policy(machine_load())
  if core.wait_policy == 'passive' then
    pcall(ffi.cdef, 'int setenv(const char *name, const char *value, int overwrite);')
    ffi.C.setenv('OMP_WAIT_POLICY', 'passive', 0)
  end
end

local ok, lib = pcall(ffi.load, find_library())
if not ok then
  error('lunet: cannot load liblunet.so (' .. tostring(lib) .. '); run make, or set LUNET_LIB', 0)
end
core.C = lib
local C = lib

-- Before the process exits, the device streams finish what is queued: a
-- worker still inside oneDNN while exit() tore down oneDNN's globals crashed
-- scripts that ended without lunet.synchronize(). Done when the Lua state
-- closes (the end of a script, an error, os.exit(code, true)) and by
-- os.exit(code), which exits without closing it. (A C atexit handler would
-- run too late: oneDNN registers its globals' destructors after lunet
-- starts.) At most 60 s: a stream held forever must not keep the process
-- from exiting.
-- (The function is resolved now: at lua_close the library handle may be
-- finalized before this sentinel; the code stays mapped, -z nodelete.)
local drain = C.ln_drain
core._drain_at_close = ffi.gc(ffi.new('char[1]'), function() drain(60) end)
if not core._os_exit then
  local os_exit = os.exit
  core._os_exit = os_exit
  os.exit = function(...) drain(60); return os_exit(...) end
end

core.dtypes = { [0] = 'float32', 'float64', 'int32', 'int64', 'uint8', 'bool', 'float16', 'bfloat16' }
core.dtype_ids = {}
for i = 0, #core.dtypes do core.dtype_ids[core.dtypes[i]] = i end
core.dtype_ids.float, core.dtype_ids.double = 0, 1
core.dtype_ids.int, core.dtype_ids.long, core.dtype_ids.half = 2, 3, 6
core.default_dtype = 0

function core.last_error() return ffi.string(C.ln_last_error()) end

-- (argument errors point at the user's line, however deep in lunet they are found)
local raise_user = require('lunet.options').raise

-- the C library's last error, raised at the user's line: the first caller
-- outside lunet (a level counted from the caller pointed inside lunet
-- wherever lunet called the failing function itself: fit's criterion, a
-- module's layer)
function core.raise()
  raise_user(core.last_error())
end
function core.dtype_id(fn, dt)
  if dt == nil then return core.default_dtype end
  local id = core.dtype_ids[dt]
  if not id then raise_user(('%s: unknown dtype %s'):format(fn, tostring(dt))) end
  return id
end

local CUDA_BASE = 256
-- (no closure inside device_id: one capturing `dev` made every call close an
-- upvalue, which LuaJIT 2.1 cannot compile, so callers fell back to the interpreter)
local function field_device_id(dev) return dev.device_id end
function core.device_id(fn, dev)
  if dev == nil then return 0 end
  if type(dev) == 'number' then
    -- (a C int: a fraction or a huge number would be truncated to some device)
    if dev % 1 ~= 0 or dev < 0 or dev >= 2 ^ 31 then
      raise_user(('%s: invalid device number %s (expected a non-negative integer)'):format(fn, tostring(dev)))
    end
    return dev
  end
  if type(dev) == 'string' then
    local kind, idx = dev:match('^(%a+):?(%d*)$')
    idx = tonumber(idx) or 0
    if idx >= 2 ^ 31 then kind = nil end
    if kind == 'cpu' then
      if C.ln_device_valid(idx) == 0 then
        raise_user(('%s: no device %s (there %s %d CPU device%s)'):format(fn, dev,
          C.ln_cpu_device_count() == 1 and 'is' or 'are', C.ln_cpu_device_count(),
          C.ln_cpu_device_count() == 1 and '' or 's'))
      end
      return idx
    elseif kind == 'cuda' then
      local n = C.ln_cuda_device_count()
      if idx >= n then
        -- none at all: say why (no driver, the library missing, no GPU)
        local why = n == 0 and ffi.string(C.ln_cuda_reason()) or ('%d CUDA device%s'):format(n, n == 1 and '' or 's')
        raise_user(('%s: %s is not available (%s)'):format(fn, dev, why))
      end
      return CUDA_BASE + idx
    elseif kind and dev:find(':', 1, true) then   -- another registered device type
      local id = C.ln_device_lookup(kind, idx)
      if id < 0 then raise_user(fn .. ': ' .. (core.last_error():gsub('^device: ', ''))) end
      return id
    end
  end
  if type(dev) == 'cdata' or type(dev) == 'table' then
    local ok, id = pcall(field_device_id, dev)
    if ok and id then return id end
  end
  raise_user(("%s: invalid device %s (expected 'cpu:N' or 'cuda:N')"):format(fn, tostring(dev)))
end

function core.device_name(id)
  if id >= 2 * CUDA_BASE then
    local t = C.ln_device_type_name(id)
    return (t ~= nil and ffi.string(t) or '?') .. ':' .. (id % CUDA_BASE)
  end
  if id >= CUDA_BASE then return 'cuda:' .. (id - CUDA_BASE) end
  return 'cpu:' .. id
end

return core
