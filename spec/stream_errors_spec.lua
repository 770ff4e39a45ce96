-- Errors inside device streams are raised in Lua once, naming the op, and
-- then the devices work again (issue 21, class 7): a failure that reaches
-- other streams (event waits, aborted collectives) is one failure, not one
-- per stream; work queued before it was raised is still skipped, work queued
-- after runs.
local lunet = require 'lunet'
local ffi = require 'ffi'
local nn, optim = lunet.nn, lunet.optim
local C = lunet.C
-- fault injection (ln_stream_inject_*): c/include/lunet_internal.h
if not pcall(ffi.typeof, 'ln_rec_stats') then ffi.cdef(require 'lunet.cdef_internal') end

local function release_devices()
  jit.flush()
  for _ = 1, 4 do collectgarbage() end
  pcall(lunet.synchronize)
  lunet.set_cpu_devices(1)
end

local function model()
  return nn.Sequential { nn.Conv2d(3, 4, 3, { padding = 1 }), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 5) }
end

-- 6 samples, classes 1..5; `bad` (a sample index) gets class 11
local function batch(bad)
  local y = lunet.randint(1, 6, { 6 }):totable()
  if bad then y[bad] = 11 end
  return lunet.randn(6, 3, 8, 8), lunet.tensor(y, { dtype = 'int64' })
end

local max_rel = require('support.fixtures').max_rel

local function assert_identical(dp)
  for k = 2, dp.n do
    for i, t in ipairs(dp.params[k]) do
      assert.is_true(t:to('cpu:0'):eq(dp.params[1][i]):all():item(),
        ('parameter %d of replica %d differs from replica 1'):format(i, k))
    end
  end
end

