-- grid_sample (and affine_grid) beside PyTorch 1.13, one run: x (N, C, H, W)
-- float32 sampled on an affine grid (theta near the identity, so part of the
-- grid falls outside), each mode x padding_mode, forward and forward +
-- backward of the sum w.r.t. x and theta, at 1 and 2 threads. Medians of
-- --runs timings of --reps calls each; torch runs in /usr/bin/python3 (the
-- same shapes, the same loop) right after lunet at each thread count.
--   luajit bench/grid_sample.lua [--n 8] [--c 16] [--size 64] [--runs 7] [--reps 10] [--threads 1,2]
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local ffi = require 'ffi'
local lunet = require 'lunet'
local F = lunet.nn.functional

local args = {}
for i = 1, #arg do if arg[i]:match('^%-%-') then args[arg[i]:sub(3)] = arg[i + 1] end end
local N, Cc, S = tonumber(args.n) or 8, tonumber(args.c) or 16, tonumber(args.size) or 64
local RUNS, REPS = tonumber(args.runs) or 7, tonumber(args.reps) or 10
local THREADS = {}
for t in (args.threads or '1,2'):gmatch('%d+') do THREADS[#THREADS + 1] = tonumber(t) end
local PY = os.getenv('PYTHON') or '/usr/bin/python3'

if not pcall(ffi.typeof, 'struct lunet_bench_timespec') then
  ffi.cdef [[
    struct lunet_bench_timespec { long tv_sec; long tv_nsec; };
    int lunet_bench_clock(int clk, struct lunet_bench_timespec *ts) __asm__("clock_gettime");
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

local CASES = {}
for _, m in ipairs({ 'bilinear', 'nearest', 'bicubic' }) do
  for _, p in ipairs({ 'zeros', 'border', 'reflection' }) do CASES[#CASES + 1] = { m, p } end
end

-- ms per call, median of RUNS
local function time(f)
  f()
  local t = {}
  for r = 1, RUNS do
    local t0 = now()
    for _ = 1, REPS do f() end
    t[r] = (now() - t0) / REPS * 1e3
  end
  return median(t)
end

local function lunet_times()
  lunet.manual_seed(0)
  local x0 = lunet.randn(N, Cc, S, S)
  local th0 = (lunet.tensor({ { 1.1, 0.1, 0.05 }, { -0.1, 0.9, 0 } }) + lunet.randn(2, 3) * 0.05):view(1, 2, 3)
    :expand(N, 2, 3):contiguous()
  local out = {}
  for _, c in ipairs(CASES) do
    local o = { mode = c[1], padding_mode = c[2], align_corners = false }
    local fw = time(function()
      lunet.no_grad(function() F.grid_sample(x0, F.affine_grid(th0, { N, Cc, S, S }), o) end)
    end)
    local x, th = x0:clone():requires_grad_(), th0:clone():requires_grad_()
    local bw = time(function()
      x.grad, th.grad = nil, nil
      F.grid_sample(x, F.affine_grid(th, { N, Cc, S, S }), o):sum():backward()
    end)
    out[#out + 1] = { fw, bw }
  end
  return out
end

local PY_SRC = [==[
import sys, time, statistics, torch
import torch.nn.functional as F
N, C, S, runs, reps, nt = map(int, sys.argv[1:7])
torch.set_num_threads(nt)
torch.manual_seed(0)
x0 = torch.randn(N, C, S, S)
th0 = (torch.tensor([[1.1, 0.1, 0.05], [-0.1, 0.9, 0]]) + torch.randn(2, 3) * 0.05).view(1, 2, 3).expand(N, 2, 3).contiguous()
def tm(f):
    f()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps): f()
        ts.append((time.perf_counter() - t0) / reps * 1e3)
    return statistics.median(ts)
for m in ('bilinear', 'nearest', 'bicubic'):
    for p in ('zeros', 'border', 'reflection'):
        def fw():
            with torch.no_grad():
                F.grid_sample(x0, F.affine_grid(th0, (N, C, S, S), align_corners=False), mode=m, padding_mode=p, align_corners=False)
        x, th = x0.clone().requires_grad_(), th0.clone().requires_grad_()
        def bw():
            x.grad = None; th.grad = None
            F.grid_sample(x, F.affine_grid(th, (N, C, S, S), align_corners=False), mode=m, padding_mode=p, align_corners=False).sum().backward()
        print(tm(fw), tm(bw))
]==]

local function torch_times(nt)
  local path = os.tmpname()
  local f = assert(io.open(path, 'w')); f:write(PY_SRC); f:close()
  local p = assert(io.popen(('OMP_NUM_THREADS=%d %s %s %d %d %d %d %d %d'):format(nt, PY, path, N, Cc, S, RUNS, REPS, nt)))
  local out = {}
  for line in p:lines() do
    local a, b = line:match('([%d.e+-]+)%s+([%d.e+-]+)')
    if a then out[#out + 1] = { tonumber(a), tonumber(b) } end
  end
  p:close()
  os.remove(path)
  return out
end

print(('grid_sample x (%d, %d, %d, %d) float32, affine grid %dx%d, align_corners false; ms per call, medians of %d x %d calls'):format(
  N, Cc, S, S, S, S, RUNS, REPS))
print('| threads | mode | padding | lunet fwd | torch fwd | ratio | lunet fwd+bwd | torch fwd+bwd | ratio |')
print('|---|---|---|---|---|---|---|---|---|')
for _, nt in ipairs(THREADS) do
  lunet.set_num_threads(nt)
  local l, t = lunet_times(), torch_times(nt)
  for i, c in ipairs(CASES) do
    local tt = t[i] or { 0 / 0, 0 / 0 }
    print(('| %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |'):format(nt, c[1], c[2], l[i][1], tt[1],
      tt[1] / l[i][1], l[i][2], tt[2], tt[2] / l[i][2]))
  end
end
print('(ratio: torch time / lunet time; above 1 lunet is faster)')
