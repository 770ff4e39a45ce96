-- One rank of spec/dpipe_mpi_spec.lua (under mpirun): a Pipeline whose stages
-- are the processes of lunet.distributed's world (rank r runs stage r + 1;
-- with DPIPE_REPLICAS=k, k pipelines of W / k stages, hybrid) against plain
-- training of the same model in this process, on the same batches. Prints "rank R ok CASE" or "rank R FAIL CASE: why" per case, then
-- "rank R done".
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local nn, optim = lunet.nn, lunet.optim
local info = dist.init{ timeout = 60 }
local W, R = info.world_size, info.rank
local REPL = tonumber(os.getenv('DPIPE_REPLICAS') or '1')
local S = W / REPL
local world = dist.world()

local function say(fmt, ...) io.stdout:write(('rank %d ' .. fmt .. '\n'):format(R, ...)); io.stdout:flush() end

-- 7 atoms (the Sequential nested once: atoms are flattened)
local function model(bn)
  local head = nn.Sequential { nn.Conv2d(3, 4, 3, { padding = 1, bias = not bn }) }
  if bn then head:add(nn.BatchNorm2d(4)) end
  return nn.Sequential { head, nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 6), nn.Tanh(),
    nn.Linear(6, 5) }
end

local function opt(kind, params)
  if kind == 'adam' then return optim.Adam(params, { lr = 0.01 }) end
  return optim.SGD(params, { lr = 0.1, momentum = 0.9 })
end

local function batches(o)
  lunet.manual_seed(11)
  local d = {}
  for s = 1, o.steps or 3 do
    d[s] = { lunet.randn(o.B, 3, 8, 8), o.crit == 'mse' and lunet.randn(o.B, 5) or lunet.randint(1, 6, { o.B }) }
  end
  return d
end

-- this pipeline's rows of a batch (hybrid: each pipeline is given its own
-- rows; split as the one-process Pipeline with replicas splits a batch)
local function own_rows(t)
  if REPL == 1 then return t end
  local B, r = t:size(1), math.floor(R / S)
  local first = r * math.floor(B / REPL) + math.min(r, B % REPL)
  return t:narrow(1, first + 1, math.floor(B / REPL) + (r < B % REPL and 1 or 0))
end

local function worst(a, b)
  a, b = a:to('cpu:0'), b:to('cpu:0')
  local d = (a - b):abs():max():item()
  return d / math.max(b:abs():max():item(), 1e-12)
end

