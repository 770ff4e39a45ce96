-- Where a lunet.models CNN's time goes (bench/zoo.lua's cases): forward self
-- time per module type (each module's forward timed, its children's time
-- taken out), backward time per autograd node (the interval up to each
-- node's anomaly hook: its formula plus the gradient accumulation before
-- it), and the optimizer step. Anomaly mode keeps gradients to the end of
-- the backward (no early frees), so compare shares, not absolute times.
-- The torch counterpart: /usr/bin/python3 bench/zoo_torch.py profile MODEL MODE THREADS
--   luajit bench/zoo_profile.lua MODEL [train|eval] [threads] [iters]
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local lunet = require 'lunet'
local models = require 'lunet.models'
local A = require 'lunet.autograd'
local nn, clock = lunet.nn, lunet.clock
local name, mode = arg[1] or 'mobilenet_v3_small', arg[2] or 'train'
local threads, iters = tonumber(arg[3] or 1), tonumber(arg[4] or 3)
lunet.set_num_threads(threads)
local batch, size = 32, 64
if mode == 'eval' then batch, size = 8, 224 end

lunet.manual_seed(0)
local o = { num_classes = 10 }
if name == 'googlenet' or name == 'inception_v3' then o.aux_logits = false end
local model = models[name](o)
local acc, cnt, on = {}, {}, false
local function add(k, dt) acc[k] = (acc[k] or 0) + dt; cnt[k] = (cnt[k] or 0) + 1 end
-- inclusive time per instance, minus its children's (a stack of child sums)
local stack = {}
for _, m in ipairs(model:modules()) do
  local fwd, label = m.forward, 'fwd ' .. m.__name
  -- (depthwise / grouped convolutions apart: another kernel)
  if (m.groups or 1) > 1 then label = label .. (m.groups == m.in_channels and ' depthwise' or ' grouped') end
  rawset(m, 'forward', function(...)
    if not on then return fwd(...) end
    stack[#stack + 1] = 0
    local t0 = clock()
    local r1, r2 = fwd(...)
    local dt = clock() - t0
    local inner = table.remove(stack)
    add(label, dt - inner)
    if #stack > 0 then stack[#stack] = stack[#stack] + dt end
    return r1, r2
  end)
end
local last
local function hook(kind, n)
  if not on or kind ~= 'backward' then return end
  local t = clock()
  local label = 'bwd ' .. tostring(n.name)
  -- (a weight of C/groups = 1 input channels: depthwise here; nothing has 1 channel)
  if n.name == 'conv2d' and n.b and n.b.p and n.b.p.shape[1] == 1 then label = label .. ' depthwise' end
  add(label, t - last)
  last = t
end
local x = lunet.randn({ batch, 3, size, size })
local step
if mode == 'eval' then
  model:eval()
  step = function() lunet.no_grad(function() return model(x) end) end
else
  local y = lunet.randint(1, 11, { batch })
  local crit = nn.CrossEntropyLoss()
  local opt = lunet.optim.SGD(model:parameters(), { lr = 0.001, momentum = 0.9 })
  step = function()
    opt:zero_grad()
    local t0 = clock()
    local loss = crit(model(x), y)
    if on then add('(forward total)', clock() - t0) end
    A.anomaly_hook = hook
    last = clock()
    t0 = last
    loss:backward()
    A.anomaly_hook = nil
    if on then add('(backward total)', clock() - t0) end
    t0 = clock()
    opt:step()
    if on then add('optimizer step', clock() - t0) end
  end
end
step(); step()
on = true
local t0 = clock()
for _ = 1, iters do step() end
local total = (clock() - t0) / iters
local keys = {}
for k in pairs(acc) do keys[#keys + 1] = k end
table.sort(keys, function(a, b) return acc[a] > acc[b] end)
print(('%s %s (batch %d of %dx%d), %d thread(s): %.1f ms per step (instrumented)'):format(name, mode, batch, size,
  size, threads, total * 1e3))
for _, k in ipairs(keys) do
  local ms = acc[k] / iters * 1e3
  if ms >= 0.005 * total * 1e3 then   -- (rows of 0.5% and more)
    print(('  %-40s %8.2f ms %5.1f%%  %4d calls/step'):format(k, ms, 100 * ms / (total * 1e3), cnt[k] / iters))
  end
end
