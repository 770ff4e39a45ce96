-- Depthwise and grouped conv2d beside PyTorch 1.13 (bench/dwconv_torch.py,
-- /usr/bin/python3, run from here): the mobile CNNs' shapes (lunet.models'
-- mobilenet_v3, efficientnet, shufflenet_v2, regnet, convnext), float32 NCHW,
-- batch 32, no bias, on 1 and 2 threads. Per case: forward (no grad), and
-- the backward (retain_graph) of an output whose input (dx) or weight (dw)
-- alone requires grad: the input- and weight-gradient times. Best of RUNS runs in each of ROUNDS rounds alternating lunet and
-- torch, and the best round (the machine may be shared: minima, not medians).
-- faster).
--   luajit bench/dwconv.lua [--runs R] [--rounds K] [--threads 1,2] [--only NAME]
-- LUNET_CONV_IMPL=gemm|direct|dnnl forces lunet's path (c/cpu/conv2d.c).
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local ffi = require 'ffi'
local lunet = require 'lunet'
local F = lunet.nn.functional

local args = {}
for i = 1, #arg do args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end
local RUNS, ROUNDS = tonumber(args.runs) or 7, tonumber(args.rounds) or 2
local THREADS = {}
for t in tostring(args.threads or '1,2'):gmatch('%d+') do THREADS[#THREADS + 1] = tonumber(t) end
local N = tonumber(args.batch) or 32

ffi.cdef [[
  struct lunet_dw_ts { long tv_sec; long tv_nsec; };
  int lunet_dw_clock(int clk, struct lunet_dw_ts *ts) __asm__("clock_gettime");
]]
local ts = ffi.new('struct lunet_dw_ts')
local function now()
  ffi.C.lunet_dw_clock(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
local function best(xs) return math.min(unpack(xs)) end

-- name, C (= O), H (= W), k, stride, padding, groups (nil: depthwise)
local CASES = {
  { 'dw3 s1 16@56', 16, 56, 3, 1, 1 }, { 'dw3 s1 64@28', 64, 28, 3, 1, 1 }, { 'dw3 s1 240@14', 240, 14, 3, 1, 1 },
  { 'dw3 s2 16@56', 16, 56, 3, 2, 1 }, { 'dw3 s2 64@28', 64, 28, 3, 2, 1 }, { 'dw3 s2 240@14', 240, 14, 3, 2, 1 },
  { 'dw5 s1 120@14', 120, 14, 5, 1, 2 }, { 'dw5 s2 240@28', 240, 28, 5, 2, 2 }, { 'dw7 s1 96@16', 96, 16, 7, 1, 3 },
  { 'g3 48/6@28', 48, 28, 3, 1, 1, 6 }, { 'g3 104/13@14', 104, 14, 3, 1, 1, 13 },
  { 'shuf dw3 s2 58@56', 58, 56, 3, 2, 1 }, { 'shuf dw3 s2 116@28', 116, 28, 3, 2, 1 },
}
if args.only then
  local keep = {}
  for _, c in ipairs(CASES) do if c[1]:find(args.only, 1, true) then keep[#keep + 1] = c end end
  CASES = keep
end

-- best ms of RUNS runs of f (after a warm-up)
local function time(f)
  f()
  local best = math.huge
  for _ = 1, RUNS do
    local t0 = now()
    f()
    best = math.min(best, (now() - t0) * 1e3)
  end
  return best
end

local function lunet_round(threads)
  lunet.set_num_threads(threads)
  local r = {}
  for _, c in ipairs(CASES) do
    local name, C, H, k, s, p, g = unpack(c)
    g = g or C
    local o = { stride = s, padding = p, groups = g }
    local x = lunet.randn(N, C, H, H)
    local w = lunet.randn(C, C / g, k, k)
    local xg, wg = x:clone():requires_grad_(), w:clone():requires_grad_()
    local gd = lunet.randn(F.conv2d(x, w, nil, o):size())
    local fwd = time(function() lunet.no_grad(function() return F.conv2d(x, w, nil, o) end) end)
    r[name .. ' fwd'] = fwd
    local ox, ow, keep = F.conv2d(xg, w, nil, o), F.conv2d(x, wg, nil, o), { retain_graph = true }
    r[name .. ' dx'] = time(function() xg.grad = nil; ox:backward(gd, keep) end)
    r[name .. ' dw'] = time(function() wg.grad = nil; ow:backward(gd, keep) end)
  end
  return r
end

local function torch_round(threads)
  local spec = {}
  for _, c in ipairs(CASES) do
    local name, C, H, k, s, p, g = unpack(c)
    spec[#spec + 1] = ('["%s", %d, %d, %d, %d, %d, %d]'):format(name, C, H, k, s, p, g or C)
  end
  local cmd = ("/usr/bin/python3 bench/dwconv_torch.py %d %d %d '[%s]'"):format(threads, RUNS, N,
    table.concat(spec, ','))
  local f = assert(io.popen(cmd))
  local r = {}
  for line in f:lines() do
    local key, ms = line:match('^(.-)\t([%d.e%-]+)$')
    if key then r[key] = tonumber(ms) end
  end
  f:close()
  return r
end

local rows = {}
for _, threads in ipairs(THREADS) do
  local L, T = {}, {}
  for _ = 1, ROUNDS do
    for key, v in pairs(lunet_round(threads)) do L[key] = L[key] or {}; table.insert(L[key], v) end
    for key, v in pairs(torch_round(threads)) do T[key] = T[key] or {}; table.insert(T[key], v) end
  end
  for _, c in ipairs(CASES) do
    for _, pass in ipairs { 'fwd', 'dx', 'dw' } do
      local key = c[1] .. ' ' .. pass
      local l, t = best(L[key]), T[key] and best(T[key])
      rows[#rows + 1] = ('%d  %-26s %9.3f %9.3f   %5.2f'):format(threads, key, l, t or 0 / 0, t and t / l or 0 / 0)
    end
  end
end
print(('batch %d, %s, LUNET_CONV_IMPL=%s, load %s'):format(N, 'float32 NCHW', os.getenv('LUNET_CONV_IMPL') or 'auto',
  (io.open('/proc/loadavg'):read('*l'):match('^(%S+ %S+ %S+)'))))
print('thr case                      lunet ms  torch ms  torch/lunet')
for _, r in ipairs(rows) do print(r) end