local function run(o)
  local data = batches(o)
  -- the reference: the whole model in this process (with BatchNorm, whose
  -- statistics are the micro-batches': a one-process Pipeline over W virtual devices)
  lunet.manual_seed(5)
  local ref = model(o.bn)
  if o.bn then
    local devs = {}
    for k = 1, W do devs[k] = 'cpu:' .. (k - 1) end
    ref = lunet.parallel.Pipeline(ref, { devices = devs, chunks = o.chunks, schedule = o.schedule, balance = 'params',
      checkpoint = o.checkpoint, deferred_bn = o.deferred_bn, replicas = REPL })
  end
  local ropt = opt(o.optim, ref:parameters())
  local crit = o.crit == 'mse' and nn.MSELoss() or nn.CrossEntropyLoss({ reduction = o.crit == 'sum' and 'sum' or 'mean' })
  local ref_losses = {}
  for s, b in ipairs(data) do
    ropt:zero_grad()
    local l = o.bn and ref:forward_loss(crit, b[1], b[2]) or crit(ref(b[1]), b[2])
    l:backward(); ropt:step()
    ref_losses[s] = l:item()
  end
  -- the pipeline: the same model built on every rank
  lunet.manual_seed(5)
  local m = model(o.bn)
  if R >= S then   -- (the other pipelines' copies start elsewhere: made equal to the first's at construction)
    lunet.no_grad(function() for _, p in ipairs(m:parameters()) do p:add_(0.05 * R) end end)
  end
  local pipe = lunet.parallel.Pipeline(m, { group = world, chunks = o.chunks, schedule = o.schedule,
    balance = o.balance, checkpoint = o.checkpoint, deferred_bn = o.deferred_bn, replicas = REPL,
    sample = o.balance and R == 0 and data[1][1] or nil })   -- (a measured balance: rank 0 measures)
  -- (a measured balance may leave a stage without parameters)
  local popt = #pipe:parameters() > 0 and opt(o.optim, pipe:parameters()) or { zero_grad = function() end, step = function() end }
  for s, b in ipairs(data) do
    popt:zero_grad()
    -- (x is read on the first rank, y on the last; the others may pass nil)
    local x = R % S == 0 and own_rows(b[1]) or nil
    local y = R % S == S - 1 and own_rows(b[2]) or nil
    local loss = pipe:forward_loss(crit, x, y)
    loss:backward(); popt:step()
    local v = loss:item()
    if math.abs(v - ref_losses[s]) > 1e-5 * math.abs(ref_losses[s]) then
      return ('step %d: loss %.9g, one process %.9g'):format(s, v, ref_losses[s])
    end
  end
  local mine, want = pipe:state_dict(), ref:state_dict()
  if o.bn then   -- (the running statistics too: deferred, they are the whole batch's, of this pipeline's rows)
    for k, t in pairs(ref.models[math.floor(R / S) + 1]:state_dict()) do want[k] = t end
  end
  local n = 0
  for k, t in pairs(mine) do
    n = n + 1
    local w = worst(t, want[k])
    if w > 1e-5 then return ('%s differs from one process by %g'):format(k, w) end
  end
  if n == 0 and not o.balance then return 'this stage has no parameters' end
  local full = pipe:full_state_dict()
  if R % S == 0 then   -- (each pipeline's first rank)
    for k, t in pairs(want) do
      if not full[k] then return 'full_state_dict lacks ' .. k end
      local w = worst(full[k], t)
      if w > 1e-5 then return ('full_state_dict: %s differs from one process by %g'):format(k, w) end
    end
  elseif full ~= nil then return 'full_state_dict returned a table on rank ' .. R end
  -- evaluation: every forward runs in forward_loss (1F1B's too), the outputs on the last rank
  if not o.bn then
    local x, y = data[1][1], data[1][2]
    local want_out = lunet.no_grad(function() return ref(x) end)
    local want_loss = crit(want_out, y):item()
    local l = lunet.no_grad(function()
      return pipe:forward_loss(crit, R % S == 0 and own_rows(x) or nil, R % S == S - 1 and own_rows(y) or nil)
    end)
    if math.abs(l:item() - want_loss) > 1e-5 * math.abs(want_loss) then
      return ('no_grad: loss %.9g, one process %.9g'):format(l:item(), want_loss)
    end
    local okout, out = pcall(l.output, l)
    if R % S == S - 1 then
      local first = math.floor(R / S) * math.floor(x:size(1) / REPL) + math.min(math.floor(R / S), x:size(1) % REPL)
      local w = worst(out, want_out:narrow(1, first + 1, out:size(1)))
      if w > 1e-5 then return ('no_grad: the outputs differ from one process by %g'):format(w) end
    elseif okout or not tostring(out):find('loss:output: the outputs are on the last stage\'s rank only', 1, true) then
      return 'loss:output() on a rank other than the last stage\'s: ' .. tostring(out)
    end
  end
  -- load_state_dict takes this stage's keys of a whole model's state
  pipe:load_state_dict(want)
end

local cases = {}
for _, sched in ipairs({ 'gpipe', '1f1b' }) do
  for _, chunks in ipairs({ 1, 3, 8 }) do
    for _, o in ipairs({ 'sgd', 'adam' }) do
      cases[#cases + 1] = { ('%s chunks %d %s'):format(sched, chunks, o), { B = 11, schedule = sched, chunks = chunks, optim = o } }
    end
  end
end
cases[#cases + 1] = { 'a schedule function, chunks 3 sgd', { B = 11, chunks = 3, optim = 'sgd',
  schedule = function(stages, chunks) return lunet.parallel.schedule.build('1f1b', stages, chunks) end } }
cases[#cases + 1] = { '1f1b chunks 3 adam, MSELoss', { B = 11, schedule = '1f1b', chunks = 3, optim = 'adam', crit = 'mse' } }
cases[#cases + 1] = { 'gpipe chunks 8 sgd, CrossEntropyLoss sum', { B = 11, schedule = 'gpipe', chunks = 8, optim = 'sgd',
  crit = 'sum' } }
cases[#cases + 1] = { 'gpipe chunks 3 adam, balance time', { B = 11, schedule = 'gpipe', chunks = 3, optim = 'adam',
  balance = 'time' } }
cases[#cases + 1] = { '1f1b chunks 8 sgd, balance memory', { B = 11, schedule = '1f1b', chunks = 8, optim = 'sgd',
  balance = 'memory' } }
cases[#cases + 1] = { 'zb chunks 3 sgd', { B = 11, schedule = 'zb', chunks = 3, optim = 'sgd' } }
cases[#cases + 1] = { 'zb chunks 8 adam', { B = 11, schedule = 'zb', chunks = 8, optim = 'adam' } }
cases[#cases + 1] = { 'zb chunks 4 adam, checkpoint except_last', { B = 11, schedule = 'zb', chunks = 4, optim = 'adam',
  checkpoint = 'except_last' } }
cases[#cases + 1] = { '1f1b checkpoint always, deferred BatchNorm', { B = 11, schedule = '1f1b', chunks = 3, optim = 'sgd',
  checkpoint = 'always', bn = true, deferred_bn = true, steps = 2 } }

local only = os.getenv('DPIPE_CASE')
for _, c in ipairs(cases) do
  if not only or only == c[1] then
    local ok, err = pcall(run, c[2])
    if ok and err == nil then say('ok %s', c[1]) else say('FAIL %s: %s', c[1], tostring(err)) end
  end
end
-- a batch's gradients on this rank in a fresh pipeline, run(pipe, crit, d)
-- doing the work, alike (disturb false) or with something between (true):
-- an error unless they are the same; then(pipe, crit, d), if given, runs
-- after the gradients are taken
local function undisturbed(run, after)
  local d = batches({ B = 11 })
  local crit = nn.CrossEntropyLoss()
  local function grads(disturb)
    lunet.manual_seed(5)   -- (the same initial weights in both runs)
    local pipe = lunet.parallel.Pipeline(model(), { group = world, replicas = REPL, chunks = 3, schedule = '1f1b' })
    run(pipe, crit, d, disturb)
    local g = {}
    for i, p in ipairs(pipe:parameters()) do g[i] = p.grad:clone() end
    if after then after(pipe, crit, d) end
    return g
  end
  local want, got = grads(false), grads(true)
  for i = 1, #want do
    if (want[i] - got[i]):abs():max():item() > 1e-6 then error('gradient ' .. i .. ' differs') end
  end
end
-- a forward_loss before the last batch's backward: an error on every rank
-- (that batch's transfers are still to come); the batch then finishes as if
-- nothing came between (its gradients those of an undisturbed run)
if not only then
  local ok, err = pcall(undisturbed, function(pipe, crit, d, interrupt)
    local loss = pipe:forward_loss(crit, d[1][1], d[1][2])
    if interrupt then
      local ok2, e = pcall(pipe.forward_loss, pipe, crit, d[2][1], d[2][2])
      if ok2 or not tostring(e):find("forward_loss: the last batch's loss:backward() has not run", 1, true) then
        error('the second forward_loss: ' .. tostring(e))
      end
    end
    loss:backward()
  end, function(pipe, crit, d) pipe:forward_loss(crit, d[2][1], d[2][2]):backward() end)   -- (and it trains on)
  if ok then say('ok a forward_loss before the last backward fails on every rank, and that batch finishes')
  else say('FAIL a forward_loss before the last backward: %s', tostring(err)) end
end
-- abandon() on every rank drops a batch whose backward has not run (its
-- transfers taken, the gradients put back); the next batch trains as if it
-- had not come
if not only then
  local ok, err = pcall(undisturbed, function(pipe, crit, d, drop)
    if drop then
      pipe:forward_loss(crit, d[1][1], d[1][2])   -- (its loss lost)
      if not pipe:abandon() then error('abandon: no batch pending') end
      if pipe:abandon() then error('abandon: a batch pending after abandon') end
    end
    pipe:forward_loss(crit, d[2][1], d[2][2]):backward()
  end)
  if ok then say('ok abandon drops a pending batch on every rank, and the next trains as if it had not come')
  else say('FAIL abandon: %s', tostring(err)) end
end
-- ranks built with different options all fail at construction, naming the difference
if not only then
  local ok, err = pcall(lunet.parallel.Pipeline, model(), { group = world, replicas = REPL, chunks = R == W - 1 and 5 or 4 })
  local want = R == W - 1 and ('group rank %d has 7 atoms, 5 chunks'):format(W) or ('group rank %d has 7, 5,'):format(W)
  if not ok and tostring(err):find('Pipeline: the ranks disagree: ', 1, true) and tostring(err):find(want, 1, true) then
    say('ok ranks that disagree fail together')
  else say('FAIL ranks that disagree: %s', tostring(err)) end
end
say('done')
