-- tools/soak.lua: a memory soak check (run by tools/ci-reliability.sh).
--   luajit tools/soak.lua [steps = 5000] [max_growth_percent = 5] [warmup = 5000]
-- Trains a tiny MLP with lunet.fit for warmup + steps steps (Adam, dropout,
-- a shuffled loader, a checkpoint every 500 steps) and compares the resident
-- set size after a full collection at the end of the warm-up (JIT traces
-- compiled, the device's block cache and the collector's pace settled: the
-- first ~1,500 steps grow RSS by 5-10% here) with the same at the end.
-- Exits 1 when it grew by more than the limit. Prints one line of figures.
local lunet = require 'lunet'
local steps = tonumber(arg[1]) or 5000
local limit = tonumber(arg[2]) or 5
local warmup = tonumber(arg[3]) or 5000

local function rss_kb()
  local f = assert(io.open('/proc/self/status'))
  local s = f:read('*a')
  f:close()
  return tonumber(s:match('VmRSS:%s*(%d+)'))
end
local function settled_rss()
  collectgarbage(); collectgarbage()
  return rss_kb()
end

lunet.manual_seed(1)
local n, bs = 20000, 8   -- few epochs: fit keeps a history record per epoch
local x = lunet.randn(n, 16)
local y = x:narrow(2, 1, 1):squeeze(2):gt(0):long() + 1
local loader = lunet.data.DataLoader(lunet.data.TensorDataset(x, y), { batch_size = bs, shuffle = true, seed = 2 })
local nn = lunet.nn
local model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
local ckpt = os.tmpname()
local warm_at = warmup + 1
local total = warmup + steps
local count, rss_warm, rss_samples = 0, nil, {}
local forward = model.forward
model.forward = function(self, input)
  count = count + 1
  if count == warm_at then rss_warm = settled_rss() end
  if count > warmup and (count - warmup) % math.max(1, math.floor(steps / 10)) == 0 then rss_samples[#rss_samples + 1] = rss_kb() end
  return forward(self, input)
end
local t0 = lunet.clock()
local trainer = lunet.Trainer(model, { epochs = math.ceil(total * bs / n), max_steps = total,
  optimizer = lunet.optim.Adam(model:parameters(), { lr = 1e-3 }), checkpoint = ckpt,
  checkpoint_every = { steps = 500 }, quiet = true, progress = false })
trainer:fit(loader)
local dt = lunet.clock() - t0
os.remove(ckpt)
local rss_end = settled_rss()
local growth = 100 * (rss_end - rss_warm) / rss_warm
print(('soak: %d steps in %.1fs (%.0f steps/s); RSS %d kB after the %d warm-up steps, %d kB after %d more: %+.2f%% (limit %g%%); samples %s kB'):format(
  trainer.step, dt, trainer.step / dt, rss_warm, warmup, rss_end, steps, growth, limit, table.concat(rss_samples, ' ')))
if trainer.step ~= total then print('soak: ran ' .. trainer.step .. ' steps, expected ' .. total); os.exit(1) end
if growth > limit then print('soak: FAILED, resident set grew by more than the limit'); os.exit(1) end
