-- bench/gpu.lua -- lunet on a GPU, first version (issue 18): what the CUDA
-- backend has kernels for today. Its twin bench/gpu_torch.py measures the same
-- in PyTorch; tools/gpu-check.sh runs both and keeps the JSONs.
--   launch       us per tiny in-place add (launch + queue, no sync per op)
--   add_gbs      c = a + b over 2^26 float32: GB/s moved (3 x 256 MB)
--   sgemm_tflops 4096^3 float32 matmul (exact FP32, not TF32)
--   h2d_gbs, d2h_gbs   256 MB float32 from / to pageable host memory
--   mlp_b{64,256,1024}  img/s of a training step of a 784-1024-1024-10 tanh MLP
--                (MSE loss, SGD momentum 0.9, autograd), and its peak memory
--   seed32_b*, lenet5_b*  img/s of their training step (bench/models.lua), as bench/cpu.lua
-- (no ResNet-8: no batch norm kernel on cuda yet). Usage: luajit bench/gpu.lua [--json FILE] [--device D] [--quick]
local lunet = require 'lunet'
local optim = require 'lunet.optim'
local clock = lunet.clock

local args = {}
do
  local i = 1
  while arg[i] do
    local a = arg[i]
    if a == '--json' or a == '--device' then args[a:sub(3)] = arg[i + 1]; i = i + 2
    elseif a == '--quick' then args.quick = true; i = i + 1
    else io.stderr:write('bench/gpu.lua: unknown argument ' .. a .. '\n'); os.exit(1) end
  end
end
local dev = args.device or 'cuda:0'
local results = {device = dev}

local function write_json()
  if not args.json then return end
  local f = assert(io.open(args.json, 'w'))
  f:write(require('lunet.json').encode(results), '\n')
  f:close()
end

if dev:match('^cuda') and not lunet.cuda.is_available() then
  results.gpu = false
  results.reason = lunet.cuda.reason()
  print('bench/gpu.lua: no GPU: ' .. results.reason)
  write_json()
  os.exit(2)
end
local function sync() lunet.synchronize(dev) end
local quick = args.quick

-- the best of `rounds` timings of f (seconds), after one warm-up call
local function best(rounds, f)
  f(); sync()
  local b = math.huge
  for _ = 1, rounds do
    local t0 = clock()
    f(); sync()
    b = math.min(b, clock() - t0)
  end
  return b
end

-- 1. launch overhead
do
  local x = lunet.zeros({1}, {device = dev})
  local n = quick and 200 or 2000
  local t = best(5, function() for _ = 1, n do x:add_(1) end end)
  results.launch_us = t / n * 1e6
end

-- 2. streaming bandwidth
do
  local n = quick and 2 ^ 20 or 2 ^ 26
  local a, b = lunet.ones({n}, {device = dev}), lunet.ones({n}, {device = dev})
  local c
  local t = best(5, function() c = a + b end)
  results.add_gbs = 3 * 4 * n / t / 1e9
  a, b, c = nil, nil, nil
end

-- 3. sgemm
do
  local n = quick and 512 or 4096
  local a, b = lunet.randn({n, n}):to(dev), lunet.randn({n, n}):to(dev)
  local t = best(quick and 2 or 5, function() return a:matmul(b) end)
  results.sgemm_tflops = 2 * n ^ 3 / t / 1e12
end

-- 4. host <-> device
do
  local n = quick and 2 ^ 20 or 2 ^ 26
  local h = lunet.ones({n})
  local d
  local t = best(3, function() d = h:to(dev) end)
  results.h2d_gbs = 4 * n / t / 1e9
  t = best(3, function() return d:to('cpu:0') end)
  results.d2h_gbs = 4 * n / t / 1e9
end

-- 5. an MLP's training step
local function mlp_ips(batch)
  lunet.manual_seed(1)
  local function param(r, c) return (lunet.randn({r, c}) * (1 / math.sqrt(r))):to(dev):requires_grad_() end
  local w1, b1 = param(784, 1024), lunet.zeros({1024}, {device = dev}):requires_grad_()
  local w2, b2 = param(1024, 1024), lunet.zeros({1024}, {device = dev}):requires_grad_()
  local w3, b3 = param(1024, 10), lunet.zeros({10}, {device = dev}):requires_grad_()
  local opt = optim.SGD({w1, b1, w2, b2, w3, b3}, {lr = 0.01, momentum = 0.9})
  local x, y = lunet.randn({batch, 784}):to(dev), lunet.randn({batch, 10}):to(dev)
  local function step()
    opt:zero_grad()
    local h = (x:matmul(w1) + b1):tanh()
    h = (h:matmul(w2) + b2):tanh()
    local loss = ((h:matmul(w3) + b3 - y) ^ 2):mean()
    loss:backward()
    opt:step()
  end
  local steps = quick and 3 or 20
  local t = best(3, function() for _ = 1, steps do step() end end)
  return batch * steps / t
end
for _, b in ipairs(quick and {64} or {64, 256, 1024}) do
  collectgarbage(); collectgarbage(); sync()
  if lunet.reset_peak_memory_stats then lunet.reset_peak_memory_stats(dev) end
  results['mlp_b' .. b .. '_ips'] = mlp_ips(b)
  results['mlp_b' .. b .. '_peak_mb'] = lunet.max_memory_allocated(dev) / 2 ^ 20
end

-- 6. the benchmark CNNs' training step (bench/models.lua; SGD momentum,
-- cross-entropy, random data on the device)
local models = dofile((debug.getinfo(1, 'S').source:match('^@(.*)gpu%.lua$') or 'bench/') .. 'models.lua')
local function cnn_ips(name, batch)
  lunet.manual_seed(1)
  local nn = lunet.nn
  local model = models[name].build(nn)
  model:to(dev)
  local x = lunet.randn({batch, unpack(models[name].input)}):to(dev)
  local y = lunet.randint(1, 11, {batch}):to(dev)
  local opt = optim.SGD(model:parameters(), {lr = 0.001, momentum = 0.9})
  local function step()
    opt:zero_grad()
    local loss = nn.functional.cross_entropy(model:forward(x), y)
    loss:backward()
    opt:step()
  end
  local steps = quick and 2 or 10
  local t = best(3, function() for _ = 1, steps do step() end end)
  return batch * steps / t
end
for _, name in ipairs({'seed32', 'lenet5'}) do
  for _, b in ipairs(quick and {64} or {1, 64, 256, 1024}) do
    collectgarbage(); collectgarbage(); sync()
    local ok, v = pcall(cnn_ips, name, b)
    results[('%s_b%d_ips'):format(name, b)] = ok and v or tostring(v)
  end
end

local keys = {}
for k in pairs(results) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do
  local v = results[k]
  print(('%-22s %s'):format(k, type(v) == 'number' and ('%.4g'):format(v) or tostring(v)))
end
write_json()
