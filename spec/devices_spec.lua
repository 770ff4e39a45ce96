-- Virtual CPU devices: streams, cross-device copies, events, deferred errors,
-- GC of tensors with queued work, memory limits and the caching allocator.
local lunet = require 'lunet'
local ffi = require 'ffi'
local C = lunet.C
-- fault injection (ln_stream_inject_*): c/include/lunet_internal.h
if not pcall(ffi.typeof, 'ln_rec_stats') then ffi.cdef(require 'lunet.cdef_internal') end

local function root_dir()
  local src = debug.getinfo(1, 'S').source:match('^@(.*)spec/devices_spec%.lua$')
  return (src == nil or src == '') and './' or src
end

local function release_all()
  collectgarbage(); collectgarbage()
  lunet.synchronize()
end

-- fn() run with collectgarbage() counted: ok, err, the full collections it ran
local function counting_collections(fn)
  local real, collections = collectgarbage, 0
  _G.collectgarbage = function(...)
    if select('#', ...) == 0 then collections = collections + 1 end
    return real(...)
  end
  local ok, err = pcall(fn)
  _G.collectgarbage = real
  return ok, err, collections
end

describe('virtual CPU devices', function()
  setup(function()
    release_all()
    lunet.set_cpu_devices(3)
  end)

  teardown(function()
    release_all()
    for d = 1, 2 do C.ln_memory_set_limit(d, 0) end
    lunet.set_cpu_devices(1)
  end)

  it('lists three devices that share the cores', function()
    assert.same({'cpu:0', 'cpu:1', 'cpu:2'}, lunet.devices())
    assert.equal(3, lunet.device_count())
    for d = 0, 2 do assert.is_true(C.ln_device_threads(d) >= 1) end
  end)

  it('starts its stream workers with SIGINT and SIGPROF blocked, faults not (they reach the Lua thread)', function()
    local a = lunet.ones(4, {device = 'cpu:1'}) + 1   -- the cpu:1 worker runs
    lunet.synchronize()
    local function bit(mask, signo)   -- bit signo-1 of a hex mask
      local digit = tonumber(mask:sub(#mask - math.floor((signo - 1) / 4), #mask - math.floor((signo - 1) / 4)), 16)
      return math.floor(digit / 2 ^ ((signo - 1) % 4)) % 2 == 1
    end
    local seen = 0
    local pid = assert(io.open('/proc/self/stat')):read('*l'):match('^(%d+)')
    for tid in io.popen('ls /proc/' .. pid .. '/task'):lines() do
      local f = io.open('/proc/' .. pid .. '/task/' .. tid .. '/comm')
      local name = f and f:read('*l'); if f then f:close() end
      if name and name:match('^lunet cpu') then
        local st = assert(io.open('/proc/' .. pid .. '/task/' .. tid .. '/status')):read('*a')
        local mask = st:match('SigBlk:%s*(%x+)')
        assert.is_true(bit(mask, 2), name .. ' SIGINT')
        assert.is_true(bit(mask, 27), name .. ' SIGPROF')
        assert.is_false(bit(mask, 11), name .. ' SIGSEGV')
        seen = seen + 1
      end
    end
    assert.is_true(seen >= 1)
    assert.same({2, 2, 2, 2}, a:totable())
  end)

  it('creates tensors on cpu:1 and computes there', function()
    local a = lunet.arange(6, {dtype = 'float32', device = 'cpu:1'}):view(2, 3)
    local b = lunet.ones(2, 3, {device = 'cpu:1'})
    local c = a * 2 + b
    assert.equal('cpu:1', c.device)
    assert.same({{1, 3, 5}, {7, 9, 11}}, c:totable())
  end)

  it('rejects ops that mix devices, naming both', function()
    local a, b = lunet.zeros(3, {device = 'cpu:1'}), lunet.zeros(3, {device = 'cpu:2'})
    local ok, err = pcall(function() return a + b end)
    assert.is_false(ok)
    assert.matches('cpu:1 and cpu:2', err, 1, true)
  end)

  it('rejects a device that does not exist', function()
    local ok, err = pcall(lunet.zeros, 2, {device = 'cpu:7'})
    assert.is_false(ok)
    assert.matches('no device cpu:7', err, 1, true)
  end)

  it('copies across devices with the right values, dtypes and views', function()
    local a = lunet.arange(12, {dtype = 'float64', device = 'cpu:1'}):view(3, 4)
    local b = a:t():to('cpu:2')
    assert.equal('cpu:2', b.device)
    assert.equal('float64', b.dtype)
    assert.same({{0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}}, b:totable())
    local back = b:to('cpu:0')
    assert.equal('cpu:0', back.device)
    assert.same(b:totable(), back:totable())
  end)

  it('orders a long chain on cpu:1, a copy to cpu:2 and more work there', function()
    local x = lunet.zeros(100000, {device = 'cpu:1'})
    for _ = 1, 200 do x:add_(1) end             -- 200 queued kernels on cpu:1
    local y = x:to('cpu:2')
    for _ = 1, 50 do y:mul_(2):div_(2) end
    y:add_(0.5)
    local s = y:sum():item()
    assert.equal(100000 * 200.5, s)
    -- and the source went on independently
    x:add_(1)
    assert.equal(201, x[100000]:item())
  end)

  it('copies into an existing tensor on another device while both streams are busy', function()
    local src = lunet.full({50000}, 3, {device = 'cpu:1'})
    local dst = lunet.full({50000}, 7, {device = 'cpu:2'})
    for _ = 1, 20 do src:add_(1); dst:add_(1) end
    dst:copy_(src)                               -- after dst's 20 adds, sees src's 20 adds
    dst:add_(1)
    assert.equal(24, dst:max():item())
    assert.equal(24, dst:min():item())
  end)

  it('lunet.synchronize waits for one device or all', function()
    local a = lunet.ones(200000, {device = 'cpu:1'})
    for _ = 1, 30 do a:mul_(1.5) end
    lunet.synchronize('cpu:1')
    local ev = ffi.new('ln_event')
    assert.equal(0, C.ln_event_record(1, ev))
    assert.equal(1, C.ln_event_query(ev))      -- nothing left after a sync
    lunet.synchronize()
    assert.near(1.5 ^ 30, a[1]:item(), 1.5 ^ 30 * 1e-5)
  end)

  it('events: record on a producer, wait on a consumer, query and synchronize', function()
    local a = lunet.ones(300000, {device = 'cpu:1'})
    for _ = 1, 60 do a:add_(1) end
    local ev = ffi.new('ln_event')
    assert.equal(0, C.ln_event_record(1, ev))
    assert.equal(1, ev.device)
    local q = C.ln_event_query(ev)
    assert.is_true(q == 0 or q == 1)
    -- cpu:2 waits for the event, then reads a's storage through a copy it runs
    assert.equal(0, C.ln_event_wait(2, ev))
    assert.equal(0, C.ln_event_synchronize(ev))
    assert.equal(1, C.ln_event_query(ev))
    assert.equal(61, a[300000]:item())
    local bad = ffi.new('ln_event', {device = 9})
    assert.equal(-1, C.ln_event_query(bad))
    assert.matches('no device cpu:9', ffi.string(C.ln_last_error()), 1, true)
  end)

  it('raises a stream error at the next synchronisation, naming the op and device', function()
    local a = lunet.ones(10, {device = 'cpu:2'})
    a:add_(1)
    assert.equal(0, C.ln_stream_inject_error(2, 'kernel exploded'))
    a:add_(100)                                 -- skipped: the stream has failed
    local ok, err = pcall(lunet.synchronize, 'cpu:2')
    assert.is_false(ok)
    assert.matches('kernel exploded (in inject_error, cpu:2)', err, 1, true)
    -- reported once; the device keeps working, later work runs again
    lunet.synchronize('cpu:2')
    a:add_(1)
    assert.same(3, a[1]:item())
  end)

  it('keeps an error on its device: other devices go on working', function()
    local a = lunet.ones(10, {device = 'cpu:1'})
    local b = lunet.ones(10, {device = 'cpu:2'})
    assert.equal(0, C.ln_stream_inject_error(1, 'only here'))
    a:add_(1)
    b:add_(1)
    assert.same(20, b:sum():item())              -- cpu:2 is not affected
    local ok, err = pcall(function() return a:sum():item() end)
    assert.is_false(ok)
    assert.matches('only here (in inject_error, cpu:1)', err, 1, true)
    assert.same(10, a:sum():item())              -- the add_ after the error was skipped
  end)

  it('a copy to a new tensor on a busy device does not hold the source device', function()
    local src = lunet.ones(1000, {device = 'cpu:1'})
    lunet.synchronize()
    -- cpu:2 holds until cpu:0 opens the gate, 2 s from now
    local gate = ffi.new('int[1]')
    assert.equal(0, C.ln_stream_inject_gate(2, gate))
    assert.equal(0, C.ln_stream_inject_opener(0, gate, 2))
    local dst = src:to('cpu:2')                   -- copied by cpu:1 into a fresh tensor
    local after = src * 2                         -- cpu:1's next work
    assert.equal(2000, after:sum():item())        -- done without waiting for cpu:2
    assert.equal(0, gate[0])
    assert.equal(1000, dst:sum():item())          -- cpu:2's later work sees the copy
    assert.equal(1, gate[0])
  end)

  -- ln_transfer_ (a pipeline's stage boundary): on the destination's comm
  -- stream, waited for by the destination only where its work reads the buffer
  it('a transfer into a buffer the busy destination still uses does not hold the source device', function()
    local src = lunet.ones(1000, {device = 'cpu:1'})
    local dst = lunet.zeros(1000, {device = 'cpu:2'})   -- not fresh: cpu:2's queued work may use it
    lunet.synchronize()
    local gate = ffi.new('int[1]')
    assert.equal(0, C.ln_stream_inject_gate(2, gate))   -- cpu:2 holds until cpu:0 opens it, 2 s from now
    assert.equal(0, C.ln_stream_inject_opener(0, gate, 2))
    local done = ffi.new('ln_event[1]')
    assert.equal(0, C.ln_transfer_(dst.p, src.p, done))
    assert.equal(2, done[0].device)
    assert.equal(1, done[0].stream)                     -- a point on cpu:2's comm stream
    local after = src * 2                               -- cpu:1's next work
    assert.equal(2000, after:sum():item())              -- (ln_copy_'s copier, cpu:1, would wait for cpu:2)
    assert.equal(0, gate[0])
    assert.equal(0, C.ln_event_wait(2, done))
    assert.equal(1000, dst:sum():item())                -- after the gate, the copy, then the read
    assert.equal(1, gate[0])
  end)

  it("a transfer's destination runs its earlier-queued work before the copy arrives", function()
    local src = lunet.ones(1000, {device = 'cpu:1'})
    local dst = lunet.zeros(1000, {device = 'cpu:2'})
    local other = lunet.ones(10, {device = 'cpu:2'})
    lunet.synchronize()
    local gate = ffi.new('int[1]')
    assert.equal(0, C.ln_stream_inject_gate(1, gate))   -- the source holds for 2 s
    assert.equal(0, C.ln_stream_inject_opener(0, gate, 2))
    local done = ffi.new('ln_event[1]')
    assert.equal(0, C.ln_transfer_(dst.p, src.p, done))
    local twice = other * 2
    local ran = ffi.new('ln_event[1]')
    assert.equal(0, C.ln_event_record(2, ran))
    assert.equal(0, C.ln_event_synchronize(ran))        -- cpu:2's compute is not waiting for the copy
    assert.equal(0, gate[0])                            -- (reading twice would wait: a read syncs both streams)
    assert.equal(0, C.ln_event_query(done))             -- the copy has not run
    assert.equal(0, C.ln_event_synchronize(done))       -- the host waits for a comm-stream point
    assert.equal(1, gate[0])
    assert.equal(1, C.ln_event_query(done))
    assert.equal(0, C.ln_event_wait(2, done))
    assert.equal(1000, dst:sum():item())
    assert.equal(20, twice:sum():item())
  end)

  it('a transfer casts and broadcasts as copy_ does, and on one device is a plain copy', function()
    local src = lunet.tensor({{1, 2, 3}}, {dtype = 'float64', device = 'cpu:1'})
    local dst = lunet.zeros(2, 3, {device = 'cpu:2'})
    local done = ffi.new('ln_event[1]')
    assert.equal(0, C.ln_transfer_(dst.p, src.p, done))
    assert.equal(0, C.ln_event_wait(2, done))
    assert.same({{1, 2, 3}, {1, 2, 3}}, dst:totable())
    local same = lunet.zeros(2, 3, {device = 'cpu:1'})
    assert.equal(0, C.ln_transfer_(same.p, src.p, done))
    assert.equal(0, done[0].stream)
    assert.same({{1, 2, 3}, {1, 2, 3}}, same:totable())
    local bad = lunet.zeros(4, {device = 'cpu:2'})
    assert.equal(-1, C.ln_transfer_(bad.p, src.p, done))
    assert.matches('copy_: shapes {4} and {1,3} cannot broadcast', lunet.core.last_error(), 1, true)
    assert.equal(-1, C.ln_transfer_(dst.p, src.p, nil))
    assert.matches('transfer_: done is NULL', lunet.core.last_error(), 1, true)
    local ev = ffi.new('ln_event[1]', {{device = 1, stream = 7, seq = 0}})
    assert.equal(-1, C.ln_event_synchronize(ev))
    assert.matches('stream 7 is neither 0 (compute) nor 1 (comm)', lunet.core.last_error(), 1, true)
  end)

  it("raises a transfer source's error where the destination reads the buffer", function()
    local src = lunet.ones(1000, {device = 'cpu:1'})
    local dst = lunet.zeros(1000, {device = 'cpu:2'})
    lunet.synchronize()
    assert.equal(0, C.ln_stream_inject_error(1, 'stage broke'))
    local done = ffi.new('ln_event[1]')
    assert.equal(0, C.ln_transfer_(dst.p, src.p, done))
    assert.equal(0, C.ln_event_wait(2, done))
    local ok, err = pcall(function() return dst:totable() end)
    assert.is_false(ok)
    assert.matches('stage broke', err, 1, true)
    assert.matches('cpu:1', err, 1, true)
    lunet.synchronize()
    assert.equal(0, C.ln_transfer_(dst.p, src.p, done))   -- reported once; transfers work again
    assert.equal(0, C.ln_event_wait(2, done))
    assert.same(1000, dst:sum():item())
  end)

  it('raises a source device error when the destination of a copy is read', function()
    local a = lunet.ones(1000, {device = 'cpu:1'})
    assert.equal(0, C.ln_stream_inject_error(1, 'source broke'))
    local b = a:to('cpu:2')                      -- the copy on cpu:1 is skipped
    local ok, err = pcall(function() return b:totable() end)
    assert.is_false(ok)
    assert.matches('event_wait: cpu:1, whose work this waits for, failed: source broke', err, 1, true)
    assert.matches('cpu:2', err, 1, true)
    assert.has_no.errors(function() lunet.synchronize('cpu:1') end)   -- one failure, raised once
    lunet.synchronize()
    assert.same(1000, a:to('cpu:2'):sum():item())  -- reported once; copies work again
  end)

  it('raises an out-of-range index found by a kernel on a worker at the next read', function()
    local a = lunet.arange(5, {dtype = 'float32', device = 'cpu:1'})
    local idx = lunet.tensor({1, 9}, {dtype = 'int64', device = 'cpu:1'})
    local r = a:index_select(1, idx)          -- checked in the kernel, on cpu:1's worker
    local ok, err = pcall(function() return r:totable() end)
    assert.is_false(ok)
    assert.matches('index 9 is out of range', err, 1, true)
    assert.matches('cpu:1', err, 1, true)
    local good = a:index_select(1, lunet.tensor({5, 1}, {dtype = 'int64', device = 'cpu:1'}))
    assert.same({4, 0}, good:totable())
  end)

  it('keeps storages alive for queued work after the Lua references are dropped', function()
    release_all()
    local base = lunet.memory_allocated('cpu:1')
    local out = lunet.zeros(1000, {device = 'cpu:2'})
    do
      local t = lunet.ones(1000, {device = 'cpu:1'})
      for _ = 1, 100 do t = t + 1 end            -- each step frees the previous tensor
      out:copy_(t)
    end
    collectgarbage(); collectgarbage()
    assert.same(101, out:sum():item() / 1000)
    out = nil
    release_all()
    assert.equal(base, lunet.memory_allocated('cpu:1'))
    assert.equal(0, lunet.memory_allocated('cpu:2') - lunet.memory_allocated('cpu:2'))
  end)

  it('returns memory_allocated to its baseline after a GC storm with pending work', function()
    release_all()
    local base1, base2 = lunet.memory_allocated('cpu:1'), lunet.memory_allocated('cpu:2')
    local sums = {}
    for i = 1, 40 do
      local a = lunet.full({4096}, i, {device = 'cpu:1'})
      local b = (a * 2):to('cpu:2')
      sums[i] = b:sum()                           -- queued on cpu:2; a and b dropped below
      if i % 10 == 0 then collectgarbage() end
    end
    collectgarbage(); collectgarbage()
    for i = 1, 40 do assert.equal(4096 * 2 * i, sums[i]:item()) end
    sums = nil
    release_all()
    assert.equal(base1, lunet.memory_allocated('cpu:1'))
    assert.equal(base2, lunet.memory_allocated('cpu:2'))
  end)

  it('set_num_threads / get_num_threads per device, as torch.set_num_threads', function()
    local old0, old1 = lunet.get_num_threads(), lunet.get_num_threads('cpu:1')
    assert.equal(C.ln_device_threads(0), old0)
    assert.equal(C.ln_device_threads(1), old1)
    local a = lunet.randn({64, 48}, {device = 'cpu:1', dtype = 'float64'})
    local b = lunet.randn({48, 32}, {device = 'cpu:1', dtype = 'float64'})
    local ref = a:matmul(b)
    lunet.set_num_threads(3, 'cpu:1')
    assert.equal(3, lunet.get_num_threads('cpu:1'))
    assert.equal(old0, lunet.get_num_threads())          -- the others keep theirs
    assert.tensor_near(a:matmul(b), ref, 1e-12)
    lunet.set_num_threads(1, 'cpu:1')
    assert.equal(1, lunet.get_num_threads('cpu:1'))
    assert.tensor_near(a:matmul(b), ref, 1e-12)
    lunet.set_num_threads(old1, 'cpu:1')
    assert.has_error(function() lunet.set_num_threads(0) end,
      'set_num_threads: thread count must be an integer in 1..1024, got 0')
    assert.has_error(function() lunet.set_num_threads(1.5, 'cpu:1') end,
      'set_num_threads: thread count must be an integer in 1..1024, got 1.5')
    assert.has_error(function() lunet.set_num_threads(1e6) end,
      'set_num_threads: thread count must be an integer in 1..1024, got 1000000')
    assert.equal(-1, C.ln_set_device_threads(1, 5000))
    assert.matches('at most 1024 threads, got 5000', ffi.string(C.ln_last_error()), 1, true)
    local ok, err = pcall(lunet.set_num_threads, 2, 'cpu:9')
    assert.is_false(ok)
    assert.matches('set_num_threads: no device cpu:9', err, 1, true)
    assert.equal(old1, lunet.get_num_threads('cpu:1'))
  end)

  it('gives a clear out-of-memory error under a device memory limit and stays usable', function()
    release_all()
    assert.equal(0, C.ln_memory_set_limit(1, 1024 * 1024))
    local small = lunet.zeros(1000, {device = 'cpu:1'})
    local ok, err = pcall(lunet.zeros, 1024, 1024, {device = 'cpu:1'})
    assert.is_false(ok)
    assert.matches('out of memory on cpu:1', err, 1, true)
    assert.matches('limit 1048576', err, 1, true)
    ok, err = pcall(function() return small:expand(1000, 1000):contiguous() end)
    assert.is_false(ok)
    assert.matches('out of memory', err, 1, true)
    -- other devices are not limited, and cpu:1 still works within its limit
    assert.equal(1024 * 1024, lunet.zeros(1024, 1024, {device = 'cpu:2'}):numel())
    assert.same(2000, (small + 2):sum():item())
    assert.equal(0, C.ln_memory_set_limit(1, 0))
    assert.equal(1024 * 1024, lunet.zeros(1024, 1024, {device = 'cpu:1'}):numel())
    assert.equal(-1, C.ln_memory_set_limit(1, -5))
  end)

  it('under a memory limit, waits for queued work to return its tensors before calling it out of memory', function()
    release_all()
    lunet.synchronize()
    assert.equal(0, C.ln_memory_set_limit(1, 8 * 1024 * 1024))
    -- cpu:1 holds until cpu:0 opens the gate, 0.5 s from now; meanwhile six
    -- 1 MB temporaries are queued there and dropped by Lua: only their queued
    -- tasks keep them
    local gate = ffi.new('int[1]')
    assert.equal(0, C.ln_stream_inject_gate(1, gate))
    assert.equal(0, C.ln_stream_inject_opener(0, gate, 0.5))
    for _ = 1, 6 do local t = lunet.ones(256, 1024, {device = 'cpu:1'}); t = nil; collectgarbage() end
    assert.equal(0, gate[0])
    -- 4 MB more exceeds the limit until the queue has run: the host waits for it
    local big = lunet.ones(1024, 1024, {device = 'cpu:1'})
    assert.equal(1, gate[0])
    assert.equal(1024 * 1024, big:sum():item())
    -- what live tensors hold is still refused, with the same message
    local ok, err = pcall(lunet.ones, 1024, 1024, {device = 'cpu:1'})
    assert.is_false(ok)
    assert.matches('out of memory on cpu:1', err, 1, true)
    big = nil
    release_all()
    assert.equal(0, C.ln_memory_set_limit(1, 0))
  end)

  it('under a memory limit, lets queued work return its blocks instead of collecting for nothing', function()
    release_all()
    local free_now = require('lunet.tensor').free_now
    local MB = 2 ^ 20
    assert.equal(0, C.ln_memory_set_limit(1, lunet.memory_allocated('cpu:1') + 8 * MB))
    -- cpu:1 holds until cpu:0 opens the gate 0.3 s from now; seven 1 MB
    -- tensors are queued there and freed at once (no garbage): only their
    -- queued tasks hold the blocks, which no collection can free
    local gate = ffi.new('int[1]')
    assert.equal(0, C.ln_stream_inject_gate(1, gate))
    assert.equal(0, C.ln_stream_inject_opener(0, gate, 0.3))
    local base = lunet.memory_allocated('cpu:1')
    local ok, err, collections = counting_collections(function()
      for _ = 1, 7 do free_now(lunet.ones(256, 1024, {device = 'cpu:1'})) end
    end)
    assert.is_true(ok, err)
    -- past the mark (7 of 8 MB, 1 MB blocks) the host waited for the queue
    -- rather than collecting (halfway, 4 MB, it had collected, and again at 6 and 7)
    assert.equal(1, gate[0])
    assert.equal(0, collections)
    assert.is_true(lunet.memory_allocated('cpu:1') <= lunet.memory_limit('cpu:1') - 2 * MB)
    release_all()
    assert.equal(base, lunet.memory_allocated('cpu:1'))
    assert.equal(0, C.ln_memory_set_limit(1, 0))
  end)

  it('under a tight memory limit, a training loop collects a few times a step and trains as without it', function()
    release_all()
    local nn, optim = lunet.nn, lunet.optim
    local function run(limit_extra)
      lunet.manual_seed(7)
      local model = nn.Sequential { nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5),
        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 10) }
      model:to('cpu:1')
      local x = lunet.randn({64, 1, 32, 32}):to('cpu:1')
      local y = lunet.randint(1, 11, {64}):to('cpu:1')
      local crit, opt = nn.CrossEntropyLoss(), optim.SGD(model:parameters(), { lr = 0.01 })
      local function step()   -- 8 micro-batches of 8
        opt:zero_grad()
        for i = 1, 8 do crit(model(x:narrow(1, 8 * i - 7, 8)), y:narrow(1, 8 * i - 7, 8)):backward() end
        opt:step()
      end
      step()
      release_all()
      if limit_extra then assert.equal(0, C.ln_memory_set_limit(1, lunet.memory_allocated('cpu:1') + limit_extra)) end
      local before = lunet.collection_stats()
      local ok, err, collections = counting_collections(function()
        for _ = 1, 10 do step() end
        lunet.synchronize()
      end)
      C.ln_memory_set_limit(1, 0)
      assert.is_true(ok, err)
      -- (lunet.collection_stats counts them, with their seconds)
      local after = lunet.collection_stats()
      assert.equal(collections, after.count - before.count)
      assert.is_true(collections == 0 or after.seconds > before.seconds)
      return model:parameters()[1]:clone():to('cpu:0'), collections / 10
    end
    local w_free = run(nil)
    -- 2.5 MB over what stays allocated, where a step leaves about 3.6 MB of
    -- activations to the collector and holds up to 0.8 MB at once: collecting
    -- halfway from live to the limit, and for what queued work still held,
    -- it collected 7-8 times a step
    local w_tight, per_step = run(2.5 * 2 ^ 20)
    assert.is_true(per_step <= 4, tostring(per_step))
    assert.equal(0, (w_free - w_tight):abs():max():item())
    release_all()
  end)

  it("counts a pipeline stage's collections in lunet.collection_stats, with their seconds", function()
    release_all()
    local nn = lunet.nn
    -- 4 MB activations a micro-batch: the stages' trigger (their bytes grown by half and 8 MB) fires each step
    local model = nn.Sequential { nn.Linear(64, 64), nn.Tanh(), nn.Tanh(), nn.Tanh(), nn.Linear(64, 64) }
    local pipe = lunet.parallel.Pipeline(model, { devices = { 'cpu:1', 'cpu:2' }, chunks = 4, balance = { 2, 3 } })
    local x, y = lunet.randn(16384, 64), lunet.randn(16384, 64)
    pipe:forward_loss(nn.MSELoss(), x, y):backward()
    lunet.synchronize()
    local before = lunet.collection_stats()
    local ok, err, collections = counting_collections(function()
      for _ = 1, 3 do pipe:forward_loss(nn.MSELoss(), x, y):backward() end
      lunet.synchronize()
    end)
    assert.is_true(ok, err)
    local after = lunet.collection_stats()
    assert.is_true(collections >= 3, tostring(collections))
    assert.equal(collections, after.count - before.count)
    assert.is_true(after.seconds > before.seconds)
    -- (a copy: the caller's table does not move)
    before.count = -1
    assert.is_true(lunet.collection_stats().count >= after.count)
    pipe = nil
    release_all()
  end)

  it('under a memory limit, takes what is allocated as the most that can be live', function()
    release_all()
    local T = require 'lunet.tensor'
    local MB = 2 ^ 20
    local base = lunet.memory_allocated('cpu:1')
    assert.equal(0, C.ln_memory_set_limit(1, base + 8 * MB))
    local held = {}
    for i = 1, 7 do held[i] = lunet.zeros(256, 1024, {device = 'cpu:1'}) end
    lunet.synchronize()
    T.collect_rearm()   -- 7 MB live, 1 MB blocks
    T.free_now(held[7]); held[7] = nil
    local ok, err, collections = counting_collections(function()
      -- 6.5 MB allocated, at most that live: room is left for the largest
      -- block, so no collection (taken as nothing live, 6.5 MB was past the
      -- mark of 6 and it collected, for nothing)
      local half = lunet.zeros(128, 1024, {device = 'cpu:1'})
      lunet.synchronize()
    end)
    assert.is_true(ok, err)
    assert.equal(0, collections)
    held = nil
    release_all()
    assert.equal(0, C.ln_memory_set_limit(1, 0))
  end)

  it('under a memory limit, gives back only as many cached blocks as a new block needs', function()
    release_all()
    lunet.empty_cache('cpu:1')
    local MB = 2 ^ 20
    local base = lunet.memory_allocated('cpu:1')
    local ts = {}
    for i = 1, 4 do ts[i] = lunet.zeros(256, 1024, {device = 'cpu:1'}) end
    ts = nil
    release_all()
    assert.equal(4 * MB, lunet.memory_cached('cpu:1'))
    assert.equal(0, C.ln_memory_set_limit(1, base + 5 * MB))
    -- a 2 MB block (no cached one of its size) needs 1 MB of the 4 cached
    local big = lunet.zeros(512, 1024, {device = 'cpu:1'})
    lunet.synchronize()
    assert.equal(3 * MB, lunet.memory_cached('cpu:1'))
    assert.equal(base + 2 * MB, lunet.memory_allocated('cpu:1'))
    -- the blocks left are reused as before
    local again = lunet.zeros(256, 1024, {device = 'cpu:1'})
    assert.equal(2 * MB, lunet.memory_cached('cpu:1'))
    big, again = nil, nil
    release_all()
    assert.equal(0, C.ln_memory_set_limit(1, 0))
    lunet.empty_cache('cpu:1')
  end)

  it('counts the bytes handed out (never fewer) and the largest block since the limit or peak was set', function()
    release_all()
    local MB = 2 ^ 20
    local h0 = tonumber(C.ln_memory_handed_out(1))
    local a = lunet.zeros(256, 1024, {device = 'cpu:1'})
    local b = lunet.zeros(1024, {device = 'cpu:1'})
    assert.equal(h0 + MB + 4096, tonumber(C.ln_memory_handed_out(1)))
    a, b = nil, nil
    release_all()
    assert.equal(h0 + MB + 4096, tonumber(C.ln_memory_handed_out(1)))
    assert.is_true(tonumber(C.ln_memory_largest_block(1)) >= MB)
    assert.equal(0, C.ln_memory_set_limit(1, 64 * MB))
    assert.equal(0, tonumber(C.ln_memory_largest_block(1)))
    local c = lunet.zeros(1024, {device = 'cpu:1'})
    assert.equal(4096, tonumber(C.ln_memory_largest_block(1)))
    local d = lunet.zeros(128, 1024, {device = 'cpu:1'})
    assert.equal(0, C.ln_memory_reset_peak(1))
    assert.equal(0, tonumber(C.ln_memory_largest_block(1)))
    c, d = nil, nil
    assert.equal(0, C.ln_memory_set_limit(1, 0))
    assert.equal(-1, tonumber(C.ln_memory_handed_out(9)))
    assert.equal(-1, tonumber(C.ln_memory_largest_block(9)))
    assert.equal(-1, tonumber(C.ln_memory_settle(9, 0)))
  end)

  it('reuses cached blocks: no growth over a loop of same-shaped temporaries', function()
    local x = lunet.randn({256, 256}, {device = 'cpu:1'})
    local function step() local y = (x * 2 + 1):relu(); return y:sum():item() end  -- as loss:item()
    -- collect every step: the Lua GC does not see C memory, so it alone
    -- decides how many temporaries are alive at once
    for _ = 1, 5 do step(); collectgarbage() end
    release_all()
    local alloc, cached = lunet.memory_allocated('cpu:1'), lunet.memory_cached('cpu:1')
    assert.is_true(cached > 0)
    local peak_before = lunet.max_memory_allocated('cpu:1')
    for _ = 1, 50 do step(); collectgarbage() end
    release_all()
    assert.equal(alloc, lunet.memory_allocated('cpu:1'))
    assert.equal(cached, lunet.memory_cached('cpu:1'))
    assert.equal(peak_before, lunet.max_memory_allocated('cpu:1'))
    lunet.empty_cache('cpu:1')
    assert.equal(0, lunet.memory_cached('cpu:1'))
  end)

  it('refuses to shrink the device count while cpu:2 holds tensors', function()
    local keep = lunet.zeros(10, {device = 'cpu:2'})
    local ok, err = pcall(lunet.set_cpu_devices, 2)
    assert.is_false(ok)
    assert.matches('cpu:2 still holds', err, 1, true)
    assert.equal(3, lunet.device_count())
    assert.same(0, keep:sum():item())
  end)

  it('runs many small ops through the queue without losing order (queue wrap-around)', function()
    local t = lunet.zeros(1, {dtype = 'int64', device = 'cpu:2'})
    for i = 1, 500 do t:mul_(3):add_(i):fmod_(1000003) end
    local ref = 0
    for i = 1, 500 do ref = (ref * 3 + i) % 1000003 end
    assert.equal(ref, t:item())
  end)

  it('computes large outputs right (the streaming-store path), also through unaligned views', function()
    local n = 5 * 2 ^ 20 + 3                    -- > 16 MB of float32 output
    local a = lunet.arange(n, {dtype = 'float32', device = 'cpu:1'})
    local c = a:narrow(1, 2, n - 1) + lunet.ones(n - 1, {device = 'cpu:1'})
    assert.equal(0, (c - lunet.arange(2, n + 1, {dtype = 'float32', device = 'cpu:1'})):abs():max():item())
    assert.equal(0, (a:narrow(1, 3, n - 2):neg() + lunet.arange(2, n, {dtype = 'float32', device = 'cpu:1'})):abs():max():item())
    local d = a:double()
    assert.equal(n - 1, d[n]:item())
    assert.equal(12344, d[12345]:item())
    local g = lunet.empty(2 * n, {device = 'cpu:1'}):narrow(1, 2, n)
    g:copy_(a)
    assert.equal(0, (g - a):abs():max():item())
    local h = lunet.zeros(n, 2, {device = 'cpu:1'}):select(2, 1)
    h:copy_(a)
    assert.equal(0, (h - a):abs():max():item())
  end)

  it('threads per device can be changed and matmul results stay the same', function()
    local a = lunet.randn({64, 48}, {device = 'cpu:1', dtype = 'float64'})
    local b = lunet.randn({48, 32}, {device = 'cpu:1', dtype = 'float64'})
    local r1 = a:matmul(b):totable()
    local old = C.ln_device_threads(1)
    assert.equal(0, C.ln_set_device_threads(1, 1))
    assert.tensor_near(a:matmul(b), r1, 1e-12)
    assert.equal(0, C.ln_set_device_threads(1, old))
    assert.equal(-1, C.ln_set_device_threads(1, 0))
  end)
end)

describe('waiting for a stream', function()
  setup(function() release_all(); lunet.set_cpu_devices(12) end)
  teardown(function() release_all(); lunet.set_cpu_devices(1) end)

  -- each waiter sleeps on a condition variable of its own in one of 8 slots
  -- of the stream it waits for; waiters beyond those share one
  it('wakes every waiter, more of them than it has slots, when the task they wait for is done', function()
    lunet.synchronize()
    local gate, done = ffi.new('int[1]'), ffi.new('ln_event[1]')
    local after = ffi.new('ln_event[?]', 12)
    assert.equal(0, C.ln_stream_inject_gate(0, gate))        -- cpu:0 holds ...
    assert.equal(0, C.ln_stream_inject_opener(11, gate, 0.5)) -- ... until cpu:11 opens it
    local a = lunet.zeros(4, {device = 'cpu:0'}):fill_(7)
    assert.equal(0, C.ln_event_record(0, done))
    for d = 1, 10 do                                          -- 10 workers wait for cpu:0
      assert.equal(0, C.ln_event_wait(d, done))
      assert.equal(0, C.ln_event_record(d, after + d))
    end
    for d = 1, 10 do assert.equal(0, C.ln_event_query(after + d)) end   -- all held
    assert.equal(0, C.ln_event_synchronize(done))            -- and the host, the 11th
    assert.equal(1, gate[0])
    local deadline = lunet.clock() + 10
    local left
    repeat
      left = 0
      for d = 1, 10 do if C.ln_event_query(after + d) ~= 1 then left = left + 1 end end
    until left == 0 or lunet.clock() > deadline
    assert.equal(0, left)
    assert.same({7, 7, 7, 7}, a:totable())
  end)
end)

describe('LUNET_CPU_DEVICES from the environment', function()
  it('splits a fresh process into three devices', function()
    local root = root_dir()
    local lib = os.getenv('LUNET_LIB')
    local cmd = ([[cd '%s' && LUNET_CPU_DEVICES=3 %s LUA_PATH='%slua/?.lua;%slua/?/init.lua;;' luajit -e "
      local lunet = require 'lunet'
      local a = lunet.arange(4, {device = 'cpu:2'}):float() * 2
      io.write(#lunet.devices(), ' ', a:to('cpu:1'):sum():item(), ' ', lunet.C.ln_device_threads(0))" 2>&1]]):format(
      root, lib and ("LUNET_LIB='" .. lib .. "'") or '', root, root)
    local p = io.popen(cmd)
    local out = p:read('*a')
    p:close()
    local n, s, threads = out:match('^(%d+) (%d+) (%d+)')
    assert.equal('3', n, out)
    assert.equal('12', s)
    assert.is_true(tonumber(threads) >= 1)
  end)
end)

describe('the cores a process may run on, and OMP_NUM_THREADS', function()
  -- lunet's threads in a fresh process started with env and prefix (taskset)
  local function threads_in(env, prefix)
    local root = root_dir()
    local lib = os.getenv('LUNET_LIB')
    local cmd = ([[cd '%s' && %s %s LUA_PATH='%slua/?.lua;%slua/?/init.lua;;' %s luajit -e "
      local lunet = require 'lunet'
      io.write(lunet.C.ln_num_cores(), ' ', lunet.get_num_threads(), ' ', lunet.get_num_threads('cpu:' .. (#lunet.devices() - 1)))" 2>&1]]):format(
      root, env, lib and ("LUNET_LIB='" .. lib .. "'") or '', root, root, prefix or '')
    local p = io.popen(cmd)
    local out = p:read('*a')
    p:close()
    -- (the last line: libgomp warns of an OMP_NUM_THREADS it cannot read)
    local cores, first, last = out:match('(%d+) (%d+) (%d+)%s*$')
    assert.is_not_nil(cores, out)
    return tonumber(cores), tonumber(first), tonumber(last)
  end

  it('counts the cores of the affinity mask (taskset, a cpuset, mpirun --bind-to core), not every online one', function()
    local p = io.popen('command -v taskset')
    local have = p:read('*a'):match('taskset')
    p:close()
    if not have then pending('taskset is not installed (util-linux)') return end
    -- bound to one core: one thread (two on one core made small batches 4x slower)
    local cores, threads = threads_in('env -u OMP_NUM_THREADS', 'taskset -c 0')
    assert.equal(1, cores)
    assert.equal(1, threads)
  end)

  it('takes OMP_NUM_THREADS as each CPU device\'s thread count, as torch does', function()
    local _, first, last = threads_in('OMP_NUM_THREADS=3 LUNET_CPU_DEVICES=2')
    assert.equal(3, first)
    assert.equal(3, last)
    _, first = threads_in('OMP_NUM_THREADS=1')
    assert.equal(1, first)
    -- not a count: the share of the cores, as without it
    local cores
    cores, first = threads_in('OMP_NUM_THREADS=lots')
    assert.equal(cores, first)
  end)
end)

describe('set_flush_denormal', function()
  -- 2^18 rows of 4 denormal float32 values (made before the mode changes)
  -- summed per row (4e-39, still denormal): all kept with IEEE arithmetic, all
  -- 0 with FTZ/DAZ. The rows are split over the kernel threads, so every
  -- thread of the pool must have the mode; the nonzero sums are counted on
  -- the device (the host's own conversion of a denormal to a Lua number would
  -- flush it there)
  local ROWS = 262144
  local function kept(x) return x:sum(2):ne(0):sum():item() end

  after_each(function()
    lunet.set_flush_denormal(false)
    lunet.set_cpu_devices(1)
  end)

  it('flushes denormals in the host thread and its pool, also in threads it starts later', function()
    local old = C.ln_device_threads(0)
    assert.equal(0, C.ln_set_device_threads(0, 3))
    local x = lunet.full({ROWS, 4}, 1e-39)
    assert.equal(ROWS, kept(x), 'IEEE: denormal results kept')
    assert.is_false(lunet.flush_denormal())
    assert.is_true(lunet.set_flush_denormal(true))
    assert.is_true(lunet.flush_denormal())
    assert.equal(0, kept(x))
    assert.equal(0, C.ln_set_device_threads(0, 5))   -- a bigger pool: new threads
    assert.equal(0, kept(x))
    assert.is_true(lunet.set_flush_denormal(false))
    assert.equal(ROWS, kept(x), 'IEEE again')
    assert.equal(0, C.ln_set_device_threads(0, old))
  end)

  it('reaches the stream workers of virtual devices and their pools before their next task', function()
    lunet.set_cpu_devices(2)
    assert.equal(0, C.ln_set_device_threads(1, 3))
    local x = lunet.full({ROWS, 4}, 1e-39, {device = 'cpu:1'})
    assert.equal(ROWS, kept(x))
    lunet.set_flush_denormal(true)
    assert.equal(0, kept(x))
    -- an all-reduce on the communication streams flushes too
    local a = lunet.full({4096}, 1e-39, {device = 'cpu:0'})
    local b = lunet.full({4096}, 1e-39, {device = 'cpu:1'})
    local comm = lunet.comm.Communicator({'cpu:0', 'cpu:1'})
    comm:allreduce({a, b}, {op = 'avg', async = true})
    comm:wait()
    assert.equal(0, b:ne(0):sum():item())
    comm = nil
    lunet.set_flush_denormal(false)
    assert.equal(ROWS, kept(x))
  end)

  it('rejects a non-boolean', function()
    assert.has_error(function() lunet.set_flush_denormal(1) end, 'set_flush_denormal: expected a boolean, got number')
  end)
end)

describe('process exit with work still queued on virtual devices', function()
  -- a child trains a ResNet-8 step under DataParallel on 2 devices and ends
  -- at once, the backward still queued (oneDNN convolutions on cpu:1): before
  -- the streams were drained at exit, the workers ran on while exit() tore
  -- down oneDNN's globals, and most such runs died of SIGSEGV
  local function run_child(ending)
    local root = root_dir()
    local lib = os.getenv('LUNET_LIB')
    local script = os.tmpname()
    local f = assert(io.open(script, 'w'))
    f:write(([[
package.path = '%sbench/?.lua;' .. package.path
local lunet = require 'lunet'
lunet.set_cpu_devices(2)
local m = require('models').resnet8.build(lunet.nn)
local dp = lunet.parallel.DataParallel(m)
local x, y = lunet.randn(16, 3, 32, 32), lunet.randint(1, 11, {16})
lunet.nn.CrossEntropyLoss()(dp(x), y):backward()
io.write('queued\n')
%s
]]):format(root, ending))
    f:close()
    local cmd = ("cd '%s' && %s LUA_PATH='%slua/?.lua;%slua/?/init.lua;;' luajit %s 2>&1; echo \"rc=$?\""):format(
      root, lib and ("LUNET_LIB='" .. lib .. "'") or '', root, root, script)
    local p = io.popen(cmd)
    local out = p:read('*a')
    p:close()
    os.remove(script)
    return out
  end

  for _, case in ipairs({{'the end of the script', ''}, {'os.exit(0)', 'os.exit(0)'},
                         {'an error', "error('stop here')"}}) do
    it('exits cleanly at ' .. case[1] .. ' (5 runs)', function()
      for _ = 1, 5 do
        local out = run_child(case[2])
        assert.truthy(out:find('queued', 1, true), out)
        local want = case[2]:find('error') and 'rc=1' or 'rc=0'
        assert.truthy(out:find(want, 1, true), out)
      end
    end)
  end

  it('drain gives up after its timeout on a stream that is held, and says so', function()
    lunet.set_cpu_devices(2)
    local gate = ffi.new('int[1]')
    assert.equal(0, C.ln_stream_inject_gate(1, gate))
    local t0 = lunet.clock()
    assert.equal(-1, C.ln_drain(0.2))
    assert.is_true(lunet.clock() - t0 < 5)
    assert.matches('drain: cpu:1 still has 1 tasks queued after 0.2 s', ffi.string(C.ln_last_error()), 1, true)
    gate[0] = 1
    lunet.synchronize()
    assert.equal(0, C.ln_drain(1))
    lunet.set_cpu_devices(1)
  end)
end)
