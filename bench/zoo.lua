-- lunet.models' CNNs beside torchvision 0.14 on torch 1.13 (bench/zoo_torch.py
-- through /usr/bin/python3, a server fed on stdin as bench/compare_torch's):
-- per model, a training step (forward, cross-entropy, backward, SGD momentum
-- 0.9 step) at batch 32 of 3x64x64 and an eval forward under no_grad at batch
-- 8 of 3x224x224, num_classes 10, at each thread count. Each figure: best of
-- RUNS steps after WARMUP; lunet and torch alternate ROUNDS times per figure
-- (the machine is shared: the range over rounds is printed). ratio = torch
-- time / lunet time: > 1 means lunet is faster.
--   luajit bench/zoo.lua [--models a,b] [--threads 1,2] [--runs 3] [--warmup 2]
--                        [--rounds 2] [--modes train,eval] [--quick] [--md FILE]
-- torch runs with OPENBLAS_NUM_THREADS=1 and torch.set_num_threads(threads),
-- as bench/compare_torch. googlenet is built without its aux heads on both sides.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local lunet = require 'lunet'
local models = require 'lunet.models'
local nn, optim, clock = lunet.nn, lunet.optim, lunet.clock

local args = {}
do
  local i = 1
  while i <= #arg do
    local k, v = arg[i]:gsub('^%-%-', ''), arg[i + 1]
    if v == nil or v:match('^%-%-') then args[k] = true; i = i + 1 else args[k] = v; i = i + 2 end
  end
