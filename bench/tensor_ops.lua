-- Tensor op throughput beside its hardware reference (make bench):
--   elementwise add of two large float32 tensors, in GB/s, beside memcpy
--   (bytes read + written counted the same way: add moves 3 x n x 4 bytes,
--   memcpy 2 x n x 4), and 1024^3 float32 matmul in GFLOP/s beside
--   cblas_sgemm called directly. Medians of several runs.
--   luajit bench/tensor_ops.lua [--n ELEMENTS] [--runs R]
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local ffi = require 'ffi'
local lunet = require 'lunet'
local C = lunet.C
-- the reference GEMM (ln_cblas_sgemm_direct): c/include/lunet_internal.h
if not pcall(ffi.typeof, 'ln_rec_stats') then ffi.cdef(require 'lunet.cdef_internal') end

local args = {}
for i = 1, #arg do args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end
local N = tonumber(args.n) or 64 * 1024 * 1024
local RUNS = tonumber(args.runs) or 9
local MM = tonumber(args.mm) or 1024

if not pcall(ffi.typeof, 'struct lunet_bench_timespec') then
  ffi.cdef [[
    struct lunet_bench_timespec { long tv_sec; long tv_nsec; };
    int lunet_bench_clock(int clk, struct lunet_bench_timespec *ts) __asm__("clock_gettime");
    void *lunet_bench_memcpy(void *dst, const void *src, size_t n) __asm__("memcpy");
    void *lunet_bench_memset(void *dst, int c, size_t n) __asm__("memset");
  ]]
end
local ts = ffi.new('struct lunet_bench_timespec')
local function now()
  ffi.C.lunet_bench_clock(1, ts)   -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

-- Median seconds of f and g over RUNS runs each, after one warm-up each. The
-- runs alternate (f, g, f, g, ...) so that both see the same machine load;
-- prep() runs untimed before every run.
local function compare(f, g, prep)
  prep = prep or function() end
  prep(); f(); prep(); g()
  local tf, tg = {}, {}
  for i = 1, RUNS do
    prep()
    local t0 = now(); f(); tf[i] = now() - t0
    prep()
    t0 = now(); g(); tg[i] = now() - t0
  end
  return median(tf), median(tg)
end

local function loadavg()          -- the machine may be shared: say how busy it was
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or ''
  if f then f:close() end
  return s:match('^(%S+)') or '?'
end
local load_before = loadavg()

local rows = {}
local function row(name, size, secs, figure, unit, ref_name, ref_figure, target)
  local ratio = figure / ref_figure
  rows[#rows + 1] = {name, size, ('%.2f ms'):format(secs * 1e3), ('%.1f %s'):format(figure, unit),
    ('%s %.1f %s'):format(ref_name, ref_figure, unit), ('%.2f'):format(ratio),
    ('>= %.2f %s'):format(target, ratio >= target and 'ok' or 'MISSED')}
end

-- ---- elementwise add vs memcpy -----------------------------------------------------------
local a = lunet.rand({N})
local b = lunet.rand({N})
local bytes = N * 4
local c = a + b
lunet.synchronize()
local src, dst = C.ln_data_ptr(a.p), C.ln_data_ptr(c.p)
local function collect()        -- the last result's block goes back to the cache
  c = nil
  collectgarbage()
end
local function memcpy() ffi.C.lunet_bench_memcpy(dst, src, bytes) end
local add_s, memcpy_s = compare(function() c = a + b; lunet.synchronize() end, memcpy, collect)
local out = lunet.empty({N})
local copy_s, memcpy2_s = compare(function() out:copy_(a); lunet.synchronize() end, memcpy)
local add_gbs = 3 * bytes / add_s / 1e9
local memcpy_gbs = 2 * bytes / memcpy_s / 1e9
row('add (a + b)', ('%dM f32'):format(N / 2 ^ 20), add_s, add_gbs, 'GB/s', 'memcpy', memcpy_gbs, 0.70)
row('copy_ (lunet)', ('%dM f32'):format(N / 2 ^ 20), copy_s, 2 * bytes / copy_s / 1e9, 'GB/s', 'memcpy',
  2 * bytes / memcpy2_s / 1e9, 0.70)
a, b, c, out = nil, nil, nil, nil
collectgarbage()
lunet.empty_cache()

-- ---- matmul vs cblas_sgemm ---------------------------------------------------------------
local x = lunet.randn({MM, MM})
local y = lunet.randn({MM, MM})
local z
local flops = 2 * MM ^ 3
local ref = lunet.empty({MM, MM})
local px, py, pr = C.ln_data_ptr(x.p), C.ln_data_ptr(y.p), C.ln_data_ptr(ref.p)
local mm_s, blas_s = compare(function() z = x:matmul(y); lunet.synchronize() end,
  function() C.ln_cblas_sgemm_direct(MM, MM, MM, px, py, pr) end,
  function() z = nil; collectgarbage() end)
z = x:matmul(y)
local maxdiff = (z - ref):abs():max():item()
row('matmul', ('%d^3 f32'):format(MM), mm_s, flops / mm_s / 1e9, 'GFLOP/s', 'cblas', flops / blas_s / 1e9, 0.90)

-- ---- table ---------------------------------------------------------------------------------
local head = {'op', 'size', 'median', 'lunet', 'reference', 'ratio', 'target'}
local w = {}
for i = 1, #head do
  w[i] = #head[i]
  for _, r in ipairs(rows) do w[i] = math.max(w[i], #r[i]) end
end
local function line(r)
  local s = {}
  for i = 1, #r do s[i] = r[i] .. (' '):rep(w[i] - #r[i]) end
  print(table.concat(s, '  '))
end
print(('lunet %s tensor ops: %d cores (%s), %d threads, median of %d runs'):format(lunet.version,
  C.ln_num_cores(), ffi.string(C.ln_cpu_features()), C.ln_device_threads(0), RUNS))
line(head)
for _, r in ipairs(rows) do line(r) end
print(('matmul max |lunet - cblas| = %.3g; load average %s before, %s after'):format(maxdiff, load_before, loadavg()))
