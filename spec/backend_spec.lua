-- A device type is a backend (issue 17): the spec-only "rec" backend
-- (c/cpu/rec_backend.c) registers a second device type whose runtime counts
-- every call: tensors on rec:N are allocated, computed, copied to and from
-- the host, ordered and synchronised through its runtime and kernel table,
-- and an op it lacks is a named error, never a NULL call.
local lunet = require 'lunet'
local ffi = require 'ffi'
local C = lunet.C
local core = require 'lunet.core'

if not pcall(ffi.typeof, 'ln_rec_stats') then ffi.cdef(require 'lunet.cdef_internal') end

local function stats()
  local s = ffi.new('ln_rec_stats')
  assert.equal(0, C.ln_test_rec_stats(s))
  local t = {}
  for _, k in ipairs({ 'allocs', 'frees', 'alloc_bytes', 'free_bytes', 'launches', 'event_records',
    'event_waits', 'event_queries', 'event_syncs', 'syncs', 'copies_to_host', 'copies_from_host', 'copies_peer', 'workspace_queries' }) do
    t[k] = tonumber(s[k])
  end
  return t
end

-- ops launched on rec devices since launch number `from`
local function ops_since(from)
  local list, s = {}, stats()
  for i = from, s.launches - 1 do list[#list + 1] = ffi.string(C.ln_test_rec_op(i)) end
  return list
end

local function has(list, x)
  for _, v in ipairs(list) do if v == x then return true end end
  return false
end

describe('backends: the spec-only rec device type', function()
  setup(function()
    assert.equal(0, C.ln_test_rec_register(2, 1))    -- rec:0, rec:1, each with a worker thread
  end)
  teardown(function()
    jit.flush()
    for _ = 1, 3 do collectgarbage() end
    lunet.synchronize()
  end)

  it('names its devices; a device it does not have is a named error', function()
    local t = lunet.zeros(3, { device = 'rec:1' })
    assert.equal('rec:1', t.device)
    assert.equal('rec', ffi.string(C.ln_device_type_name(t.device_id)))
    local ok, err = pcall(lunet.zeros, 3, { device = 'rec:2' })
    assert.is_false(ok)
    assert.matches('no device rec:2 (there are 2)', err, 1, true)
    ok, err = pcall(lunet.zeros, 3, { device = 'nosuch:0' })
    assert.is_false(ok)
    assert.matches("unknown device type 'nosuch'", err, 1, true)
  end)

  it('allocates through its runtime and computes with its kernel table on its own stream', function()
    lunet.synchronize()
    local s0 = stats()
    local a = lunet.full({ 1000 }, 2, { device = 'rec:0' })
    local b = lunet.arange(1000, { dtype = 'float32', device = 'rec:0' })
    local c = a * b + 1
    assert.equal('rec:0', c.device)
    local s1 = stats()
    assert.is_true(s1.allocs >= s0.allocs + 3, 'allocations went through rec')
    assert.is_true(s1.alloc_bytes - s0.alloc_bytes >= 3 * 4000)
    local ops = ops_since(s0.launches)
    assert.is_true(has(ops, 'mul') and has(ops, 'add'), table.concat(ops, ' '))
    assert.equal(2 * 999 + 1, c[1000]:item())           -- read: synchronised through rec
    assert.is_true(stats().syncs > s1.syncs)
  end)

  it('copies between host and device memory through its runtime', function()
    local s0 = stats()
    local buf = ffi.new('float[6]', { 1, 2, 3, 4, 5, 6 })
    local t = lunet.from_buffer(buf, { 2, 3 }, 'float32', 'rec:0')               -- host -> device
    local s1 = stats()
    assert.equal(s0.copies_from_host + 1, s1.copies_from_host)
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, t:totable())                      -- device -> host
    local s2 = stats()
    assert.equal(s1.copies_to_host + 1, s2.copies_to_host)
    assert.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, t:t():totable())              -- strided: made contiguous on rec:0 first
    assert.equal(s2.copies_to_host + 1, stats().copies_to_host)
    assert.is_true(has(ops_since(s2.launches), 'copy_'), table.concat(ops_since(s2.launches), ' '))
    assert.equal(5, t[2][2]:item())
  end)

  it('orders copies between device types with its events', function()
    lunet.set_cpu_devices(2)
    local s0 = stats()
    local x = lunet.arange(500, { dtype = 'float32', device = 'cpu:1' })
    local y = x:to('rec:1')                                 -- cpu:1 copies; rec:1 waits on its event
    y:mul_(3)
    local z = y:to('cpu:0')                                 -- rec:1 copies; cpu:0 waits on rec's event
    assert.equal(3 * 499, z[500]:item())
    local s1 = stats()
    assert.is_true(s1.event_waits > s0.event_waits, 'rec:1 waited through its runtime')
    assert.is_true(s1.event_records > s0.event_records, 'rec:1 recorded through its runtime')
    assert.is_true(has(ops_since(s0.launches), 'mul') and has(ops_since(s0.launches), 'copy_'), table.concat(ops_since(s0.launches), ' '))
    local ev = ffi.new('ln_event[1]')
    assert.equal(0, C.ln_event_record(core.device_id('t', 'rec:0'), ev))
    assert.equal(1, C.ln_event_query(ev) >= 0 and 1 or 0)
    assert.equal(0, C.ln_event_synchronize(ev))
    local s2 = stats()
    assert.equal(s1.event_queries + 1, s2.event_queries)
    assert.equal(s1.event_syncs + 1, s2.event_syncs)
    x, y, z = nil, nil, nil
    jit.flush(); collectgarbage(); collectgarbage()
    lunet.synchronize()
    lunet.set_cpu_devices(1)
  end)

  it('copies between two of its devices through its runtime\'s copy_peer, in stream order', function()
    local s0 = stats()
    local x = lunet.arange(1000, { dtype = 'float32', device = 'rec:0' })
    x:mul_(2)                                               -- queued on rec:0 before the copy
    local y = x:to('rec:1')                                 -- bytes only: rec:0's stream runs copy_peer
    y:add_(1)                                               -- rec:1 waits for the copy
    assert.equal(2 * 999 + 1, y[1000]:item())
    assert.equal(1, y[1]:item())
    local s1 = stats()
    assert.equal(s0.copies_peer + 1, s1.copies_peer)
    assert.is_true(s1.event_waits > s0.event_waits, 'rec:1 waited for the copy through its runtime')
    -- a copy that casts or reads a strided view is the copy kernel's (copy_peer moves bytes)
    local z = lunet.zeros({ 2, 3 }, { device = 'rec:1' })
    z:copy_(lunet.arange(6, { dtype = 'float32', device = 'rec:0' }):reshape(3, 2):t())
    local w = lunet.zeros(1000, { dtype = 'float64', device = 'rec:1' }):copy_(x)
    assert.same({ { 0, 2, 4 }, { 1, 3, 5 } }, z:totable())
    assert.equal(2 * 999, w[1000]:item())
    assert.equal(s1.copies_peer, stats().copies_peer)
    -- between device types, or on the CPU (one host memory), there is no peer copy
    lunet.set_cpu_devices(2)
    local c = lunet.arange(10, { dtype = 'float32' }):to('cpu:1'):to('rec:0'):to('cpu:0')
    assert.equal(9, c[10]:item())
    assert.equal(s1.copies_peer, stats().copies_peer)
    x, y, z, w, c = nil, nil, nil, nil, nil
    jit.flush(); collectgarbage(); collectgarbage()
    lunet.synchronize()
    lunet.set_cpu_devices(1)
  end)

  it('returns memory to its runtime: empty_cache frees what the cache held', function()
    lunet.synchronize()
    local id = core.device_id('t', 'rec:0')
    do local t = lunet.ones(4096, { device = 'rec:0' }); t:add_(1) end
    jit.flush(); collectgarbage(); collectgarbage()
    lunet.synchronize()
    local s0 = stats()
    assert.is_true(C.ln_memory_cached(id) > 0)
    assert.equal(0, C.ln_empty_cache(id))
    assert.equal(0, C.ln_memory_cached(id))
    assert.is_true(stats().frees > s0.frees, 'freed through rec')
  end)

  it('an op it has no kernel for is a named error, not a NULL call', function()
    local x = lunet.randn(1, 3, 8, 8):to('rec:0')
    local w = lunet.randn(4, 3, 3, 3):to('rec:0')
    local s0 = stats()
    local ok, err = pcall(lunet.nn.functional.conv2d, x, w)
    assert.is_false(ok)
    assert.matches('conv2d: rec:0 has no kernel for', tostring(err), 1, true)
    -- (with no nn planner, the front end sized its scratch through the runtime first)
    local s1 = stats()
    assert.equal(s0.workspace_queries + 1, s1.workspace_queries)
    local g = lunet.randn(1, 4, 6, 6):to('rec:0')
    ok, err = pcall(C.ln_conv2d_backward, nil, w.p, nil, g.p, x.p, w.p, ffi.new('ln_conv2d_params', 1, 1, 0, 0, 1, 1, 1))
    assert.equal(-1, err)
    assert.matches('conv2d_backward: rec:0 has no kernel for', core.last_error(), 1, true)
    assert.equal(s1.workspace_queries + 1, stats().workspace_queries)
    -- a dtype it refuses (supports): float64 binary ops
    local a = lunet.ones(4, { dtype = 'float64', device = 'rec:0' })
    ok, err = pcall(function() return a + a end)
    assert.is_false(ok)
    assert.matches('add: rec:0 has no float64 kernel for binary', err, 1, true)
    -- float32 still runs, and the device is fine after the errors
    local b = lunet.ones(4, { device = 'rec:0' })
    assert.same({ 2, 2, 2, 2 }, (b + b):totable())
    assert.has_no.errors(function() lunet.synchronize() end)
  end)

  it('a failure in its stream is raised once, naming the op and the device', function()
    local id = core.device_id('t', 'rec:1')
    local a = lunet.ones(10, { device = 'rec:1' })
    assert.equal(0, C.ln_stream_inject_error(id, 'rec kernel broke'))
    a:add_(1)                                             -- skipped
    local ok, err = pcall(function() return a:sum():item() end)
    assert.is_false(ok)
    assert.matches('rec kernel broke (in inject_error, rec:1)', err, 1, true)
    assert.has_no.errors(function() lunet.synchronize() end)
    assert.equal(10, a:sum():item())
  end)
end)
