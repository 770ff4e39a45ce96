-- One rank of spec/dpipe_mpi_spec.lua (-np 2 or 3): a Pipeline across
-- processes whose second stage (process rank 1) raises in its forward at the
-- second batch. That rank gets a Lua error naming its stage and ends with it; the
-- others must fail naming it within seconds (its exit tells them), not
-- hang. Prints "rank R error: ..." and ends with status 3, or "rank R raises: ...".
-- DPIPE_CATCH=1: that rank catches the error and waits 3 s before it ends;
-- the others must fail at once all the same (its stage's failure reaches
-- them as a message), printing "rank R error after T s: ...", and end normally.
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local nn, optim = lunet.nn, lunet.optim
local info = dist.init{ timeout = 60 }
local W, R = info.world_size, info.rank
local bad = 1
local catch = os.getenv('DPIPE_CATCH') == '1'

local function say(fmt, ...) io.stdout:write(('rank %d ' .. fmt .. '\n'):format(R, ...)); io.stdout:flush() end

-- a layer that fails in its forward once armed
local Bomb = nn.Module:extend('Bomb')
function Bomb:forward(x)
  if self.armed then error('Bomb: a bug in this layer') end
  return x
end

lunet.manual_seed(1)
local bomb = Bomb()
local atoms = { nn.Linear(4, 8), nn.ReLU(), bomb, nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3) }
local pipe = lunet.parallel.Pipeline(nn.Sequential(atoms), { group = dist.world(), chunks = 4, schedule = '1f1b',
  balance = W == 2 and { 2, 4 } or { 2, 2, 2 } })   -- (the bomb opens stage 2)
local opt = optim.SGD(pipe:parameters(), { lr = 0.1 })
local crit = nn.CrossEntropyLoss()
local x, y = lunet.randn(8, 4), lunet.randint(1, 4, { 8 })
local t0
for step = 1, 3 do
  if step == 2 then
    t0 = lunet.clock()
    if R == bad then bomb.armed = true end
  end
  local ok, err = pcall(function()
    opt:zero_grad()
    local loss = pipe:forward_loss(crit, x, y)
    loss:backward(); opt:step()
    return loss:item()
  end)
  if not ok then
    if R == bad then
      say('raises: %s', tostring(err))
      if not catch then error(err, 0) end
      os.execute('sleep 3')
      say('done')
      return
    end
    if catch then say('error after %.1f s: %s', lunet.clock() - t0, tostring(err)); say('done'); return end
    say('error: %s', tostring(err))
    os.exit(3)
  end
  say('step %d loss %.4f', step, err)
end
say('done')
