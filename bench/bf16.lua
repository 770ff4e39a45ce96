-- float32 matmul precision 'highest' against 'medium' (bfloat16 inputs,
-- float32 accumulation: lunet.set_float32_matmul_precision), on 1 and 2
-- threads: a ResNet-8 training step (batch 64, SGD momentum 0.9, as
-- bench/cpu.lua) and a large linear's (Linear(2048, 2048), batch 256, loss =
-- mean of squares). PyTorch 1.13 runs the same steps in the same invocation
-- (/usr/bin/python3 bench/bf16_torch.py, one process per figure) with
-- set_float32_matmul_precision 'highest' and 'medium' and under
-- torch.autocast('cpu', dtype=torch.bfloat16). Each figure is the median of 3
-- windows of about --window seconds; the whole comparison runs --reps times,
-- the configurations alternating, and the table gives the range over reps.
--   luajit bench/bf16.lua [--reps 3] [--window 0.6] [--no-torch] [--models resnet8,linear]
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

local lunet = require 'lunet'
local models = require 'models'
local nn, optim = lunet.nn, lunet.optim
local clock = lunet.clock

local REPS = tonumber(args.reps) or 3
local WINDOW = tonumber(args.window) or 0.6
local TORCH = not args['no-torch']
local PY = os.getenv('PYTHON') or '/usr/bin/python3'
local MODELS = {}
for m in (args.models or 'resnet8,linear'):gmatch('[^,]+') do MODELS[#MODELS + 1] = m end

local function make_step(name)
  lunet.manual_seed(0)
  local model, crit, xs, ys
  if name == 'resnet8' then
    model, crit = models.resnet8.build(nn), nn.CrossEntropyLoss()
    xs, ys = {}, {}
    for i = 1, 4 do xs[i], ys[i] = lunet.randn(64, 3, 32, 32), lunet.randint(1, 11, { 64 }) end
  else
    model = nn.Linear(2048, 2048)
    xs = {}
    for i = 1, 4 do xs[i] = lunet.randn(256, 2048) end
  end
  local opt = optim.SGD(model:parameters(), { lr = 0.001, momentum = 0.9 })
  local i = 0
  return function()
    opt:zero_grad()
    local out = model(xs[i + 1])
    local loss = crit and crit(out, ys[i + 1]) or out:square():mean()
    loss:backward()
    opt:step()
    i = (i + 1) % 4
  end
end

-- median seconds per step of 3 windows of about WINDOW seconds
local function time_lunet(name, threads, precision)
  lunet.set_num_threads(threads)
  lunet.set_float32_matmul_precision(precision)
  local step = make_step(name)
  for _ = 1, 3 do step() end
  lunet.synchronize()
  local t0, n = clock(), 0
  while n < 2 or clock() - t0 < WINDOW / 2 do step(); n = n + 1 end
  lunet.synchronize()
  n = math.max(2, math.floor(WINDOW / ((clock() - t0) / n) + 0.5))
  local ts = {}
  for w = 1, 3 do
    local t = clock()
    for _ = 1, n do step() end
    lunet.synchronize()
    ts[w] = (clock() - t) / n
  end
  lunet.set_float32_matmul_precision('highest')
  table.sort(ts)
  collectgarbage()
  return ts[2]
end

local function time_torch(name, threads, mode)
  local p = io.popen(('OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=%d %s bench/bf16_torch.py %s %d %s %g'):format(
    threads, PY, name, threads, mode, WINDOW))
  local s = p:read('*a')
  p:close()
  return assert(tonumber(s:match('([%d.]+)%s*$')), 'bf16_torch.py: ' .. s)
end

local CONFIGS = { { 'lunet', 'highest' }, { 'lunet', 'medium' } }
if TORCH then
  for _, m in ipairs { 'highest', 'medium', 'autocast' } do CONFIGS[#CONFIGS + 1] = { 'torch', m } end
end

local res = {}   -- res[model][threads][side .. ' ' .. mode] = { s, ... }
for rep = 1, REPS do
  for _, threads in ipairs { 1, 2 } do
    for _, name in ipairs(MODELS) do
      res[name] = res[name] or {}
      res[name][threads] = res[name][threads] or {}
      local r = res[name][threads]
      -- alternate the order between reps (load from other users drifts)
      for j = 1, #CONFIGS do
        local c = CONFIGS[rep % 2 == 1 and j or #CONFIGS + 1 - j]
        local key = c[1] .. ' ' .. c[2]
        local t = c[1] == 'lunet' and time_lunet(name, threads, c[2]) or time_torch(name, threads, c[2])
        r[key] = r[key] or {}
        table.insert(r[key], t)
        io.stderr:write(('rep %d  %-8s %d thr  %-16s %8.2f ms\n'):format(rep, name, threads, key, t * 1e3))
      end
    end
  end
end

local function range(list)
  local lo, hi = math.huge, 0
  for _, v in ipairs(list) do lo, hi = math.min(lo, v), math.max(hi, v) end
  return lo, hi
end
local function ms(list)
  local lo, hi = range(list)
  return ('%.1f-%.1f'):format(lo * 1e3, hi * 1e3)
end
-- ratio range a/b over the reps' pairs (same rep, adjacent runs)
local function ratio(a, b)
  local lo, hi = math.huge, 0
  for i = 1, #a do lo, hi = math.min(lo, a[i] / b[i]), math.max(hi, a[i] / b[i]) end
  return ('%.2f-%.2f'):format(lo, hi)
end

print(('\nms per training step, range over %d reps (%s)'):format(REPS, lunet.C and 'lunet ' .. lunet.version or ''))
print('| model | threads | lunet highest | lunet medium | medium/highest |' ..
  (TORCH and ' torch highest | torch medium | torch autocast bf16 | lunet medium / torch autocast | lunet highest / torch highest |' or ''))
print('|---|---|---|---|---|' .. (TORCH and '---|---|---|---|---|' or ''))
for _, name in ipairs(MODELS) do
  for _, threads in ipairs { 1, 2 } do
    local r = res[name][threads]
    local line = ('| %s | %d | %s | %s | %s |'):format(name, threads, ms(r['lunet highest']), ms(r['lunet medium']),
      ratio(r['lunet medium'], r['lunet highest']))
    if TORCH then
      line = line .. (' %s | %s | %s | %s | %s |'):format(ms(r['torch highest']), ms(r['torch medium']),
        ms(r['torch autocast']), ratio(r['lunet medium'], r['torch autocast']),
        ratio(r['lunet highest'], r['torch highest']))
    end
    print(line)
  end
end
