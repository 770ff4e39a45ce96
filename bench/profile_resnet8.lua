-- luajit bench/profile_resnet8.lua [infer|train] [batch] [iters]: per-op time
-- breakdown of ResNet-8 in lunet (each op synchronised and timed; the totals
-- include that sync, so compare shares, not absolute step times). The
-- PyTorch counterpart: bench/profile_resnet8_torch.py. Pin both to one core
-- (taskset -c 1) on a busy machine.
package.path = 'bench/?.lua;lua/?.lua;lua/?/init.lua;' .. package.path
-- the C kernels of the backward pass are timed through a proxy of core.C
-- (installed before lunet's modules capture it)
local ffi = require 'ffi'
local core = require 'lunet.core'
local realC, cacc, ccnt = core.C, {}, {}
local timed = { ln_conv2d_backward = true, ln_batchnorm_backward = true, ln_relu_backward = true,
  ln_conv2d_forward = true, ln_batchnorm_forward = true }
local tbuf = ffi.new('struct { int64_t s, ns; }')
ffi.cdef 'int clock_gettime(int, void *);'
local function now() ffi.C.clock_gettime(1, tbuf); return tonumber(tbuf.s) + tonumber(tbuf.ns) * 1e-9 end
core.C = setmetatable({}, { __index = function(_, k)
  local f = realC[k]
  if not timed[k] then return f end
  return function(...)
    realC.ln_sync_all()
    local t0 = now()
    local r = f(...)
    realC.ln_sync_all()
    cacc[k] = (cacc[k] or 0) + now() - t0
    ccnt[k] = (ccnt[k] or 0) + 1
    return r
  end
end })
local lunet = require 'lunet'
local models = require 'models'
local nn, F, clock = lunet.nn, lunet.nn.functional, lunet.clock
local mode, batch, iters = arg[1] or 'infer', tonumber(arg[2] or 256), tonumber(arg[3] or 10)
local acc, cnt = {}, {}
local function wrap(tbl, name, label)
  local orig = tbl[name]
  tbl[name] = function(...)
    lunet.synchronize()
    local t0 = clock()
    local r1, r2, r3 = orig(...)
    lunet.synchronize()
    acc[label] = (acc[label] or 0) + clock() - t0
    cnt[label] = (cnt[label] or 0) + 1
    return r1, r2, r3
  end
end
for _, n in ipairs { 'conv2d', 'conv2d_fused', 'batch_norm', 'linear', 'adaptive_avg_pool2d', 'cross_entropy' } do
  if F[n] then wrap(F, n, n) end
end
local Tensor = require('lunet.tensor').Tensor
wrap(Tensor, 'relu', 'relu')
wrap(Tensor, 'add', 'add')
lunet.manual_seed(0)
local model = models.resnet8.build(nn)
local x = lunet.randn({ batch, 3, 32, 32 })
local y = lunet.randint(1, 11, { batch })
local step
if mode == 'infer' then
  model:eval()
  step = function() lunet.no_grad(function() return model(x) end) end
else
  local opt = lunet.optim.SGD(model:parameters(), { lr = 0.001, momentum = 0.9 })
  local crit = nn.CrossEntropyLoss()
  step = function()
    opt:zero_grad()
    local loss = crit(model(x), y)
    local t0 = clock()
    loss:backward()
    lunet.synchronize()
    acc.backward = (acc.backward or 0) + clock() - t0
    t0 = clock()
    opt:step()
    lunet.synchronize()
    acc.step = (acc.step or 0) + clock() - t0
  end
end
for _ = 1, 3 do step() end
acc, cnt = {}, {}
for k in pairs(cacc) do cacc[k] = 0; ccnt[k] = 0 end
local t0 = clock()
for _ = 1, iters do step() end
lunet.synchronize()
local total = (clock() - t0) / iters
local keys = {}
for k in pairs(acc) do keys[#keys + 1] = k end
table.sort(keys, function(a, b) return acc[a] > acc[b] end)
print(('%s batch %d: %.2f ms per step (synchronised per op)'):format(mode, batch, total * 1e3))
local sum = 0
for _, k in ipairs(keys) do
  local ms = acc[k] / iters * 1e3
  sum = sum + ms
  print(('  %-22s %8.2f ms %5.1f%%  (%d calls/step)'):format(k, ms, 100 * ms / (total * 1e3), (cnt[k] or iters) / iters))
end
print(('  %-22s %8.2f ms'):format('other (Lua, autograd)', total * 1e3 - sum))
print('  C kernels (inside the above):')
for k, v in pairs(cacc) do
  print(('    %-22s %8.2f ms  (%d calls/step)'):format(k, v / iters * 1e3, ccnt[k] / iters))
end
