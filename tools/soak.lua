-- tools/soak.lua: a memory soak check (run by tools/ci-reliability.sh).
--   luajit tools/soak.lua [steps = 40000] [rss_bytes_per_step = 64] [warmup = 10000]
-- Trains a tiny MLP with lunet.fit for warmup + steps steps (Adam, dropout,
-- a shuffled loader, a checkpoint every 500 steps) and measures memory at the
-- end of the warm-up (JIT traces compiled, history and loader settled) and
-- at the end, each time *settled*: two full collections, the CPU block cache
-- emptied and glibc's free pages returned (malloc_trim). What is left is what
-- the process holds, so a leak shows, while the level of garbage that
-- happens to await the collector does not. (Sampling the running resident
-- set instead failed CI at random: a late collector cycle raises the peak of
-- dead tensors once, the block cache and the allocators keep that peak, and
-- RSS takes a one-time step of ~2 MB, 5-9% of this small process.)
-- Limits are growth per step, so they do not depend on the process's size:
--   resident set (settled)          rss_bytes_per_step: the allocators'
--                                   fragmentation moves it by up to ~1.3 MB
--                                   either way, whatever the run's length
--   glibc's heap in use (mallinfo2, exact, main arena)   8 bytes per step
--   the Lua heap after collection (exact)               8 bytes per step
--   bytes in live tensors (exact)                       1 byte per step
-- LUNET_SOAK_LEAK=c:N|lua:N|tensor:N leaks N bytes (C, Lua) or N floats
-- (tensor) each step after the warm-up, to check that the check fails.
-- Exits 1 on failure.
local ffi = require 'ffi'
ffi.cdef [[
int malloc_trim(size_t pad); void *malloc(size_t n);
struct ln_soak_mallinfo2 { size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost; };
struct ln_soak_mallinfo2 mallinfo2(void);
]]
local lunet = require 'lunet'
local steps = tonumber(arg[1]) or 40000
local rss_limit = tonumber(arg[2]) or 64
local warmup = tonumber(arg[3]) or 10000
local leak_kind, leak_n = (os.getenv('LUNET_SOAK_LEAK') or ''):match('^(%a+):(%d+)$')
leak_n = tonumber(leak_n)

local function rss_kb()
  local f = assert(io.open('/proc/self/status'))
  local s = f:read('*a')
  f:close()
  return tonumber(s:match('VmRSS:%s*(%d+)'))
end

local function settled()
  collectgarbage('collect')
  collectgarbage('collect')  -- the second frees what finalizers of the first released
  lunet.synchronize()
  lunet.empty_cache('cpu')
  ffi.C.malloc_trim(0)
  local mi = ffi.C.mallinfo2()
  return { rss = rss_kb() * 1024, c = tonumber(mi.uordblks + mi.hblkhd), lua = collectgarbage('count') * 1024,
    tensors = lunet.memory_allocated('cpu') }
end

local kept = {}  -- what the injected leaks hold
local function inject_leak()
  if leak_kind == 'c' then ffi.C.malloc(leak_n)
  elseif leak_kind == 'lua' then kept[#kept + 1] = string.rep('x', leak_n) .. #kept
  elseif leak_kind == 'tensor' then kept[#kept + 1] = lunet.zeros(leak_n) end
end

lunet.manual_seed(1)
local n, bs = 20000, 8   -- few epochs: fit keeps a history record per epoch
local x = lunet.randn(n, 16)
local y = x:narrow(2, 1, 1):squeeze(2):gt(0):long() + 1
local loader = lunet.data.DataLoader(lunet.data.TensorDataset(x, y), { batch_size = bs, shuffle = true, seed = 2 })
local nn = lunet.nn
local model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
local ckpt = os.tmpname()
local total = warmup + steps
local count, at_warm = 0, nil
local forward = model.forward
model.forward = function(self, input)
  count = count + 1
  if count == warmup + 1 then at_warm = settled() end
  if leak_kind and count > warmup then inject_leak() end
  return forward(self, input)
end
local t0 = lunet.clock()
local trainer = lunet.Trainer(model, { epochs = math.ceil(total * bs / n), max_steps = total,
  optimizer = lunet.optim.Adam(model:parameters(), { lr = 1e-3 }), checkpoint = ckpt,
  checkpoint_every = { steps = 500 }, quiet = true, progress = false })
trainer:fit(loader)
local dt = lunet.clock() - t0
local at_end = settled()
os.remove(ckpt)

local checks = {  -- name, key, limit in bytes per step
  { 'resident set', 'rss', rss_limit },
  { 'glibc heap in use', 'c', 8 },
  { 'Lua heap', 'lua', 8 },
  { 'live tensors', 'tensors', 1 },
}
local failed, parts = false, {}
for _, c in ipairs(checks) do
  local per_step = (at_end[c[2]] - at_warm[c[2]]) / steps
  parts[#parts + 1] = ('%s %.0f -> %.0f kB (%+.1f B/step, limit %g)'):format(c[1], at_warm[c[2]] / 1024,
    at_end[c[2]] / 1024, per_step, c[3])
  if per_step > c[3] then failed = true; parts[#parts] = parts[#parts] .. ' FAILED' end
end
print(('soak: %d steps in %.1fs (%.0f steps/s); settled after the %d warm-up steps and after %d more: %s'):format(
  trainer.step, dt, trainer.step / dt, warmup, steps, table.concat(parts, '; ')))
if trainer.step ~= total then print('soak: ran ' .. trainer.step .. ' steps, expected ' .. total); os.exit(1) end
if failed then print('soak: FAILED, memory grew by more than the limit'); os.exit(1) end
