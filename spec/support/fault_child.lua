-- A tiny training run for spec/fault_spec.lua and tools/ci-reliability.sh
-- (run as a child process, killed and resumed):
--   luajit spec/support/fault_child.lua CKPT OUT EVERY EPOCHS [SLEEP_S]
-- trains a 2-layer MLP with dropout (uses the RNG), SGD with momentum and a
-- shuffled loader (its position is in the checkpoint), checkpoint_every =
-- {steps = EVERY}, resume = true, then saves the final parameters to OUT.
-- SLEEP_S > 0 slows each step (to land a signal mid-run; FAULT_STARTED=file
-- is then created at the first step). Prints
-- "resumed at step N" when it resumed and "done" at the end.
local ckpt, out, every, epochs, sleep_s = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4]), tonumber(arg[5] or 0)
local lunet = require 'lunet'
local nn, data = lunet.nn, lunet.data
lunet.manual_seed(7)
local x = lunet.randn(96, 8)
local y = x:narrow(2, 1, 1):squeeze(2):gt(0):long() + 1   -- classes 1, 2
local model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.25), nn.Linear(16, 2))
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true, seed = 3 })
local opt = lunet.optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9 })
if sleep_s > 0 then
  local ffi = require 'ffi'
  pcall(ffi.cdef, 'int usleep(unsigned int usec);')
  local f = model.forward
  local started = os.getenv('FAULT_STARTED')   -- a file made at the first step
  model.forward = function(self, ...)
    if started then io.open(started, 'w'):close(); started = nil end
    ffi.C.usleep(sleep_s * 1e6)
    return f(self, ...)
  end
end
local trainer = lunet.Trainer(model, { epochs = epochs, optimizer = opt, checkpoint = ckpt,
  checkpoint_every = { steps = every }, resume = true, quiet = true, progress = false })
if trainer.resume and io.open(ckpt, 'rb') then
  local st = require('lunet.checkpoint').load(ckpt)
  print(('resumed at step %d'):format(st.step))
end
io.stdout:flush()
trainer:fit(loader)
lunet.save(out, model:state_dict(), { step = trainer.step })
print('done')
