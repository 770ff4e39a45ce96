-- ImageFolder through a DataLoader beside torch 1.13's: a folder of JPEGs of
-- about 500x375 (bench/imagefolder_gen.py writes it once; not in the repo),
-- decode + RandomResizedCrop(224) + RandomHorizontalFlip + Normalize at
-- batch 64, shuffled; lunet's files decoded and transformed in its C workers,
-- torch's DataLoader(ImageFolder) with PIL and torchvision's transforms
-- (bench/imagefolder_torch.py, one thread a worker). Each figure: making the
-- loader and one epoch (at most --batches batches), images per second; the
-- rounds interleave the two sides (the machine is shared: compare ranges,
-- and the ratios of the two sides within a round).
--   luajit bench/imagefolder.lua [--root /tmp/imgload_bench] [--images 2000]
--                                [--workers 0,1,2] [--rounds 3] [--batches 32] [--lua-path]
-- --lua-path adds lunet's per-sample Lua path (a Lua loader function: what
-- ImageFolder did before its files went to the C workers), at 0 workers.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local ffi = require 'ffi'
local lunet = require 'lunet'
local data = lunet.data
local T = data.transforms

local args = {}
for i = 1, #arg do args[arg[i]:gsub('^%-%-', '')] = arg[i + 1] or true end
local ROOT = args.root or '/tmp/imgload_bench'
local IMAGES = tonumber(args.images) or 2000
local ROUNDS = tonumber(args.rounds) or 3
local BATCHES = tonumber(args.batches) or 32
local WORKERS = {}
for w in (args.workers or '0,1,2'):gmatch('%d+') do WORKERS[#WORKERS + 1] = tonumber(w) end
local PY = os.getenv('PYTHON') or '/usr/bin/python3'

if not pcall(ffi.typeof, 'struct lunet_bench_timespec') then
  ffi.cdef [[
    struct lunet_bench_timespec { long tv_sec; long tv_nsec; };
    int lunet_bench_clock(int clk, struct lunet_bench_timespec *ts) __asm__("clock_gettime");
  ]]
end
local ts = ffi.new('struct lunet_bench_timespec')
local function now()
  ffi.C.lunet_bench_clock(1, ts)   -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function loadavg()
  local f = io.open('/proc/loadavg')
  local s = f and f:read('*l') or ''
  if f then f:close() end
  return s:match('^(%S+)') or '?'
end

if not io.open(ROOT .. '/class00') then
  print(('writing %d JPEGs into %s ...'):format(IMAGES, ROOT))
  assert(os.execute(('%s bench/imagefolder_gen.py %q %d'):format(PY, ROOT, IMAGES)) == 0)
end

local tf = T.Compose({ T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
  T.Normalize({ 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 }) })
local ds = data.ImageFolder(ROOT, { transform = tf })
local lua_ds = data.ImageFolder(ROOT, { transform = tf, loader = function(p) return data.read_image(p, { mode = 'RGB' }) end })

local function lunet_epoch(w, seed, lua_path)
  local t0 = now()
  local l = data.DataLoader(lua_path and lua_ds or ds, { batch_size = 64, shuffle = true, seed = seed, workers = w })
  assert(l.files == not lua_path, 'expected the C files path')
  local n, b = 0, 0
  for x in l:iter() do
    n, b = n + x:size(1), b + 1
    if b >= BATCHES then break end
  end
  local dt = now() - t0
  l:close()
  return dt, n
end

local function torch_epochs()
  local p = io.popen(('%s bench/imagefolder_torch.py %q %s %d'):format(PY, ROOT, table.concat(WORKERS, ','), BATCHES))
  local r = {}
  for line in p:lines() do
    local w, s, n = line:match('^(%d+) (%S+) (%d+)$')
    if w then r[tonumber(w)] = tonumber(n) / tonumber(s) end
  end
  p:close()
  return r
end

print(('ImageFolder, %d JPEGs in %s, batch 64, up to %d batches an epoch; %d rounds; load average %s'):format(
  #ds, ROOT, BATCHES, ROUNDS, loadavg()))
local got = { lunet = {}, torch = {} }
for _, w in ipairs(WORKERS) do got.lunet[w], got.torch[w] = {}, {} end
for r = 1, ROUNDS do
  for _, w in ipairs(WORKERS) do
    local dt, n = lunet_epoch(w, r)
    table.insert(got.lunet[w], n / dt)
  end
  if args['lua-path'] then
    local dt, n = lunet_epoch(0, r, true)
    io.write(('round %d: lunet Lua path %.0f images/s\n'):format(r, n / dt))
  end
  local tr = torch_epochs()
  for _, w in ipairs(WORKERS) do table.insert(got.torch[w], tr[w] or 0 / 0) end
  io.write(('round %d (load %s):'):format(r, loadavg()))
  for _, w in ipairs(WORKERS) do
    io.write(('  w%d lunet %.0f torch %.0f'):format(w, got.lunet[w][r], got.torch[w][r]))
  end
  io.write(' images/s\n')
  io.flush()
end

local function range(t)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(t) do lo, hi = math.min(lo, v), math.max(hi, v) end
  return lo, hi
end
-- (the ratio of each round's two figures: both sides saw that round's load)
print(('%-8s %22s %22s %16s'):format('workers', 'lunet images/s', 'torch images/s', 'lunet/torch'))
for _, w in ipairs(WORKERS) do
  local ratios = {}
  for r = 1, ROUNDS do ratios[r] = got.lunet[w][r] / got.torch[w][r] end
  local a, b = range(got.lunet[w])
  local c, d = range(got.torch[w])
  local e, f = range(ratios)
  print(('%-8d %10.0f .. %-9.0f %10.0f .. %-9.0f %6.2f .. %-6.2f'):format(w, a, b, c, d, e, f))
end
