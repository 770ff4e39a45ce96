-- Allreduce bandwidth on 2 virtual CPU devices (local backend) beside memcpy
-- (make bench). For a float32 buffer of S bytes per rank, every figure is
-- S / time (GB/s, 1e9 bytes), the algorithm bandwidth of nccl-tests:
--   algbw   allreduce (avg) of the 2 buffers, in place, both devices' workers
--   busbw   algbw * 2(n-1)/n (what each rank sends and receives in a ring)
--   memcpy  memcpy(S) on one core (the host thread)
--   2x cpy  each device's worker copies its own S-byte tensor, both at once
-- An in-place allreduce of 2 ranks must read both buffers and write both
-- (4S bytes of memory traffic): each worker reads S and writes S, the same as
-- one memcpy(S) per worker. So "2x cpy" is the same traffic as the
-- allreduce's (glibc's memcpy streams its stores; the allreduce's plain
-- stores go to lines it has just read, and can beat it); it equals "memcpy"
-- only where 2 cores get twice the memory bandwidth of one. Times include
-- the launch and the synchronisation.
--   luajit bench/comm.lua [--runs R] [--max MB] [--min MB] [--best]
-- (--best: the fastest run of each instead of the median, for a loaded machine)
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local ffi = require 'ffi'
local lunet = require 'lunet'
local C = lunet.C

local args = {}
for i = 1, #arg do args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end
local RUNS = tonumber(args.runs) or 7
local MAX_MB = tonumber(args.max) or 256
local MIN_MB = tonumber(args.min) or 1
local BEST = args.best
local NDEV = 2

if not pcall(ffi.typeof, 'struct lunet_bench_timespec') then
  ffi.cdef [[
    struct lunet_bench_timespec { long tv_sec; long tv_nsec; };
    int lunet_bench_clock(int clk, struct lunet_bench_timespec *ts) __asm__("clock_gettime");
    void *lunet_bench_memcpy(void *dst, const void *src, size_t n) __asm__("memcpy");
  ]]
end
local ts = ffi.new('struct lunet_bench_timespec')
local function now()
  ffi.C.lunet_bench_clock(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

local function loadavg()          -- the machine may be shared: say how busy it was
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or ''
  if f then f:close() end
  return s:match('^(%S+)') or '?'
end

lunet.set_cpu_devices(NDEV)
local devices = lunet.devices()
local comm = lunet.comm.Communicator(devices)

print(('lunet %s allreduce (local backend): %d devices x %d thread(s), %d cores, %s of %d runs')
  :format(lunet.version, NDEV, C.ln_device_threads(0), C.ln_num_cores(), BEST and 'best' or 'median', RUNS))
local head = ('%-8s  %10s  %10s  %10s  %10s  %10s  %10s  %8s  %8s'):format('size', 'time', 'algbw', 'busbw',
  'bf16 algbw', 'memcpy', '2x cpy', 'ar/cpy', 'ar/2xcpy')
print(head)
print(('-'):rep(#head))

local mb = MIN_MB
while mb <= MAX_MB do
  local numel = mb * 2 ^ 20 / 4
  local list, list16 = {}, {}
  for i = 1, NDEV do
    list[i] = lunet.rand({numel}, {device = devices[i]})
    list16[i] = lunet.rand({numel}, {device = devices[i]})
  end
  local src, dst = lunet.rand({numel}), lunet.empty({numel})
  local csrc, cdst = {}, {}
  for i = 1, NDEV do
    csrc[i] = lunet.rand({numel}, {device = devices[i]})
    cdst[i] = lunet.empty({numel}, {device = devices[i]})
  end
  local ps, pd = C.ln_data_ptr(src.p), C.ln_data_ptr(dst.p)
  local bytes = numel * 4
  local runs = mb >= 64 and math.max(3, math.floor(RUNS / 2)) or RUNS
  local function allreduce() comm:allreduce(list, {op = 'avg'}); lunet.synchronize() end
  local function allreduce16() comm:allreduce(list16, {op = 'avg', compress = 'bf16'}); lunet.synchronize() end
  local function memcpy() ffi.C.lunet_bench_memcpy(pd, ps, bytes) end
  local function copy2() for i = 1, NDEV do cdst[i]:copy_(csrc[i]) end; lunet.synchronize() end
  allreduce(); allreduce16(); memcpy(); copy2()
  local t, t16, tm, t2 = {}, {}, {}, {}
  for r = 1, runs do            -- interleaved, so that all four see the same load
    local t0 = now(); allreduce(); t[r] = now() - t0
    t0 = now(); allreduce16(); t16[r] = now() - t0
    t0 = now(); memcpy(); tm[r] = now() - t0
    t0 = now(); copy2(); t2[r] = now() - t0
  end
  local pick = BEST and math.min or function(...) return median({...}) end
  local s, s16, sm, s2 = pick(unpack(t)), pick(unpack(t16)), pick(unpack(tm)), pick(unpack(t2))
  local alg = bytes / s / 1e9
  print(('%-8s  %7.2f ms  %5.2f GB/s  %5.2f GB/s  %5.2f GB/s  %5.2f GB/s  %5.2f GB/s  %7.0f%%  %7.0f%%'):format(
    mb .. ' MB', s * 1e3, alg, alg * 2 * (NDEV - 1) / NDEV, bytes / s16 / 1e9, bytes / sm / 1e9, bytes / s2 / 1e9,
    100 * sm / s, 100 * s2 / s))
  list, list16, src, dst, csrc, cdst = nil, nil, nil, nil, nil, nil
  collectgarbage(); collectgarbage()
  for i = 0, NDEV - 1 do lunet.empty_cache(i) end
  mb = mb * 4
end

print('(all GB/s = S / time for S bytes per rank; ar/cpy = allreduce algbw / memcpy, ar/2xcpy = allreduce')
print(' algbw / 2x cpy, the same traffic: both read S and write S per worker)')
print('load average: ' .. loadavg())
comm = nil
collectgarbage(); collectgarbage()
lunet.synchronize()
lunet.set_cpu_devices(1)
