-- A small CNN's training step (Conv-ReLU-Pool x2, Linear; 1x28x28), in
-- microseconds a step: luajit bench/options_ab.lua [batch [steps]], lunet
-- from LUA_PATH. The options-check A/B in RESULTS.md runs it against a copy
-- of lua/ whose options.check returns at once.
local lunet = require 'lunet'
local nn, optim = lunet.nn, lunet.optim
lunet.manual_seed(0)
local model = nn.Sequential {
  nn.Conv2d(1, 8, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(8, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(16 * 7 * 7, 10),
}
local crit = nn.CrossEntropyLoss()
local opt = optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
local bs = tonumber(arg[1]) or 8
local x = lunet.randn(bs, 1, 28, 28)
local y = lunet.randint(1, 11, { bs })
local function step()
  opt:zero_grad()
  local loss = crit(model(x), y)
  loss:backward()
  opt:step()
  return loss
end
for _ = 1, 50 do step() end
lunet.synchronize()
local n = tonumber(arg[2]) or 400
local t0 = lunet.clock()
for _ = 1, n do step() end
step():item()
print(('%.1f'):format((lunet.clock() - t0) / n * 1e6))
