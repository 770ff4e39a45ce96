-- What freeing activations eagerly (lunet.nn.eager) changes in training:
-- bench/models.lua's CNNs and lunet.models' (at 64x64), SGD with momentum, each run in its own process
-- with LUNET_EAGER_FREE=0 and =1 in turn (--reps times), printing the
-- median step time, the full collections a step, their share of the time
-- and the peak of the device's allocated bytes.
--   luajit bench/eager_free.lua [--reps 3] [--threads 2] [--cases lenet5:64,resnet8:16,resnet8:64,lenet5:1]
--     (e.g. --cases resnet18:16,mobilenet_v3_small:16,efficientnet_b0:8; inception_v3 needs 75x75: not here)
--   luajit bench/eager_free.lua --one MODEL BATCH STEPS   (internal: one process's figures)
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path

local args = {}
for i = 1, #arg do args[i] = arg[i] end

if args[1] == '--one' then
  local lunet = require 'lunet'
  local nn, optim = lunet.nn, lunet.optim
  local name, B, N = args[2], tonumber(args[3]), tonumber(args[4])
  -- bench/models.lua's, or lunet.models' (10 classes, 3x64x64 images)
  local spec = dofile('bench/models.lua')[name]
  local model, shape
  if spec then model, shape = spec.build(nn), spec.input
  else model, shape = require('lunet.models')[name]({ num_classes = 10 }), { 3, 64, 64 } end
  local x, y = lunet.randn({ B, shape[1], shape[2], shape[3] }), lunet.randint(1, 11, { B })
  local opt = optim.SGD(model:parameters(), { lr = 1e-3, momentum = 0.9 })
  local crit = nn.CrossEntropyLoss()
  -- (a model with aux heads, googlenet's, gives a table in training: the
  -- logits' loss plus 0.3 of each aux head's, as torchvision's reference training)
  local function loss(out)
    if lunet.is_tensor(out) then return crit(out, y) end
    local l = crit(out.logits, y)
    for _, k in ipairs({ 'aux_logits', 'aux_logits1', 'aux_logits2' }) do
      if out[k] then l = l + crit(out[k], y) * 0.3 end
    end
    return l
  end
  local function step() opt:zero_grad(); loss(model(x)):backward(); opt:step() end
  for _ = 1, math.max(5, math.floor(N / 5)) do step() end
  lunet.synchronize()
  lunet.reset_peak_memory_stats('cpu:0')
  local c0 = lunet.collection_stats()
  local n0, s0 = c0.count, c0.seconds
  local t0 = lunet.clock()
  for _ = 1, N do step() end
  lunet.synchronize()
  local total = lunet.clock() - t0
  local c = lunet.collection_stats()
  print(('%.6f %.4f %.4f %.3f'):format(total / N * 1e3, (c.count - n0) / N, (c.seconds - s0) / total,
    lunet.max_memory_allocated('cpu:0') / 2 ^ 20))
  os.exit(0)
end

local opts = { reps = '3', threads = '2', cases = 'lenet5:64,resnet8:16,resnet8:64,lenet5:1' }
for i = 1, #args, 2 do
  local k = args[i]:match('^%-%-(.+)')
  if not k or opts[k] == nil or args[i + 1] == nil then
    error('usage: luajit bench/eager_free.lua [--reps 3] [--threads 2] [--cases lenet5:64,resnet8:16]')
  end
  opts[k] = args[i + 1]
end
local reps, threads = tonumber(opts.reps), tonumber(opts.threads)

-- steps per process: about a second of training on the slower setting
local STEPS = { lenet5 = { [1] = 2000, [64] = 400 }, resnet8 = { [1] = 200, [16] = 150, [64] = 60 },
  resnet18 = { [16] = 20 }, resnet50 = { [8] = 8 }, mobilenet_v3_small = { [16] = 40 }, efficientnet_b0 = { [8] = 10 },
  densenet121 = { [8] = 10 }, googlenet = { [8] = 12 }, convnext_tiny = { [4] = 8 }, regnet_y_400mf = { [8] = 20 },
  shufflenet_v2_x1_0 = { [16] = 15 }, vgg11 = { [4] = 5 }, alexnet = { [16] = 20 }, squeezenet1_1 = { [16] = 20 },
  mnasnet1_0 = { [16] = 15 } }

local function run(on, name, batch)
  local steps = (STEPS[name] or {})[batch] or 100
  local cmd = ('LUNET_EAGER_FREE=%d OMP_NUM_THREADS=%d luajit bench/eager_free.lua --one %s %d %d'):format(on, threads,
    name, batch, steps)
  local f = assert(io.popen(cmd))
  local out = f:read('*a')
  f:close()
  local ms, coll, share, peak = out:match('^(%S+) (%S+) (%S+) (%S+)')
  if not ms then error('bench/eager_free.lua: ' .. cmd .. ' printed: ' .. out) end
  return { tonumber(ms), tonumber(coll), tonumber(share), tonumber(peak) }
end

local function median(xs, k)
  local v = {}
  for i, x in ipairs(xs) do v[i] = x[k] end
  table.sort(v)
  return v[math.floor((#v + 1) / 2)]
end

local load = (io.open('/proc/loadavg'):read('*l') or ''):match('^(%S+ %S+ %S+)')
print(('eager freeing off / on, %d threads, medians of %d processes each (load average %s)'):format(threads, reps, load))
print('| model | batch | step ms off | on | speed-up | collections a step off | on | their share off | on | peak MB off | on |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
for case in opts.cases:gmatch('[^,]+') do
  local name, batch = case:match('^([%w_]+):(%d+)$')
  if not name then error('bench/eager_free.lua: --cases: MODEL:BATCH, got ' .. case) end
  batch = tonumber(batch)
  local off, on = {}, {}
  for r = 1, reps do off[r] = run(0, name, batch); on[r] = run(1, name, batch) end
  local a, b = median(off, 1), median(on, 1)
  print(('| %s | %d | %.3f | %.3f | %.2fx | %.3f | %.3f | %.0f%% | %.0f%% | %.1f | %.1f |'):format(name, batch, a, b,
    a / b, median(off, 2), median(on, 2), median(off, 3) * 100, median(on, 3) * 100, median(off, 4), median(on, 4)))
end
