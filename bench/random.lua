-- Random fills beside torch 1.13 (bench/random_torch.py through /usr/bin/python3):
-- uniform_, normal_ and bernoulli_(0.5) on N float32 (default 1e8, a VGG16 fc6
-- weight's size) at 1 and 2 threads, and building lunet.models.vgg16() and
-- resnet50() (almost all initialisers) beside torchvision's. Best of RUNS.
--   luajit bench/random.lua [--n ELEMENTS] [--runs R] [--threads 1,2]
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local ffi = require 'ffi'
local lunet = require 'lunet'

local args = {}
for i = 1, #arg do args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end
local N = tonumber(args.n) or 100000000
local RUNS = tonumber(args.runs) or 5
local PY = os.getenv('PYTHON') or '/usr/bin/python3'

if not pcall(ffi.typeof, 'struct lunet_bench_timespec') then
  ffi.cdef [[
    struct lunet_bench_timespec { long tv_sec; long tv_nsec; };
    int lunet_bench_clock(int clk, struct lunet_bench_timespec *ts) __asm__("clock_gettime");
  ]]
end
local ts = ffi.new('struct lunet_bench_timespec')
local function now()
  ffi.C.lunet_bench_clock(1, ts)   -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- best seconds of f over RUNS runs, after one warm-up (best: the machine is shared)
local function best(f)
  f()
  local b = math.huge
  for _ = 1, RUNS do
    local t0 = now(); f(); b = math.min(b, now() - t0)
    collectgarbage()
  end
  return b
end

local function torch_times(threads)
  local p = io.popen(('OMP_NUM_THREADS=%d %s bench/random_torch.py %d %d %d'):format(threads, PY, N, threads, RUNS))
  local r = {}
  for line in p:lines() do
    local k, v = line:match('^(%S+) (%S+)$')
    if k then r[k] = tonumber(v) end
  end
  p:close()
  return r
end

local function loadavg()   -- the machine may be shared: say how busy it was
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or ''
  if f then f:close() end
  return s:match('^(%S+)') or '?'
end

local models = require 'lunet.models'
print(('random fills, %d float32; best of %d; load average %s'):format(N, RUNS, loadavg()))
print(('%-22s %8s %10s %10s %7s'):format('', 'threads', 'lunet s', 'torch s', 'ratio'))
local threads = {}
for t in tostring(args.threads or '1,2'):gmatch('%d+') do threads[#threads + 1] = tonumber(t) end
for _, nt in ipairs(threads) do
  lunet.set_num_threads(nt)
  local x = lunet.empty(N)
  local ours = {
    uniform_ = best(function() x:uniform_() end),
    normal_ = best(function() x:normal_() end),
    bernoulli_ = best(function() x:bernoulli_(0.5) end),
  }
  x = nil
  collectgarbage()
  ours.vgg16 = best(function() models.vgg16() end)
  ours.resnet50 = best(function() models.resnet50() end)
  local theirs = torch_times(nt)
  for _, k in ipairs { 'uniform_', 'normal_', 'bernoulli_', 'vgg16', 'resnet50' } do
    local t = theirs[k]
    print(('%-22s %8d %10.3f %10s %7s'):format(k == 'vgg16' and 'vgg16()' or k == 'resnet50' and 'resnet50()' or k, nt,
      ours[k], t and ('%.3f'):format(t) or '?', t and ('%.2f'):format(ours[k] / t) or '?'))
  end
end
print(('load average after: %s'):format(loadavg()))
