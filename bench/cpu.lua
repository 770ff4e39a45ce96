-- CNN training and inference on the CPU (make bench; bench/compare_torch for
-- the side-by-side run with PyTorch). For each model of bench/models.lua:
--   training images/s at batch 64 and 256 (SGD, momentum 0.9), the time of one
--   training step at batch 1, inference images/s at batch 256 (eval, no_grad),
--   achieved GFLOP/s beside the measured cblas_sgemm ceiling (all threads);
-- then ResNet-8's 3x3 convolutions one by one (forward + both gradients, batch
-- 64), peak RSS while training LeNet-5 (its own process) and the time of
-- require'lunet'. Each figure is the median of several timed windows of about
-- --window seconds after warm-up. With --torch the same models, shapes and
-- thread count run in PyTorch (/usr/bin/python3 bench/torch_models.py, with
-- OPENBLAS_NUM_THREADS=1 and torch.set_num_threads(threads)) in the same
-- invocation, window for window interleaved with lunet's, and the table gets
-- lunet/PyTorch ratios and the targets.
--   luajit bench/cpu.lua [--torch] [--windows 5] [--window 0.4] [--models seed28,lenet5]
--                        [--json bench/cpu.json] [--quick]
--   luajit bench/cpu.lua --rss MODEL BATCH STEPS     (internal: peak RSS of training)
package.path = './lua/?.lua;./lua/?/init.lua;./bench/?.lua;' .. package.path

local args = {}
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:gsub('^%-%-', '')
    local v = arg[i + 1]
    if v == nil or v:match('^%-%-') then args[k] = true; i = i + 1 else args[k] = v; i = i + 2 end
  end
end

-- ---- require'lunet' time (internal mode) ------------------------------------------------
if args.require_time then
  local ffi = require 'ffi'
  pcall(ffi.cdef, 'struct bench_ts { long s; long ns; }; int clock_gettime(int, struct bench_ts *);')
  local ts = ffi.new('struct bench_ts')
  local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.s) + tonumber(ts.ns) * 1e-9 end
  local t0 = now()
  require 'lunet'
  print(('%.6f'):format(now() - t0))
  return
end

local ffi = require 'ffi'
local lunet = require 'lunet'
local models = require 'models'
local nn, optim = lunet.nn, lunet.optim
local C = lunet.C
-- the reference GEMM (ln_cblas_sgemm_direct): c/include/lunet_internal.h
if not pcall(ffi.typeof, 'ln_rec_stats') then ffi.cdef(require 'lunet.cdef_internal') end
local clock = lunet.clock

local POOL = 1024   -- images per model and case

local function make_step(name, mode, batch)
  lunet.manual_seed(0)
  local spec = models[name]
  local model = spec.build(nn)
  -- a pool of POOL images in batches, random labels, taken in turn: one batch
  -- trained over and over reaches a loss of exactly 0, and the decaying
  -- momentum buffers then run through denormal floats (slow on both sides)
  local k = math.ceil(POOL / batch)
  local xs, ys = {}, {}
  for i = 1, k do
    xs[i] = lunet.randn({ batch, spec.input[1], spec.input[2], spec.input[3] })
    ys[i] = lunet.randint(1, 11, { batch })
  end
  local i = 0
  if mode == 'infer' then
    model:eval()
    local function fwd() return model(xs[i + 1]) end
    return function() lunet.no_grad(fwd); i = (i + 1) % k end, model
  end
  local crit = nn.CrossEntropyLoss()
  -- lr 0.001: at 0.01 the batch-1 nets die within a few hundred steps (every
  -- ReLU off), and the momentum buffers of the dead weights decay through
  -- denormal floats, which then take over half of the step on both sides
  local opt = optim.SGD(model:parameters(), { lr = 0.001, momentum = 0.9 })
  return function()
    opt:zero_grad()
    local loss = crit(model(xs[i + 1]), ys[i + 1])
    loss:backward()
    opt:step()
    i = (i + 1) % k
    return loss
  end, model
end

-- ---- peak RSS (internal mode: its own process) ------------------------------------------
local function vm_hwm()
  local f = io.open('/proc/self/status')
  local s = f:read('*a')
  f:close()
  return tonumber(s:match('VmHWM:%s*(%d+)'))