describe('stream errors are raised once', function()
  setup(function() lunet.set_cpu_devices(3) end)
  teardown(release_devices)

  -- DataParallel on 3 devices, the loss on each replica's shard (as fit
  -- trains it) or on the gathered output: step 2 has one bad label, on the
  -- device `bad_dev` (0-based); steps 1, 3, 4 match a reference trained on
  -- one device without step 2, and the replicas stay identical
  for _, case in ipairs({ { floss = true, bad_dev = 1 }, { floss = true, bad_dev = 2 }, { floss = false, bad_dev = 1 } }) do
    local how = case.floss and 'forward_loss' or 'a loss on the gathered output'
    it(('DataParallel (%s): a bad label on cpu:%d fails one step, once; the next steps train and the replicas agree')
        :format(how, case.bad_dev), function()
      lunet.manual_seed(7)
      local net = model()
      local ref = net:clone()
      local dp = lunet.parallel.DataParallel(net, { devices = { 'cpu:0', 'cpu:1', 'cpu:2' }, bucket_mb = 0.001 })
      local ro, dpo = optim.SGD(ref:parameters(), { lr = 0.1 }), optim.SGD(dp:parameters(), { lr = 0.1 })
      local crit = nn.CrossEntropyLoss()
      local function dp_step(x, y)
        dpo:zero_grad()
        local loss = case.floss and dp:forward_loss(crit, x, y) or crit(dp(x), y)
        loss:backward()
        dpo:step()
        return loss:item()
      end
      local function ref_step(x, y)
        ro:zero_grad()
        local loss = crit(ref(x), y)
        loss:backward()
        ro:step()
        return loss:item()
      end
      for step = 1, 4 do
        local x, y = batch(step == 2 and case.bad_dev * 2 + 1 or nil)   -- 2 samples a device
        if step == 2 then
          local ok, err = pcall(dp_step, x, y)
          assert.is_false(ok)
          -- (forward_loss: the sample's index in the replica's shard)
          local sample = case.floss and 1 or case.bad_dev * 2 + 1
          assert.matches('nll_loss: target 11 (sample ' .. sample .. ')', tostring(err), 1, true)
          assert.matches('cpu:' .. (case.floss and case.bad_dev or 0), tostring(err), 1, true)
          -- raised once: no device holds it any more
          assert.has_no.errors(function() lunet.synchronize() end)
          for d = 0, 2 do assert.has_no.errors(function() lunet.synchronize('cpu:' .. d) end) end
        else
          local a, b = dp_step(x, y), ref_step(x, y)
          assert.is_true(math.abs(a - b) <= 1e-5 * math.abs(b), ('step %d: loss %g, reference %g'):format(step, a, b))
        end
      end
      assert.is_true(max_rel(dp:parameters(), ref:parameters()) <= 1e-5)
      assert_identical(dp)
    end)
  end

  it('a failure copied through an event wait is raised once, then both devices work', function()
    local a = lunet.ones(1000, { device = 'cpu:1' })
    assert.equal(0, C.ln_stream_inject_error(1, 'source broke'))
    local b = a:to('cpu:2')                              -- cpu:2 waits for the skipped copy
    local ok, err = pcall(function() return b:totable() end)
    assert.is_false(ok)
    assert.matches('event_wait: cpu:1, whose work this waits for, failed: source broke (in inject_error, cpu:1)', err, 1, true)
    assert.has_no.errors(function() lunet.synchronize('cpu:1') end)
    assert.has_no.errors(function() lunet.synchronize('cpu:2') end)
    local c = a:to('cpu:2')                              -- events waited on after the report do not fail
    c:add_(1)
    assert.equal(2000, c:sum():item())
    assert.equal(1000, a:sum():item())
  end)

  it('raised from the source device first, the copy on the destination does not raise it again', function()
    local a = lunet.ones(1000, { device = 'cpu:1' })
    assert.equal(0, C.ln_stream_inject_error(1, 'source broke'))
    local b = a:to('cpu:2')
    local ok, err = pcall(lunet.synchronize, 'cpu:1')
    assert.is_false(ok)
    assert.matches('source broke (in inject_error, cpu:1)', err, 1, true)
    assert.has_no.errors(function() lunet.synchronize('cpu:2') end)
    b = a:to('cpu:2')
    assert.equal(1000, b:sum():item())
  end)

  it('work queued before the report that meets the failure later is skipped, silently', function()
    local a = lunet.ones(100, { device = 'cpu:1' })
    local b = lunet.ones(100, { device = 'cpu:2' })
    lunet.synchronize()
    local gate = ffi.new('int[1]')
    assert.equal(0, C.ln_stream_inject_gate(2, gate))      -- cpu:2 holds here
    assert.equal(0, C.ln_stream_inject_error(1, 'late'))
    a:add_(1)                                              -- skipped on cpu:1
    local ev = ffi.new('ln_event[1]')
    assert.equal(0, C.ln_event_record(1, ev))
    assert.equal(0, C.ln_event_wait(2, ev))                -- queued on cpu:2 behind the gate
    b:add_(5)                                              -- part of the failed work: skipped
    local ok, err = pcall(lunet.synchronize, 'cpu:1')      -- raised here, while cpu:2 still holds
    assert.is_false(ok)
    assert.matches('late (in inject_error, cpu:1)', err, 1, true)
    gate[0] = 1
    assert.has_no.errors(function() lunet.synchronize() end)   -- not raised a second time
    assert.equal(100, b:sum():item())                       -- b:add_(5) was skipped
    b:add_(1)                                               -- queued after the report: runs
    assert.equal(200, b:sum():item())
    assert.equal(100, a:sum():item())
    a:add_(1)
    assert.equal(200, a:sum():item())
  end)

  it('an event recorded after a failure and synchronised after its report does not fail', function()
    local a = lunet.ones(100, { device = 'cpu:1' })
    assert.equal(0, C.ln_stream_inject_error(1, 'old news'))
    local ev = ffi.new('ln_event[1]')
    assert.equal(0, C.ln_event_record(1, ev))
    assert.has_error(function() lunet.synchronize('cpu:1') end)
    assert.equal(0, C.ln_event_synchronize(ev))
    assert.equal(0, C.ln_event_wait(2, ev))
    assert.has_no.errors(function() lunet.synchronize() end)
    assert.equal(100, a:sum():item())
  end)

  it('event_synchronize raises a producer failure once', function()
    assert.equal(0, C.ln_stream_inject_error(2, 'boom'))
    local ev = ffi.new('ln_event[1]')
    assert.equal(0, C.ln_event_record(2, ev))
    assert.equal(-1, C.ln_event_synchronize(ev))
    assert.matches('event_synchronize: cpu:2, whose work this waits for, failed: boom', ffi.string(C.ln_last_error()), 1, true)
    assert.equal(0, C.ln_event_synchronize(ev))
    assert.has_no.errors(function() lunet.synchronize() end)
  end)

  it('two unrelated failures on two devices are each raised once', function()
    assert.equal(0, C.ln_stream_inject_error(1, 'first'))
    assert.equal(0, C.ln_stream_inject_error(2, 'second'))
    local ok1, e1 = pcall(lunet.synchronize, 'cpu:1')
    local ok2, e2 = pcall(lunet.synchronize, 'cpu:2')
    assert.is_false(ok1); assert.is_false(ok2)
    assert.matches('first (in inject_error, cpu:1)', e1, 1, true)
    assert.matches('second (in inject_error, cpu:2)', e2, 1, true)
    assert.has_no.errors(function() lunet.synchronize() end)
  end)

  it('a collective aborted by a failed rank is one failure with it', function()
    local cm = lunet.comm.Communicator({ 'cpu:0', 'cpu:1', 'cpu:2' })
    local ts = {}
    for d = 0, 2 do ts[d + 1] = lunet.full({ 64 }, d + 1, { device = 'cpu:' .. d }) end
    assert.equal(0, C.ln_stream_inject_error(2, 'rank down'))
    cm:allreduce(ts)
    local ok, err = pcall(lunet.synchronize, 'cpu:1')
    assert.is_false(ok)
    assert.matches('allreduce: aborted: rank 2 (cpu:2) failed earlier: rank down', err, 1, true)
    assert.has_no.errors(function() lunet.synchronize() end)
    cm:allreduce(ts)
    for d = 1, 3 do assert.equal(6 * 64, ts[d]:sum():item()) end
  end)
end)
