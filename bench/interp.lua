-- F.interpolate beside PyTorch 1.13 (/usr/bin/python3, run from here): each
-- kernel mode on x (8, 32, 64, 64) float32 (trilinear: (4, 16, 16, 32, 32)),
-- scale_factor 2, forward alone and forward + backward of sum(out), on 1 and
-- 2 threads; medians of several runs, in rounds that alternate lunet and
-- torch (the machine may be shared). Prints ms and lunet/torch ratios.
--   luajit bench/interp.lua [--runs R] [--rounds K] [--composed] [--dense]
-- --composed: lunet's composed path (the one before the C kernels) instead.
-- --dense: the backward of a random dense gradient (out:backward(g)) instead
-- of sum's (ones expanded, which lunet's backward reads as one plane).
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local ffi = require 'ffi'
local lunet = require 'lunet'
local F = lunet.nn.functional

local args = {}
for i = 1, #arg do args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end
local RUNS, ROUNDS = tonumber(args.runs) or 7, tonumber(args.rounds) or 3
if args.composed then F._internal.interp_kernels(false) end

ffi.cdef [[
  struct lunet_interp_ts { long tv_sec; long tv_nsec; };
  int lunet_interp_clock(int clk, struct lunet_interp_ts *ts) __asm__("clock_gettime");
]]
local ts = ffi.new('struct lunet_interp_ts')
local function now()
  ffi.C.lunet_interp_clock(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
local function median(xs)
  local t = { unpack(xs) }
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2
end

local CASES = {
  { 'nearest', { 8, 32, 64, 64 } }, { 'nearest-exact', { 8, 32, 64, 64 } }, { 'bilinear', { 8, 32, 64, 64 } },
  { 'bicubic', { 8, 32, 64, 64 } }, { 'trilinear', { 4, 16, 16, 32, 32 } }, { 'linear', { 8, 32, 4096 } },
}
local INTERP = { linear = true, bilinear = true, bicubic = true, trilinear = true }

-- median ms of RUNS runs of f (after a warm-up)
local function time(f)
  f()
  local t = {}
  for i = 1, RUNS do
    local t0 = now()
    f()
    t[i] = (now() - t0) * 1e3
  end
  return median(t)
end

local function lunet_round(threads)
  lunet.set_num_threads(threads)
  local r = {}
  for _, c in ipairs(CASES) do
    local mode, shape = c[1], c[2]
    local o = { scale_factor = 2, mode = mode }
    if INTERP[mode] then o.align_corners = false end
    local x = lunet.randn(shape)
    local xg = x:clone():requires_grad_()
    local gd = args.dense and lunet.randn(F.interpolate(x, o):size())
    r[mode .. ' fwd'] = time(function() lunet.no_grad(function() return F.interpolate(x, o) end) end)
    r[mode .. ' fwd+bwd'] = time(function()
      xg.grad = nil
      if gd then F.interpolate(xg, o):backward(gd) else F.interpolate(xg, o):sum():backward() end
    end)
  end
  return r
end

local PY = [[
import sys, time, json, torch, torch.nn.functional as F
threads, runs, dense = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4] == '1'
torch.set_num_threads(threads)
cases = json.loads(sys.argv[3])
def med(f):
    f(); t = []
    for _ in range(runs):
        t0 = time.perf_counter(); f(); t.append((time.perf_counter() - t0) * 1e3)
    t.sort(); n = len(t)
    return t[n // 2] if n % 2 else (t[n // 2 - 1] + t[n // 2]) / 2
r = {}
for mode, shape in cases:
    kw = dict(scale_factor=2, mode=mode)
    if mode in ('linear', 'bilinear', 'bicubic', 'trilinear'): kw['align_corners'] = False
    x = torch.randn(shape); xg = x.clone().requires_grad_()
    gd = torch.randn(F.interpolate(x, **kw).shape) if dense else None
    def fwd():
        with torch.no_grad(): F.interpolate(x, **kw)
    def both():
        xg.grad = None
        if dense: F.interpolate(xg, **kw).backward(gd)
        else: F.interpolate(xg, **kw).sum().backward()
    r[mode + ' fwd'] = med(fwd); r[mode + ' fwd+bwd'] = med(both)
print(json.dumps(r))
]]
local json = require 'lunet.json'
local function torch_round(threads)
  local f = assert(io.open('/tmp/lunet_bench_interp.py', 'w'))
  f:write(PY)
  f:close()
  local cases = {}
  for i, c in ipairs(CASES) do cases[i] = { c[1], c[2] } end
  local cmd = ("OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=%d /usr/bin/python3 /tmp/lunet_bench_interp.py %d %d '%s' %d")
    :format(threads, threads, RUNS, json.encode(cases), args.dense and 1 or 0)
  local p = assert(io.popen(cmd))
  local out = p:read('*a')
  p:close()
  return json.decode(out:match('{.*}'))
end

local function loadavg()
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or ''
  if f then f:close() end
  return s:match('^(%S+)') or '?'
end

local rows = {}
for _, threads in ipairs({ 1, 2 }) do
  local L, P = {}, {}
  for _ = 1, ROUNDS do
    local l, p = lunet_round(threads), torch_round(threads)
    for k, v in pairs(l) do L[k] = L[k] or {}; table.insert(L[k], v) end
    for k, v in pairs(p) do P[k] = P[k] or {}; table.insert(P[k], v) end
  end
  for _, c in ipairs(CASES) do
    for _, what in ipairs({ ' fwd', ' fwd+bwd' }) do
      local k = c[1] .. what
      local lm, pm = median(L[k]), median(P[k])
      rows[#rows + 1] = ('| %d | %s | %s | %.2f | %.2f | %.2f |'):format(threads, c[1] .. ' ' .. table.concat(c[2], 'x'),
        what:sub(2), lm, pm, lm / pm)
    end
  end
end
print(('lunet %s%s%s vs torch %s; medians of %d rounds x %d runs; load average at the end %s')
  :format(lunet.version, args.composed and ' (composed path)' or '', args.dense and ' (dense gradient)' or '', 'via /usr/bin/python3', ROUNDS, RUNS, loadavg()))
print('| threads | mode, input | pass | lunet ms | torch ms | lunet/torch |')
print('|---|---|---|---|---|---|')
for _, r in ipairs(rows) do print(r) end