end
local function list(s, default)
  local t = {}
  for w in tostring(s or default):gmatch('[^,]+') do t[#t + 1] = w end
  return t
end
local QUICK = args.quick
local MODELS = list(args.models, 'mobilenet_v3_small,efficientnet_b0,shufflenet_v2_x1_0,mnasnet0_5,regnet_y_400mf,' ..
  'convnext_tiny,googlenet,resnet18')
local THREADS = list(args.threads, '1,2')
local MODES = list(args.modes, 'train,eval')
local RUNS = tonumber(args.runs) or (QUICK and 1 or 3)
local WARMUP = tonumber(args.warmup) or (QUICK and 1 or 2)
local ROUNDS = tonumber(args.rounds) or (QUICK and 1 or 2)
local PY = os.getenv('PYTHON') or '/usr/bin/python3'
local LUAJIT = os.getenv('LUAJIT') or 'luajit'
local CASE = { train = { batch = 32, size = 64 }, eval = { batch = 8, size = 224 } }
local EXTRA = { googlenet = { aux_logits = false }, inception_v3 = { aux_logits = false } }

local function make_step(name, mode, batch, size)
  lunet.manual_seed(0)
  local o = { num_classes = 10 }
  for k, v in pairs(EXTRA[name] or {}) do o[k] = v end
  local model = assert(models[name], 'zoo: unknown model ' .. name)(o)
  local x = lunet.randn({ batch, 3, size, size })
  if mode == 'eval' then
    model:eval()
    local function fwd() return model(x) end
    return function() lunet.no_grad(fwd) end
  end
  model:train()
  local y = lunet.randint(1, 11, { batch })
  local crit = nn.CrossEntropyLoss()
  local opt = optim.SGD(model:parameters(), { lr = 0.001, momentum = 0.9 })
  return function()
    opt:zero_grad()
    crit(model(x), y):backward()
    opt:step()
  end
end

local function best(step)
  for _ = 1, WARMUP do step() end
  lunet.synchronize()
  local b = math.huge
  for _ = 1, RUNS do
    local t0 = clock()
    step()
    lunet.synchronize()
    b = math.min(b, clock() - t0)
  end
  return b
end

-- internal: one lunet figure in a process of its own (--child MODEL MODE
-- THREADS): a process keeps the memory of its largest model (3 GB after
-- convnext_tiny's eval), and the whole zoo in one ran out of memory
if args.child then
  lunet.set_num_threads(tonumber(arg[#arg]))
  local mode = arg[#arg - 1]
  print(('%.9f'):format(best(make_step(args.child, mode, CASE[mode].batch, CASE[mode].size))))
  return
end

local function sh(cmd)
  local p = io.popen(cmd)
  local s = p:read('*a')
  p:close()
  return (s:gsub('%s+$', ''))
end
local function loadavg() return sh('cat /proc/loadavg'):match('^(%S+)') or '?' end

-- the torch server: commands on its stdin, replies through a FIFO
local maxt = 1
for _, t in ipairs(THREADS) do maxt = math.max(maxt, tonumber(t)) end
local fifo = os.tmpname()
os.remove(fifo)
assert(os.execute('mkfifo ' .. fifo) == 0, 'zoo: mkfifo failed')
local tcmd = io.popen(('OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=%d %s bench/zoo_torch.py serve %s'):format(maxt, PY, fifo), 'w')
local treply = assert(io.open(fifo, 'r'))
os.remove(fifo)
local function torch_best(name, mode, batch, size, nt)
  tcmd:write(('bench %s %s %d %d %d %d %d\n'):format(name, mode, batch, size, nt, WARMUP, RUNS))
  tcmd:flush()
  local r = treply:read('*l') or 'error no reply'
  local s = r:match('^ok (%S+)')
  if not s then io.stderr:write(('zoo: torch %s %s: %s\n'):format(name, mode, r)) end
  return tonumber(s)
end

local function range(t, fmt)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(t) do lo, hi = math.min(lo, v), math.max(hi, v) end
  if #t == 0 then return '?' end
  if #t == 1 or fmt:format(lo) == fmt:format(hi) then return fmt:format(lo) end
  return fmt:format(lo) .. '-' .. fmt:format(hi)
end

local commit = sh('git rev-parse --short HEAD 2>/dev/null')
local header = {
  ('lunet.models vs torchvision 0.14 / torch %s, %s UTC, commit %s'):format(
    sh(PY .. " -c 'import torch; print(torch.__version__)' 2>/dev/null"), os.date('!%Y-%m-%d %H:%M'), commit),
  ('%s, %d cores; best of %d after %d warm-up, %d round(s) interleaved; load average %s before'):format(
    sh("grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'"), lunet.C.ln_num_cores(), RUNS, WARMUP, ROUNDS, loadavg()),
  'train: batch 32 of 3x64x64 (fwd + CE + bwd + SGD momentum); eval: batch 8 of 3x224x224 under no_grad',
  '',
  '| model | mode | threads | lunet ms | torch ms | ratio (torch/lunet) |',
  '|---|---|---|---|---|---|',
}
for _, l in ipairs(header) do print(l) end
local rows = {}
for _, nt in ipairs(THREADS) do
  nt = tonumber(nt)

  for _, name in ipairs(MODELS) do
    for _, mode in ipairs(MODES) do
      local c = CASE[mode]
      local tl, tt, tr = {}, {}, {}
      for r = 1, ROUNDS do
        tl[r] = 1e3 * assert(tonumber(sh(('%s bench/zoo.lua --runs %d --warmup %d --child %s %s %d'):format(
          LUAJIT, RUNS, WARMUP, name, mode, nt))), 'zoo: lunet ' .. name .. ' ' .. mode .. ' failed')
        local t = torch_best(name, mode, c.batch, c.size, nt)
        tt[#tt + 1] = t and t * 1e3
        if t then tr[#tr + 1] = t * 1e3 / tl[r] end
      end
      local row = ('| %s | %s | %d | %s | %s | %s |'):format(name, mode, nt, range(tl, '%.0f'), range(tt, '%.0f'),
        range(tr, '%.2f'))
      rows[#rows + 1] = row
      print(row)
      io.stdout:flush()
    end
  end
end
tcmd:write('quit\n'); tcmd:close(); treply:close()
local tail = ('load average after: %s'):format(loadavg())
print(tail)
if args.md then
  local f = assert(io.open(args.md, 'w'))
  f:write(table.concat(header, '\n'), '\n', table.concat(rows, '\n'), '\n', tail, '\n')
  f:close()
end
