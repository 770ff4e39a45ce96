-- Float32 activations beside PyTorch 1.13 (bench/activations_torch.py, run by
-- /usr/bin/python3 from here): exp, sigmoid, tanh, silu, gelu (approximate
-- 'none' and 'tanh'), mish, softplus, elu, hardswish, hardsigmoid on
-- contiguous tensors of 1M and 8M elements (randn * 3), the forward alone
-- (no_grad) and forward + backward of y:backward(g) (g dense: the gradient of
-- sum(y * g)), on 1 and 2 threads; medians of several runs, in rounds that
-- alternate lunet and torch (the machine may be shared). Prints ms and
-- torch/lunet ratios (above 1: lunet faster).
--   luajit bench/activations.lua [--runs R] [--rounds K] [--only a,b] [--sizes 1,8] [--threads 1,2]
-- LUNET_NO_SLEEF=1 in the environment: the scalar libm loops (c/cpu/vact.c).
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local ffi = require 'ffi'
local lunet = require 'lunet'
local json = require 'lunet.json'
local F = lunet.nn.functional

local args = {}
for i = 1, #arg do if arg[i]:match('^%-%-') then args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end end
if args.help then
  print('luajit bench/activations.lua [--runs R] [--rounds K] [--only a,b] [--sizes 1,8] [--threads 1,2]')
  os.exit(0)
end
local RUNS, ROUNDS = tonumber(args.runs) or 5, tonumber(args.rounds) or 2
local function list(s, default)
  if not s then return default end
  local t = {}
  for v in tostring(s):gmatch('[^,]+') do t[#t + 1] = tonumber(v) or v end
  return t
end

local ACTS = {
  { 'exp', function(x) return x:exp() end }, { 'sigmoid', function(x) return x:sigmoid() end },
  { 'tanh', function(x) return x:tanh() end }, { 'silu', F.silu }, { 'gelu', F.gelu },
  { 'gelu_tanh', function(x) return F.gelu(x, 'tanh') end }, { 'mish', F.mish }, { 'softplus', F.softplus },
  { 'elu', F.elu }, { 'hardswish', F.hardswish }, { 'hardsigmoid', F.hardsigmoid },
}
local only = args.only and {} or nil
for _, v in ipairs(list(args.only, {})) do only[v] = true end
local SIZES, THREADS = list(args.sizes, { 1, 8 }), list(args.threads, { 1, 2 })

ffi.cdef [[
  struct lunet_act_ts { long tv_sec; long tv_nsec; };
  int lunet_act_clock(int clk, struct lunet_act_ts *ts) __asm__("clock_gettime");
]]
local ts = ffi.new('struct lunet_act_ts')
local function now()
  ffi.C.lunet_act_clock(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
local function median(xs)
  local t = { unpack(xs) }
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2
end
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

local CASES = {}
for _, a in ipairs(ACTS) do
  if not only or only[a[1]] then
    for _, m in ipairs(SIZES) do CASES[#CASES + 1] = { a[1], m * 1024 * 1024, a[2] } end
  end
end

local function lunet_round(threads)
  lunet.set_num_threads(threads)
  local r = {}
  for _, c in ipairs(CASES) do
    local name, n, f = c[1], c[2], c[3]
    local x = lunet.randn(n) * 3
    local xg = x:clone():requires_grad_()
    local g = lunet.randn(n)
    local k = ('%s %d '):format(name, n)
    r[k .. 'fwd'] = time(function() lunet.no_grad(f, x) end)
    r[k .. 'fwd+bwd'] = time(function()
      xg.grad = nil
      f(xg):backward(g)
    end)
    x, xg, g = nil, nil, nil
    collectgarbage()
  end
  return r
end

local function torch_round(threads)
  local cases = {}
  for i, c in ipairs(CASES) do cases[i] = { c[1], c[2] } end
  local cmd = ("OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=%d /usr/bin/python3 bench/activations_torch.py %d %d '%s'")
    :format(threads, threads, RUNS, json.encode(cases))
  local p = assert(io.popen(cmd))
  local out = p:read('*a')
  p:close()
  return json.decode(assert(out:match('{.*}'), 'activations_torch.py printed no figures'))
end

local function loadavg()
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or ''
  if f then f:close() end
  return s:match('^(%S+ %S+ %S+)') or '?'
end

local load0 = loadavg()
local rows = {}
for _, threads in ipairs(THREADS) do
  local L, P = {}, {}
  for _ = 1, ROUNDS do
    local l, p = lunet_round(threads), torch_round(threads)
    for k, v in pairs(l) do L[k] = L[k] or {}; table.insert(L[k], v) end
    for k, v in pairs(p) do P[k] = P[k] or {}; table.insert(P[k], v) end
  end
  for _, c in ipairs(CASES) do
    for _, what in ipairs({ 'fwd', 'fwd+bwd' }) do
      local k = ('%s %d %s'):format(c[1], c[2], what)
      local lm, pm = median(L[k]), median(P[k])
      rows[#rows + 1] = ('| %d | %s | %dM | %s | %.2f | %.2f | %.2f |'):format(threads, c[1], c[2] / 1048576, what,
        lm, pm, pm / lm)
    end
  end
end
print(('lunet %s%s vs torch via /usr/bin/python3; float32; medians of %d rounds x %d runs; load average %s at the start, %s at the end')
  :format(lunet.version, os.getenv('LUNET_NO_SLEEF') and ' (LUNET_NO_SLEEF)' or '', ROUNDS, RUNS, load0, loadavg()))
print('| threads | activation | numel | pass | lunet ms | torch ms | torch/lunet |')
print('|---|---|---|---|---|---|---|')
for _, r in ipairs(rows) do print(r) end