end

if args.rss then
  local step = make_step(args.rss, 'train', tonumber(arg[#arg - 1]))
  for _ = 1, tonumber(arg[#arg]) do step() end
  lunet.synchronize()
  print(vm_hwm())
  return
end

local WINDOWS = tonumber(args.windows) or (args.quick and 3 or 5)
local TARGET = tonumber(args.window) or (args.quick and 0.2 or 0.4)
local THREADS = C.ln_device_threads(0)
local TORCH = args.torch
local JSON = args.json or (TORCH and 'bench/compare_torch.json' or 'bench/cpu.json')
local PY = os.getenv('PYTHON') or '/usr/bin/python3'

local function median(xs)
  local t = {}
  for i = 1, #xs do t[i] = xs[i] end
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2
end

local function sh(cmd)
  local p = io.popen(cmd)
  local s = p:read('*a')
  p:close()
  return s
end

-- ---- the PyTorch side: a server process fed on stdin, replying through a FIFO -------
local torch = {}
if TORCH then
  local fifo = os.tmpname()
  os.remove(fifo)
  assert(os.execute('mkfifo ' .. fifo) == 0, 'compare_torch: mkfifo failed')
  torch.cmd = io.popen(('OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=%d %s bench/torch_models.py serve %s %d'):format(
    THREADS, PY, fifo, THREADS), 'w')
  torch.reply = assert(io.open(fifo, 'r'))
  os.remove(fifo)
  function torch.ask(line)
    torch.cmd:write(line, '\n')
    torch.cmd:flush()
    local r = torch.reply:read('*l')
    if r == nil or r:match('^error') then error('compare_torch: PyTorch server: ' .. tostring(r)) end
    return r
  end
end

-- calibrate: steps of a window of about TARGET seconds, after 3 warm-up steps
local function calibrate(step)
  for _ = 1, 3 do step() end
  lunet.synchronize()
  local t0, n = clock(), 0
  while n < 2 or clock() - t0 < TARGET / 2 do step(); n = n + 1 end
  lunet.synchronize()
  return math.max(2, math.floor(TARGET / ((clock() - t0) / n) + 0.5))
end

local function window(step, n)
  collectgarbage('step', 0)
  local t0 = clock()
  for _ = 1, n do step() end
  lunet.synchronize()
  return clock() - t0
end

-- Medians of the seconds per step of lunet and PyTorch (nil without --torch),
-- windows interleaved: lunet, torch, lunet, torch, ...; with `other` (a
-- step of its own, e.g. the sgemm), its windows too, after each pair, and
-- its median fifth
local keyn = 0
local function measure(step, torch_setup, other)
  keyn = keyn + 1
  local key = 'k' .. keyn
  local n = calibrate(step)
  local no = other and calibrate(other)
  if TORCH then torch.ask(torch_setup:format(key, TARGET)) end
  local tl, tt, to = {}, {}, {}
  for i = 1, WINDOWS do
    tl[i] = window(step, n) / n
    if TORCH then
      local steps, secs = torch.ask('run ' .. key):match('(%d+) (%S+)')
      tt[i] = tonumber(secs) / tonumber(steps)
    end
    if other then to[i] = window(other, no) / no end
  end
  if TORCH then torch.ask('drop ' .. key) end
  return median(tl), TORCH and median(tt) or nil, tl, TORCH and tt or nil, other and median(to) or nil
end

-- ---- the sgemm ceiling (best of 7 runs) -----------------------------------------------------------------
local SGEMM_N = 1024
local sgemm_step
do
  local MM = SGEMM_N
  local a, b, c = lunet.randn({ MM, MM }), lunet.randn({ MM, MM }), lunet.empty({ MM, MM })
  local pa, pb, pc = C.ln_data_ptr(a.p), C.ln_data_ptr(b.p), C.ln_data_ptr(c.p)
  sgemm_step = function() C.ln_cblas_sgemm_direct(MM, MM, MM, pa, pb, pc) end
end
local function sgemm_ceiling()
  local MM = SGEMM_N
  local f = sgemm_step
  f()
  local best = math.huge   -- a ceiling: the best of 7 (a load spike only lowers a run)
  for _ = 1, 7 do
    local t0 = clock(); f(); f(); best = math.min(best, (clock() - t0) / 2)
  end
  return 2 * MM ^ 3 / best / 1e9
end

-- ---- run ---------------------------------------------------------------------------------
local results = { machine = {}, models = {}, conv3x3 = {}, date = os.date('!%Y-%m-%d %H:%M UTC') }
local m = results.machine
m.cpu = sh("grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'"):gsub('%s+$', '')
m.cores = C.ln_num_cores()
m.threads = THREADS
m.features = ffi.string(C.ln_cpu_features())
m.load_before = sh('cat /proc/loadavg'):match('^(%S+)')
m.torch = TORCH and sh(PY .. " -c 'import torch; print(torch.__version__)' 2>/dev/null"):gsub('%s+$', '') or nil
local ceiling = sgemm_ceiling()
m.sgemm_gflops = ceiling

local names = {}
if args.models then for s in args.models:gmatch('[^,]+') do names[#names + 1] = s end
else names = models.order end

local rows = {}
local function add_row(r) rows[#rows + 1] = r end

for _, name in ipairs(names) do
  local fwd_flops, train_flops = models.flops(name)
  local res = { fwd_gflop_per_image = fwd_flops / 1e9, train_gflop_per_image = train_flops / 1e9 }
  results.models[name] = res
  local cases = {
    { 'train', 64, 'train_b64' }, { 'train', 256, 'train_b256' }, { 'train', 1, 'step_b1' },
    { 'infer', 256, 'infer_b256' },
  }
  if args.quick then cases[2] = nil; cases[2] = cases[3]; cases[3] = cases[4]; cases[4] = nil end
  for _, cs in ipairs(cases) do
    local mode, batch, what = cs[1], cs[2], cs[3]
    local step, model = make_step(name, mode, batch)
    local sl, st, wl, wt = measure(step, ('setup %%s %s %s %d %%g'):format(name, mode, batch))
    step, model = nil, nil
    collectgarbage(); collectgarbage()
    local flops = (mode == 'train' and train_flops or fwd_flops) * batch
    local r = { model = name, what = what, batch = batch, lunet_s = sl, torch_s = st,
      lunet_gflops = flops / sl / 1e9, torch_gflops = st and flops / st / 1e9,
      lunet_windows_s = wl, torch_windows_s = wt }   -- seconds per step of every window
    if what == 'step_b1' then
      r.unit, r.lunet, r.torch = 'ms/step', sl * 1e3, st and st * 1e3
      r.ratio = st and st / sl   -- > 1: lunet faster
    else
      r.unit, r.lunet, r.torch = 'img/s', batch / sl, st and batch / st
      r.ratio = st and st / sl
    end
    res[what] = r
    add_row(r)
    io.stderr:write(('  %-8s %-10s lunet %9.2f %s%s\n'):format(name, what, r.lunet, r.unit,
      st and ('  torch %9.2f  ratio %.2f'):format(r.torch, r.ratio) or ''))
  end
end

-- ResNet-8's 3x3 convolutions, forward + input and weight gradients, batch 64
if not args.models or args.models:match('resnet8') then
  local B = 64
  for _, l in ipairs(models.resnet8.conv3x3) do
    local cin, cout, h, s = l[1], l[2], l[3], l[4]
    local oh = math.floor((h - 1) / s) + 1
    lunet.manual_seed(0)
    local w = lunet.randn({ cout, cin, 3, 3 }):requires_grad_()
    local x = lunet.randn({ B, cin, h, h }):requires_grad_()
    local g = lunet.randn({ B, cout, oh, oh })
    local opts = { stride = s, padding = 1 }
    local F = nn.functional
    local step = function()
      w.grad, x.grad = nil, nil
      F.conv2d(x, w, nil, opts):backward(g)
    end
    -- the sgemm's windows interleaved with the layer's: the ceiling of the
    -- same minutes (the best-of-7 ceiling moved 177-277 GFLOP/s between runs)
    local sl, st, _, _, sg = measure(step, ('conv %%s %d %d %d %d %d %%g'):format(cin, cout, h, s, B), sgemm_step)
    local flops = 3 * 2 * cin * cout * 9 * oh * oh * B
    local r = { layer = ('%d->%d %dx%d s%d'):format(cin, cout, h, h, s), lunet_s = sl, torch_s = st,
      lunet_gflops = flops / sl / 1e9, torch_gflops = st and flops / st / 1e9 }
    r.sgemm_gflops = 2 * SGEMM_N ^ 3 / sg / 1e9
    r.of_ceiling = r.lunet_gflops / r.sgemm_gflops
    r.of_best_ceiling = r.lunet_gflops / ceiling
    results.conv3x3[#results.conv3x3 + 1] = r
    io.stderr:write(('  conv3x3 %-16s lunet %6.1f GFLOP/s (%3.0f%% of sgemm %.1f)%s\n'):format(r.layer, r.lunet_gflops,
      100 * r.of_ceiling, r.sgemm_gflops, st and ('  torch %6.1f GFLOP/s'):format(r.torch_gflops) or ''))
    step = nil
    collectgarbage(); collectgarbage()
  end
end

if TORCH then torch.cmd:write('quit\n'); torch.cmd:close(); torch.reply:close() end

-- peak RSS while training LeNet-5 (batch 64, 50 steps), each in its own process
do
  local steps = args.quick and 20 or 50
  local lr, tr = {}, {}
  for i = 1, (args.quick and 1 or 3) do
    lr[i] = tonumber(sh(('luajit bench/cpu.lua --rss lenet5 64 %d'):format(steps)))
    if TORCH then
      tr[i] = tonumber(sh(('OPENBLAS_NUM_THREADS=1 %s bench/torch_models.py rss lenet5 64 %d %d'):format(PY, steps, THREADS)))
    end
  end
  results.rss_lenet5_kib = { lunet = median(lr), torch = TORCH and median(tr) or nil }
end

-- require'lunet' vs import torch, in-process times, medians of 5 fresh processes
do
  local lr, tr = {}, {}
  for i = 1, 5 do
    lr[i] = tonumber(sh('luajit bench/cpu.lua --require_time'))
    if TORCH then tr[i] = tonumber(sh(PY .. ' bench/torch_models.py import')) end
  end
  results.require_s = { lunet = median(lr), torch = TORCH and median(tr) or nil }
end
m.load_after = sh('cat /proc/loadavg'):match('^(%S+)')

-- ---- table ---------------------------------------------------------------------------------
local TARGETS = {   -- lunet/PyTorch speed ratio wanted (>= 1 faster), per model and figure
  train_b64 = { seed28 = 2, seed32 = 2, lenet5 = 2, resnet8 = 1.3 },
  train_b256 = { resnet8 = 1.3 },
  step_b1 = { seed28 = 2, seed32 = 2, lenet5 = 2, resnet8 = 2 },
  infer_b256 = { seed28 = 1.5, seed32 = 1.5, lenet5 = 1.5, resnet8 = 1.5 },
}
local out = {}
local function p(s) out[#out + 1] = s; print(s) end
p(('lunet %s on %s: %d cores, %d threads, %s; sgemm ceiling (cblas_sgemm 1024^3, %d threads) %.1f GFLOP/s'):format(
  lunet.version or '?', m.cpu, m.cores, THREADS, m.features, THREADS, ceiling))
p(('medians of %d windows of ~%.2f s; load average %s before, %s after%s'):format(WINDOWS, TARGET, m.load_before,
  m.load_after, TORCH and ('; PyTorch ' .. m.torch .. ' interleaved') or ''))
p('')
local head = TORCH and '| model | figure | lunet | PyTorch | ratio | target | lunet GFLOP/s | PyTorch GFLOP/s |'
  or '| model | figure | lunet | lunet GFLOP/s |'
p(head)
p(head:gsub('[^|]+', '---'))
for _, r in ipairs(rows) do
  local fmt = r.unit == 'ms/step' and '%.2f ms' or '%.0f img/s'
  if TORCH then
    local t = TARGETS[r.what] and TARGETS[r.what][r.model]
    r.target = t
    r.met = t and r.ratio >= t or nil
    p(('| %s | %s | %s | %s | %.2f | %s | %.1f | %.1f |'):format(r.model, r.what, fmt:format(r.lunet),
      fmt:format(r.torch), r.ratio, t and ('>= %.1f %s'):format(t, r.met and 'met' or 'MISSED') or '',
      r.lunet_gflops, r.torch_gflops))
  else
    p(('| %s | %s | %s | %.1f |'):format(r.model, r.what, fmt:format(r.lunet), r.lunet_gflops))
  end
end
if #results.conv3x3 > 0 then
  p('')
  p('ResNet-8 3x3 convolutions, batch 64, forward + both gradients (target: >= 60% of the sgemm ceiling)')
  p(TORCH and '| layer | lunet GFLOP/s | sgemm GFLOP/s | of sgemm | of best-of-7 | PyTorch GFLOP/s | ratio |'
    or '| layer | lunet GFLOP/s | sgemm GFLOP/s | of sgemm | of best-of-7 |')
  p(TORCH and '|---|---|---|---|---|---|---|' or '|---|---|---|---|---|')
  for _, r in ipairs(results.conv3x3) do
    p(('| %s | %.1f | %.1f | %.0f%% %s | %.0f%% | %s'):format(r.layer, r.lunet_gflops, r.sgemm_gflops,
      100 * r.of_ceiling, r.of_ceiling >= 0.6 and 'met' or 'MISSED', 100 * r.of_best_ceiling,
      TORCH and ('%.1f | %.2f |'):format(r.torch_gflops, r.torch_s / r.lunet_s) or ''))
  end
  p('(GFLOP/s = direct-convolution FLOPs, 3 x 2*C*O*9*OH*OW*64, / time, medians. sgemm = cblas_sgemm')
  p((' %d^3 on %d threads, its windows interleaved with the layer\'s: the ceiling of the same minutes;'):format(SGEMM_N, THREADS))
  p((' of best-of-7: against the %.1f GFLOP/s measured once at the start. lunet runs stride-1 layers of 32+'):format(ceiling))
  p(' channels (and the weight gradient of 16->16) as Winograd F(4x4,3x3) on AVX-512 (c/nn/conv_dnnl.c,')
  p(' winograd_wanted), which needs fewer multiplications: their figures are effective rates.')
  p(' LUNET_WINOGRAD=0 gives the direct kernels.)')
end
p('')
local rs, rq = results.rss_lenet5_kib, results.require_s
if TORCH then
  p(('peak RSS training LeNet-5 (batch 64): lunet %.1f MiB, PyTorch %.1f MiB, ratio %.2f (target <= 0.33: %s)'):format(
    rs.lunet / 1024, rs.torch / 1024, rs.lunet / rs.torch, rs.lunet / rs.torch <= 1 / 3 and 'met' or 'MISSED'))
  p(("require'lunet' %.1f ms, import torch %.1f ms, ratio %.3f (target <= 0.1: %s)"):format(rq.lunet * 1e3,
    rq.torch * 1e3, rq.lunet / rq.torch, rq.lunet / rq.torch <= 0.1 and 'met' or 'MISSED'))
else
  p(("peak RSS training LeNet-5 (batch 64): %.1f MiB; require'lunet' %.1f ms"):format(rs.lunet / 1024, rq.lunet * 1e3))
end
results.table = table.concat(out, '\n')
if args.md then   -- the figures as markdown (bench/RESULTS.md's generated part)
  local cmd = 'luajit bench/cpu.lua'
  for i = 1, #arg do cmd = cmd .. ' ' .. arg[i] end
  local f = assert(io.open(args.md, 'w'))
  f:write(('## Figures (%s)\n\nCommand: `%s`%s  \nMachine: %s, %d cores (%s), %d threads; Debian %s; LuaJIT %s%s  \n'):format(
    results.date, cmd, TORCH and ' (via `bench/compare_torch`)' or '', m.cpu, m.cores, m.features, THREADS,
    sh('cat /etc/debian_version'):gsub('%s+$', ''), jit and jit.version or '?',
    TORCH and ('; PyTorch ' .. m.torch) or ''))
  f:write(('OMP_WAIT_POLICY: %s\n\n'):format(os.getenv('OMP_WAIT_POLICY') or 'unset (libgomp default)'))
  f:write(results.table, '\n')
  f:close()
  print('wrote ' .. args.md)
end
results.rows = rows
local f = io.open(JSON, 'w')
if f then
  f:write(require('lunet.json').encode(results))
  f:close()
  print('wrote ' .. JSON)
end
