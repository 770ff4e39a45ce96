-- Every ResNet-8 training step timed on its own (batch 64, SGD momentum 0.9,
-- as bench/bf16.lua), to see stalls that a median hides: wall ms / process
-- CPU ms per step (CPU above wall: threads busy; far below: waiting or
-- descheduled), then the median, the slowest step and how many took over
-- 500 ms. --after-1-thread first runs 5 steps on one thread, as bench/bf16.lua
-- does before its 2-thread figures.
--   luajit bench/step_times.lua [--steps 30] [--precision medium] [--threads 2] [--after-1-thread]
package.path = './lua/?.lua;./lua/?/init.lua;./bench/?.lua;' .. package.path
local lunet = require 'lunet'
local models = require 'models'
local nn, optim = lunet.nn, lunet.optim

local args = {}
for i = 1, #arg do
  local k = arg[i]:match('^%-%-(.+)')
  if k then args[k] = (arg[i + 1] and not arg[i + 1]:match('^%-%-')) and arg[i + 1] or true end
end
local STEPS, PREC, THREADS = tonumber(args.steps) or 30, args.precision or 'medium', tonumber(args.threads) or 2

local function make_step()
  lunet.manual_seed(0)
  local model, crit = models.resnet8.build(nn), nn.CrossEntropyLoss()
  local xs, ys = {}, {}
  for i = 1, 4 do xs[i], ys[i] = lunet.randn(64, 3, 32, 32), lunet.randint(1, 11, { 64 }) end
  local opt = optim.SGD(model:parameters(), { lr = 0.001, momentum = 0.9 })
  local i = 0
  return function()
    opt:zero_grad()
    crit(model(xs[i + 1]), ys[i + 1]):backward()
    opt:step()
    i = (i + 1) % 4
  end
end

lunet.set_float32_matmul_precision(PREC)
if args['after-1-thread'] then
  lunet.set_num_threads(1)
  local s = make_step()
  for _ = 1, 5 do s() end
  lunet.synchronize()
end
lunet.set_num_threads(THREADS)
local step, walls, out = make_step(), {}, {}
for i = 1, STEPS do
  local t, c = lunet.clock(), os.clock()
  step()
  lunet.synchronize()
  walls[i] = (lunet.clock() - t) * 1e3
  out[i] = ('%.0f/%.0f'):format(walls[i], (os.clock() - c) * 1e3)
end
print(('%s, %d threads: %s'):format(PREC, THREADS, table.concat(out, ' ')))
local slow = 0
for _, w in ipairs(walls) do if w > 500 then slow = slow + 1 end end
table.sort(walls)
print(('median %.0f ms, slowest %.0f ms, %d of %d steps over 500 ms'):format(walls[math.floor(STEPS / 2) + 1],
  walls[STEPS], slow, STEPS))
