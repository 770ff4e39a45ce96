-- OpenMP's wait policy, idle and beside other work: training images/s of a
-- small model (bench/models.lua, SGD with momentum, a fixed batch) in child
-- processes, each setting in turn within every round (A/B alternating in the
-- same minutes), first with nothing of ours beside it, then beside a
-- `yes > /dev/null` that keeps one core busy. lunet's default (no OMP_* or
-- GOMP_* variable set) is OMP_WAIT_POLICY=passive (lunet/core.lua);
-- GOMP_SPINCOUNT=300000 is libgomp's own default, which lunet no longer gets.
--   luajit bench/wait_policy.lua [--model lenet5] [--batch 64] [--steps 40] [--rounds 3]
--   luajit bench/wait_policy.lua --child MODEL BATCH STEPS   (internal: one run, prints img/s)
package.path = './bench/?.lua;' .. package.path

local args = {}
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:gsub('^%-%-', '')
    if k == 'child' then args.child = { arg[i + 1], tonumber(arg[i + 2]), tonumber(arg[i + 3]) }; break end
    local v = arg[i + 1]
    if v == nil or v:match('^%-%-') then args[k] = true; i = i + 1 else args[k] = v; i = i + 2 end
  end
end

if args.child then
  local lunet = require 'lunet'
  local models = require 'models'
  local name, batch, steps = unpack(args.child)
  local m = models[name]
  lunet.manual_seed(0)
  local model = m.build(lunet.nn)
  local opt = lunet.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
  local crit = lunet.nn.CrossEntropyLoss()
  local x = lunet.randn({ batch, unpack(m.input) })
  local y = lunet.randint(1, 11, { batch })
  local function step()
    opt:zero_grad()
    crit(model(x), y):backward()
    opt:step()
  end
  for _ = 1, 5 do step() end
  lunet.synchronize()
  local t0 = lunet.clock()
  for _ = 1, steps do step() end
  lunet.synchronize()
  print(('%.1f'):format(batch * steps / (lunet.clock() - t0)))
  return
end

local model, batch = args.model or 'lenet5', tonumber(args.batch) or 64
local steps, rounds = tonumber(args.steps) or 40, tonumber(args.rounds) or 3
local settings = {
  { 'lunet default (passive)', '' },
  { 'GOMP_SPINCOUNT=300000 (libgomp default)', 'GOMP_SPINCOUNT=300000' },
  { 'OMP_WAIT_POLICY=active', 'OMP_WAIT_POLICY=active' },
}

local function run(env)
  local p = io.popen(('env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT %s luajit bench/wait_policy.lua --child %s %d %d')
    :format(env, model, batch, steps))
  local out = p:read('*a'); p:close()
  return tonumber(out:match('([%d.]+)%s*$'))
end

local function loadavg()
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or '?'
  if f then f:close() end
  return s:match('^(%S+)')
end

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  return s[math.floor((#s + 1) / 2)]
end

print(('%s training, batch %d, %d steps a run, %d rounds; img/s (median, min-max)'):format(model, batch, steps, rounds))
for _, cond in ipairs({ 'alone', 'beside yes' }) do
  local yes_pid
  if cond == 'beside yes' then
    local p = io.popen('yes > /dev/null & echo $!')
    yes_pid = tonumber(p:read('*l')); p:close()
  end
  local got, loads = {}, {}
  for r = 1, rounds do
    loads[#loads + 1] = loadavg()
    for i, s in ipairs(settings) do
      got[i] = got[i] or {}
      got[i][r] = run(s[2]) or 0
    end
  end
  if yes_pid then os.execute('kill ' .. yes_pid) end
  print(('-- %s (load average at each round: %s)'):format(cond, table.concat(loads, ' ')))
  for i, s in ipairs(settings) do
    local t = got[i]
    print(('  %-42s %7.0f  (%s)'):format(s[1], median(t), table.concat((function()
      local o = {}
      for k, v in ipairs(t) do o[k] = ('%.0f'):format(v) end
      return o
    end)(), ' ')))
  end
end
