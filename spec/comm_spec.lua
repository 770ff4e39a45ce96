-- Collectives over virtual CPU devices (the local backend): results against
-- single-device references, compression tolerances, ordering on the streams,
-- argument errors, aborting when a device failed earlier, and process groups
-- (groups of one world sharing its ranks; a Reducer per group).
local lunet = require 'lunet'
local ffi = require 'ffi'
local C = lunet.C
-- the nccl backend (liblunet_cuda.so) takes cuda devices only; without that
-- library (make CUDA=0, LUNET_CUDA=0) it is not there, and says why
local cuda_why = C.ln_cuda_reason() ~= nil and ffi.string(C.ln_cuda_reason()) or ''
local NCCL_CPU = (cuda_why:find('did not load', 1, true) or cuda_why:find('LUNET_CUDA=0', 1, true))
  and "backend 'nccl' needs the CUDA backend, which is not available"
  or "comm_new: device 1 is cpu:0; backend 'nccl' takes cuda devices only"
-- fault injection (ln_stream_inject_*): c/include/lunet_internal.h
if not pcall(ffi.typeof, 'ln_rec_stats') then ffi.cdef(require 'lunet.cdef_internal') end

local function release_all()
  collectgarbage(); collectgarbage()
  lunet.synchronize()
end

local function devs(n)
  local d = {}
  for i = 1, n do d[i] = 'cpu:' .. (i - 1) end
  return d
end

-- per-rank random tensors and their single-device sum in rank order
local function make_inputs(n, numel, dtype)
  local ts, ref = {}, nil
  for i = 1, n do
    local t = lunet.randn({numel}, {dtype = dtype or 'float32'})
    ref = ref and ref + t or t:clone()
    ts[i] = t:to('cpu:' .. (i - 1))
  end
  return ts, ref
end

describe('collectives (local backend)', function()
  setup(function()
    release_all()
    lunet.set_cpu_devices(4)
    lunet.manual_seed(7)
  end)

  teardown(function()
    release_all()
    lunet.set_cpu_devices(1)
  end)

  it('builds communicators and names them', function()
    local cm = lunet.comm.Communicator()
    assert.equal(4, cm:size())
    assert.same(devs(4), cm:devices())
    assert.equal('local', cm:backend())
    assert.equal('Communicator(local: cpu:0, cpu:1, cpu:2, cpu:3)', tostring(cm))
  end)

  for _, n in ipairs({2, 3, 4}) do
    it(('allreduce sum equals the single-device sum on %d devices, odd sizes'):format(n), function()
      local cm = lunet.comm.Communicator(devs(n))
      for _, numel in ipairs({1, 7, 1001, 65537}) do
        local ts, ref = make_inputs(n, numel)
        cm:allreduce(ts)
        for i = 1, n do
          assert.equal('cpu:' .. (i - 1), ts[i].device)
          assert.same(ref:totable(), ts[i]:to('cpu:0'):totable())   -- same order: exact
        end
      end
    end)
  end

  it('allreduce avg, max and min, float32 and float64', function()
    local cm = lunet.comm.Communicator(devs(3))
    for _, dt in ipairs({'float32', 'float64'}) do
      local ts, ref = make_inputs(3, 513, dt)
      local host = {}
      for i = 1, 3 do host[i] = ts[i]:to('cpu:0') end
      local mx = host[1]:maximum(host[2]):maximum(host[3])
      local mn = host[1]:minimum(host[2]):minimum(host[3])
      local a, b = {}, {}
      for i = 1, 3 do a[i] = ts[i]:clone(); b[i] = ts[i]:clone() end
      cm:allreduce(ts, {op = 'avg'})
      cm:allreduce(a, {op = 'max'})
      cm:allreduce(b, {op = 'min'})
      for i = 1, 3 do
        assert.same((ref / 3):totable(), ts[i]:to('cpu:0'):totable())
        assert.same(mx:totable(), a[i]:to('cpu:0'):totable())
        assert.same(mn:totable(), b[i]:to('cpu:0'):totable())
        assert.equal(dt, ts[i].dtype)
      end
    end
  end)

  -- unit roundoff u: bfloat16 keeps 8 significant bits (u = 2^-8), float16 11 (u = 2^-11)
  for _, case in ipairs({{'bf16', 2 ^ -8}, {'fp16', 2 ^ -11}}) do
    local wire, u = case[1], case[2]
    it(('allreduce with %s compression stays within two roundings and agrees on all ranks'):format(wire), function()
      local cm = lunet.comm.Communicator(devs(4))
      local ts, ref = make_inputs(4, 4099)
      local absum = ts[1]:to('cpu:0'):abs()
      for i = 2, 4 do absum = absum + ts[i]:to('cpu:0'):abs() end
      cm:allreduce(ts, {compress = wire})
      local r1 = ts[1]:to('cpu:0')
      -- inputs rounded once (u relative each), the sum rounded once more,
      -- plus float32 summation error
      local err = (r1 - ref):abs()
      local bound = absum * (u + 1e-6) + ref:abs() * u + 1e-7
      assert.is_true((err - bound):max():item() <= 0, wire .. ' error beyond bound')
      assert.is_true(err:max():item() > 0, 'no rounding happened: was the wire really ' .. wire .. '?')
      for i = 2, 4 do assert.same(r1:totable(), ts[i]:to('cpu:0'):totable()) end
      -- the result is exactly representable in the wire format
      local rt = r1:to(wire == 'bf16' and 'bfloat16' or 'float16'):to('float32')
      assert.same(r1:totable(), rt:totable())
    end)
  end

  -- the wire path's exact semantics, from an independent reference: every
  -- input rounded to the wire format, summed in rank order in float32, the
  -- average divided, the result rounded again; every rank gets the same bits
  for _, wire in ipairs({'bf16', 'fp16'}) do
    it(('allreduce with %s compression equals the rounded single-device reference exactly'):format(wire), function()
      local wdt = wire == 'bf16' and 'bfloat16' or 'float16'
      for _, n in ipairs({2, 3, 4}) do
        local cm = lunet.comm.Communicator(devs(n))
        for _, numel in ipairs({2, 16 * n - 1, 2048 * n + 5}) do
          for _, op in ipairs({'sum', 'avg'}) do
            local ts, ref = {}, nil
            for i = 1, n do
              local t = lunet.randn({numel}) * 3
              local r = t:to(wdt):to('float32')
              ref = ref and ref + r or r
              ts[i] = t:to('cpu:' .. (i - 1))
            end
            if op == 'avg' then ref = ref / n end
            ref = ref:to(wdt):to('float32')
            cm:allreduce(ts, {op = op, compress = wire})
            for i = 1, n do
              local got = ts[i]:to('cpu:0')
              assert.equal(0, (got - ref):abs():max():item(),
                ('%s %s, %d devices, %d elements, rank %d'):format(wire, op, n, numel, i))
            end
          end
        end
      end
    end)
  end

  -- special values through the wire rounding: NaN (quiet, either sign), the
  -- infinities, signed zeros, ties to even either way, the largest float
  -- (to infinity) and denormals, against the tensor cast to the wire dtype
  it('allreduce compression rounds special values as a cast to the wire dtype does', function()
    local vals = {0 / 0, -(0 / 0), 1 / 0, -1 / 0, 0, -0.0, 1 + 2 ^ -8, 1 + 3 * 2 ^ -8, -(1 + 2 ^ -8),
      1 + 2 ^ -11, 1 + 3 * 2 ^ -11, 3.4028234663852886e38, 2 ^ -130, -2 ^ -140, 65504, 65520, 1e-8}
    local cm = lunet.comm.Communicator(devs(2))
    for _, wire in ipairs({'bf16', 'fp16'}) do
      local a = lunet.tensor(vals, {dtype = 'float32'})
      local want = a:to(wire == 'bf16' and 'bfloat16' or 'float16'):to('float32')
      local b = lunet.zeros({#vals}, {device = 'cpu:1'})
      cm:allreduce({a, b}, {op = 'sum', compress = wire})
      for _, got in ipairs({a, b:to('cpu:0')}) do
        local g, w = got:totable(), want:totable()
        for i = 1, #vals do
          if w[i] ~= w[i] then
            assert.is_true(g[i] ~= g[i], ('%s: %s should stay NaN, got %s'):format(wire, vals[i], g[i]))
          else
            assert.equal(w[i], g[i], ('%s: %.17g'):format(wire, vals[i]))
          end
        end
      end
    end
  end)

  it('allreduce: sizes around the chunk, block and thread-grain boundaries, and fewer elements than ranks', function()
    for _, n in ipairs({2, 3, 4}) do
      local cm = lunet.comm.Communicator(devs(n))
      for _, numel in ipairs({2, 3, 15, 16, 17, 16 * n - 1, 16 * n + 1, 2047, 2049, 32768 * n + 7, 131075}) do
        local ts, ref = make_inputs(n, numel)
        cm:allreduce(ts)
        for i = 1, n do
          assert.equal(0, (ts[i]:to('cpu:0') - ref):abs():max():item(), ('%d devices, %d elements'):format(n, numel))
        end
      end
    end
  end)

  it('allreduce of views at different offsets (unaligned, different on each rank)', function()
    local n = 3
    local cm = lunet.comm.Communicator(devs(n))
    local numel, pad = 5000, 8
    local ts, ref, bases, before = {}, nil, {}, {}
    for i = 1, n do
      bases[i] = lunet.randn({numel + pad}):to('cpu:' .. (i - 1))
      before[i] = bases[i]:to('cpu:0')
      ts[i] = bases[i]:narrow(1, i, numel)          -- starts i - 1 elements in
      local v = ts[i]:to('cpu:0')
      ref = ref and ref + v or v
    end
    cm:allreduce(ts)
    for i = 1, n do
      local after = bases[i]:to('cpu:0')
      assert.equal(0, (after:narrow(1, i, numel) - ref):abs():max():item())
      -- the elements around the view are untouched
      if i > 1 then assert.same(before[i]:narrow(1, 1, i - 1):totable(), after:narrow(1, 1, i - 1):totable()) end
      local tail = pad - (i - 1)
      assert.same(before[i]:narrow(1, i + numel, tail):totable(), after:narrow(1, i + numel, tail):totable())
    end
  end)

  it('a large allreduce (16 MB per rank) and a large reduce_scatter (non-temporal output) are exact', function()
    local cm = lunet.comm.Communicator(devs(2))
    local numel = 4 * 1048576 + 5
    local ts, ref = make_inputs(2, numel)
    cm:allreduce(ts)
    for i = 1, 2 do assert.equal(0, (ts[i]:to('cpu:0') - ref):abs():max():item()) end
    local m = 4 * 1048576 + 3
    local ins, rs = make_inputs(2, 2 * m)
    local outs = cm:reduce_scatter(ins)
    for i = 1, 2 do
      assert.equal(0, (outs[i]:to('cpu:0') - rs:narrow(1, (i - 1) * m + 1, m)):abs():max():item())
    end
    ts, ins, outs = nil, nil, nil
    release_all()
  end)

  it('broadcast from a root given by position or device name', function()
    local cm = lunet.comm.Communicator(devs(3))
    local ts = make_inputs(3, 777, 'float64')
    local want = ts[2]:to('cpu:0'):totable()
    cm:broadcast(ts, {root = 2})
    for i = 1, 3 do assert.same(want, ts[i]:to('cpu:0'):totable()) end
    local ints = {}
    for i = 1, 3 do ints[i] = lunet.full({5}, i * 10, {dtype = 'int32', device = 'cpu:' .. (i - 1)}) end
    cm:broadcast(ints, {root = 'cpu:2'})
    for i = 1, 3 do assert.same({30, 30, 30, 30, 30}, ints[i]:totable()) end
  end)

  it('a tensor a backward saved and then written by a collective is refused at that backward; its history is kept', function()
    local cm = lunet.comm.Communicator(devs(2))
    -- (each backward took the received values for the saved ones, silently)
    local function refused(what, write)
      local w, x = {}, {}
      for i = 1, 2 do
        w[i] = lunet.tensor({ 1, 2, 3 }, { device = 'cpu:' .. (i - 1), requires_grad = true })
        x[i] = lunet.tensor({ 4, 5, 6 }, { device = 'cpu:' .. (i - 1) })
      end
      local loss = (w[1] * x[1]):sum()   -- (mul saves x[1])
      write(x)
      local ok, err = pcall(function() loss:backward() end)
      assert.is_false(ok, what)
      assert.matches('backward: a tensor that mul saved for its gradient ({3} float32) was changed in place', err, 1, true)
    end
    refused('allreduce', function(x) cm:allreduce(x) end)
    refused('broadcast', function(x) cm:broadcast(x, { root = 2 }) end)
    -- a tensor with a history, reduced: the values change, the history does not (as a write under no_grad)
    local p = lunet.tensor({ 1, 2, 3 }, { requires_grad = true })
    local lo = { p:clone(), (p * 2):to('cpu:1') }
    cm:allreduce(lo, { op = 'min' })
    assert.same({ 0, 0, 0 }, (p - lo[1]):totable())
    lo[1]:sum():backward()
    assert.same({ 1, 1, 1 }, p.grad:totable())
  end)

  it('reduce_scatter and allgather equal their single-device references', function()
    for _, n in ipairs({2, 3}) do
      local cm = lunet.comm.Communicator(devs(n))
      local m = 333
      local ins, ref = make_inputs(n, n * m)
      local outs = cm:reduce_scatter(ins)
      for i = 1, n do
        assert.equal(m, outs[i]:numel())
        assert.equal('cpu:' .. (i - 1), outs[i].device)
        assert.same(ref:narrow(1, (i - 1) * m + 1, m):totable(), outs[i]:to('cpu:0'):totable())
      end
      local gathered = cm:allgather(outs)
      for i = 1, n do assert.same(ref:totable(), gathered[i]:to('cpu:0'):totable()) end
      -- with caller-given outputs and avg
      local avg = {}
      for i = 1, n do avg[i] = lunet.empty(m, {device = 'cpu:' .. (i - 1)}) end
      cm:reduce_scatter(ins, avg, {op = 'avg'})
      assert.same((ref:narrow(1, 1, m) / n):totable(), avg[1]:to('cpu:0'):totable())
    end
  end)

  it('reduce_scatter with bf16 compression stays within tolerance', function()
    local cm = lunet.comm.Communicator(devs(2))
    local ins, ref = make_inputs(2, 2 * 1000)
    local outs = cm:reduce_scatter(ins, {compress = 'bf16'})
    local r = lunet.cat({outs[1]:to('cpu:0'), outs[2]:to('cpu:0')})
    local absum = ins[1]:to('cpu:0'):abs() + ins[2]:to('cpu:0'):abs()
    assert.is_true(((r - ref):abs() - absum * (2 ^ -8 + 1e-6) - 1e-7):max():item() <= 0)
  end)

  it('send/recv delivers the value at send time, in order per pair', function()
    local cm = lunet.comm.Communicator(devs(3))
    local a = lunet.arange(6, {dtype = 'float32', device = 'cpu:0'})
    cm:send(a, 3)
    a:mul_(10)                                   -- after the send: not seen by the first recv
    cm:send(a, 'cpu:2')
    local r1, r2 = lunet.zeros(6, {device = 'cpu:2'}), lunet.zeros(6, {device = 'cpu:2'})
    cm:recv(r1, 1)
    cm:recv(r2, 'cpu:0')
    assert.same({0, 1, 2, 3, 4, 5}, r1:totable())
    assert.same({0, 10, 20, 30, 40, 50}, r2:totable())
    local ok, err = pcall(cm.recv, cm, r1, 1)
    assert.is_false(ok)
    assert.matches('no send from rank 0 (cpu:0) to rank 2 (cpu:2) is waiting', err, 1, true)
    cm:send(a, 2)
    ok, err = pcall(cm.recv, cm, lunet.zeros(5, {device = 'cpu:1'}), 1)
    assert.is_false(ok)
    assert.matches('6 float32 elements, the receiving tensor 5 float32', err, 1, true)
    local r3 = cm:recv(lunet.zeros(6, {device = 'cpu:1'}), 1)
    assert.same({0, 10, 20, 30, 40, 50}, r3:totable())
  end)

  it('barrier orders the streams: work queued before it on any device is done after it everywhere', function()
    local cm = lunet.comm.Communicator(devs(3))
    local big = lunet.ones(1000000, {device = 'cpu:1'})
    for _ = 1, 20 do big:add_(1) end
    local before = ffi.new('ln_event')
    C.ln_event_record(1, before)
    cm:barrier()
    local after = ffi.new('ln_event')
    C.ln_event_record(2, after)
    assert.equal(0, C.ln_event_synchronize(after))
    assert.equal(1, C.ln_event_query(before))
    assert.equal(21, big[1]:item())
  end)

  it('returns to Lua before the collective has run (it is enqueued)', function()
    local cm = lunet.comm.Communicator(devs(2))
    local slow = lunet.ones(2000000, {device = 'cpu:1'})
    for _ = 1, 40 do slow:mul_(1.0001) end       -- keeps cpu:1 busy
    local ts = {lunet.ones(100, {device = 'cpu:0'}), lunet.ones(100, {device = 'cpu:1'})}
    cm:allreduce(ts)
    local ev = ffi.new('ln_event')
    C.ln_event_record(0, ev)
    assert.equal(0, C.ln_event_query(ev))        -- cpu:0 waits inside the allreduce for cpu:1
    assert.same(2, ts[1][1]:item())
    assert.equal(1, C.ln_event_query(ev))
  end)

  -- cpu:1's stream held by a gate, then `ops` small tasks (an error injected
  -- halfway when `fail` is given), then its part of an allreduce; cpu:0
  -- reaches its part long before; the gate opens after 30 ms, or with
  -- `until_slept` once cpu:0 has gone to sleep in the collective (at most 10 s)
  pcall(ffi.cdef, 'int usleep(unsigned int usec);')
  local function hold_peer(cm, ops, ts, fail, until_slept)
    local gate = ffi.new('int[1]')
    local small = lunet.zeros(4, {device = 'cpu:1'})
    local slept0 = cm:meet_stats().slept
    assert.equal(0, C.ln_stream_inject_gate(1, gate))
    for i = 1, ops do
      if fail and i == math.floor(ops / 2) + 1 then assert.equal(0, C.ln_stream_inject_error(1, fail)) end
      small:add_(1)
    end
    cm:allreduce(ts)
    ffi.C.usleep(30000)
    local deadline = os.time() + 10
    while until_slept and os.time() < deadline do
      if cm:meet_stats().slept > slept0 then break end
      ffi.C.usleep(1000)
    end
    gate[0] = 1
    return small
  end

  -- hold_peer, then the change in cm:meet_stats() (slept, met awake)
  local function held_peer_allreduce(cm, ops, ts, until_slept)
    local before = cm:meet_stats()
    local small = hold_peer(cm, ops, ts, nil, until_slept)
    lunet.synchronize()
    local after = cm:meet_stats()
    assert.equal(ops, small[1]:item())
    return after.slept - before.slept, after.awake - before.awake
  end

  it('an early rank sleeps while its peer is far from the collective and meets it awake as it nears', function()
    local cm = lunet.comm.Communicator(devs(2))
    -- far: six tasks between the gate and the collective. cpu:0 sleeps until
    -- cpu:1 begins the last few of them, then spins and meets it awake. The
    -- meeting needs cpu:1 to arrive within that spin (and cpu:1's task to be
    -- queued before cpu:0 arrives), which a loaded machine need not schedule:
    -- so it is tried until it happens once, up to a generous deadline rather
    -- than a count (it never happens on code that doesn't wait for the peer
    -- to near and then spin)
    local met, tries, deadline = 0, 0, os.time() + 30
    repeat
      local ts, ref = make_inputs(2, 1000)
      local _, awake = held_peer_allreduce(cm, 6, ts)
      assert.same(ref:totable(), ts[1]:to('cpu:0'):totable())
      assert.same(ref:totable(), ts[2]:to('cpu:0'):totable())
      met, tries = met + awake, tries + 1
    until met > 0 or os.time() > deadline
    assert.is_true(met > 0, ('cpu:0 never met its late peer awake in %d tries'):format(tries))
    -- near at once: cpu:1 is held just before the collective, so cpu:0 wakes
    -- to spin at once, but only for a bounded time: then it sleeps (held until it has)
    local ts, ref = make_inputs(2, 1000)
    local slept, awake = held_peer_allreduce(cm, 0, ts, true)
    assert.equal(1, slept)
    assert.equal(0, awake)
    assert.same(ref:totable(), ts[1]:to('cpu:0'):totable())
  end)

  it('an early rank sleeps at once when more devices are busy than there are cores', function()
    lunet.synchronize()
    assert.equal(0, C.ln_cpu_busy_threads())
    -- cpu:2 and cpu:3 held busy: with cpu:0 and cpu:1 at the collective, 4
    -- busy threads on 2 cores (where there are 4 cores or more, 4 do not
    -- oversubscribe them, and this part is skipped)
    local gate = ffi.new('int[1]')
    assert.equal(0, C.ln_stream_inject_gate(2, gate))
    assert.equal(0, C.ln_stream_inject_gate(3, gate))
    local held = C.ln_device_threads(2) + C.ln_device_threads(3)
    assert.equal(held, C.ln_cpu_busy_threads())
    local busy = held + C.ln_device_threads(0) + C.ln_device_threads(1)
    local ok, err = pcall(function()
      if busy <= C.ln_num_cores() then return end
      local cm = lunet.comm.Communicator(devs(2))
      -- the late peer nears as in the spec above; the early rank never spins
      -- for it, so never meets it awake
      for _ = 1, 5 do
        local ts, ref = make_inputs(2, 1000)
        local before = cm:meet_stats()
        hold_peer(cm, 6, ts)
        lunet.synchronize('cpu:0'); lunet.synchronize('cpu:1')   -- (cpu:2 and cpu:3 are still held)
        local after = cm:meet_stats()
        assert.equal(0, after.awake - before.awake)
        assert.equal(1, after.slept - before.slept)
        assert.same(ref:totable(), ts[1]:to('cpu:0'):totable())
      end
    end)
    gate[0] = 1   -- (also when a check failed: the later specs need cpu:2 and cpu:3)
    lunet.synchronize()
    assert.is_true(ok, err)
    assert.equal(0, C.ln_cpu_busy_threads())
  end)

  it('an early rank waiting for its peer to near the collective gets the abort when the peer fails', function()
    local cm = lunet.comm.Communicator(devs(2))
    hold_peer(cm, 6, make_inputs(2, 1000), 'late peer failed')
    local ok, err = pcall(lunet.synchronize, 'cpu:0')
    assert.is_false(ok)
    assert.matches('allreduce: aborted: rank 1 (cpu:1) failed earlier: late peer failed', err, 1, true)
    assert.has_no.errors(function() lunet.synchronize('cpu:1') end)   -- one failure, raised once
    local ts2, ref = make_inputs(2, 1000)
    cm:allreduce(ts2)
    assert.same(ref:totable(), ts2[1]:to('cpu:0'):totable())
  end)

  it('aborts on every rank when one device failed earlier, then works again', function()
    local cm = lunet.comm.Communicator(devs(3))
    local ts = make_inputs(3, 100)
    local before = {}
    for d = 1, 3 do before[d] = ts[d]:to('cpu:0'):totable() end
    assert.equal(0, C.ln_stream_inject_error(1, 'disk on fire'))
    cm:allreduce(ts)
    -- one failure, raised once (by whichever device is synchronised first)
    for d = 0, 2 do
      local ok, err = pcall(lunet.synchronize, 'cpu:' .. d)
      if d == 0 then
        assert.is_false(ok)
        assert.matches('allreduce: aborted: rank 1 (cpu:1) failed earlier: disk on fire (in inject_error, cpu:1)', err, 1, true)
        assert.matches('cpu:0', err, 1, true)
      else
        assert.is_true(ok, err)
      end
    end
    -- every rank aborted: no tensor changed
    for d = 1, 3 do assert.same(before[d], ts[d]:to('cpu:0'):totable()) end
    -- a send from a failed device aborts the receive
    assert.equal(0, C.ln_stream_inject_error(2, 'bad'))
    cm:send(ts[3], 1)
    cm:recv(ts[1], 3)
    local ok, err = pcall(lunet.synchronize, 'cpu:0')
    assert.is_false(ok)
    assert.matches('recv: aborted: sender rank 2 (cpu:2) failed earlier: bad', err, 1, true)
    assert.has_no.errors(function() lunet.synchronize('cpu:2') end)   -- raised once
    -- everything works again
    local ts2, ref = make_inputs(3, 100)
    cm:allreduce(ts2)
    assert.same(ref:totable(), ts2[3]:to('cpu:0'):totable())
  end)

  it('async allreduce on the comm streams: the same results as the compute-stream path', function()
    local cm = lunet.comm.Communicator(devs(4))
    for _, o in ipairs({ {op = 'sum'}, {op = 'avg', compress = 'bf16'}, {op = 'max'} }) do
      local a = make_inputs(4, 100003)
      local b, c = {}, {}
      for i = 1, 4 do b[i] = a[i]:clone(); c[i] = a[i]:clone():add_(1) end
      -- the comm stream waits for the compute stream's work queued before
      -- (add_), and the compute stream, after wait(), for the collective (mul_)
      for i = 1, 4 do b[i]:add_(1) end
      cm:allreduce(b, {op = o.op, compress = o.compress, async = true})
      cm:wait()
      for i = 1, 4 do b[i]:mul_(2) end
      cm:allreduce(c, o)
      for i = 1, 4 do
        c[i]:mul_(2)
        assert.same(c[i]:to('cpu:0'):totable(), b[i]:to('cpu:0'):totable())
      end
    end
  end)

  it('async allreduce runs on the comm stream while the compute stream goes on', function()
    -- ordered by a gate, not by timing: cpu:3's compute stream is held before
    -- the collective, so its comm stream (which waits for that earlier work)
    -- cannot join and the collective cannot end; meanwhile the compute
    -- streams of cpu:0-2 must finish the work queued after the collective
    local cm = lunet.comm.Communicator(devs(4))
    local big, ref = make_inputs(4, 100000)
    local gate = ffi.new('int[1]')
    local comm_end = ffi.new('double[4]')                     -- comm stream, after the collective
    local evs = ffi.new('ln_event[3]')
    local ms = {}
    for d = 0, 2 do ms[d + 1] = lunet.randn(64, 64, {device = 'cpu:' .. d}) end
    assert.equal(0, C.ln_stream_inject_gate(3, gate))
    cm:allreduce(big, {async = true})
    for d = 0, 3 do assert.equal(0, C.ln_comm_stream_timestamp(d, comm_end + d)) end
    local outs = {}
    for d = 0, 2 do
      outs[d + 1] = ms[d + 1]:matmul(ms[d + 1])               -- later compute-stream work
      assert.equal(0, C.ln_event_record(d, evs + d))
    end
    pcall(ffi.cdef, 'int usleep(unsigned int usec);')
    local done, deadline = false, os.time() + 60   -- a broken stream order fails here, not hangs
    while not done and os.time() < deadline do
      done = true
      for d = 0, 2 do if C.ln_event_query(evs + d) ~= 1 then done = false end end
      if not done then ffi.C.usleep(1000) end
    end
    local pending = {}
    for d = 0, 3 do pending[d + 1] = comm_end[d] == 0 end
    gate[0] = 1
    cm:wait()
    lunet.synchronize()
    assert.is_true(done, 'the compute streams of cpu:0-2 waited for the held collective')
    assert.same({ true, true, true, true }, pending)   -- the collective was still held then
    for d = 0, 3 do assert.is_true(comm_end[d] > 0) end
    assert.same(ref:totable(), big[3]:to('cpu:0'):totable())
  end)

  it('async allreduce aborts when a compute stream failed earlier, then works again', function()
    local cm = lunet.comm.Communicator(devs(3))
    local ts = make_inputs(3, 100)
    assert.equal(0, C.ln_stream_inject_error(1, 'disk on fire'))
    cm:allreduce(ts, {async = true})
    cm:wait()
    for d = 0, 2 do   -- one failure, raised once
      local ok, err = pcall(lunet.synchronize, 'cpu:' .. d)
      if d == 0 then
        assert.is_false(ok)
        assert.matches('disk on fire', err, 1, true)
        assert.matches('allreduce: aborted: rank 1 (cpu:1) failed earlier', err, 1, true)
      else
        assert.is_true(ok, err)
      end
    end
    local ts2, ref = make_inputs(3, 100)
    cm:allreduce(ts2, {async = true})
    cm:wait()
    for d = 1, 3 do assert.same(ref:totable(), ts2[d]:to('cpu:0'):totable()) end
  end)

  it('is a process group: world size, the ranks and devices this process holds', function()
    local cm = lunet.comm.Communicator({'cpu:2', 'cpu:0', 'cpu:3'})
    assert.equal(3, cm:size())
    assert.equal(3, cm:local_size())
    assert.same({1, 2, 3}, cm:ranks())
    assert.same({'cpu:2', 'cpu:0', 'cpu:3'}, cm:devices())
    -- the same through the C API: a config, global ranks, local devices
    local ids = ffi.new('int[2]', {1, 3})
    local cfg = ffi.new('ln_comm_config', {backend = 'local', world_size = 2, nlocal = 2, devices = ids})
    local p = ffi.gc(C.ln_comm_create(cfg), C.ln_comm_free)
    assert.is_true(p ~= nil)
    assert.same({2, 2, 0, 1, 1, 3}, {C.ln_comm_size(p), C.ln_comm_local_size(p), C.ln_comm_rank(p, 0),
      C.ln_comm_rank(p, 1), C.ln_comm_device(p, 0), C.ln_comm_device(p, 1)})
    assert.equal(-1, C.ln_comm_rank(p, 2))
    assert.matches('comm_rank: local rank 2 out of range 0..1', ffi.string(C.ln_last_error()), 1, true)
    -- a rank's root given by its device name is its global rank
    local a, b = lunet.full({3}, 1, {device = 'cpu:2'}), lunet.full({3}, 2, {device = 'cpu:0'})
    local c = lunet.full({3}, 3, {device = 'cpu:3'})
    cm:broadcast({a, b, c}, {root = 'cpu:0'})
    assert.same({{2, 2, 2}, {2, 2, 2}, {2, 2, 2}}, {a:totable(), b:totable(), c:totable()})
  end)

  it('names what the local backend cannot do: ranks in other processes', function()
    local cases = {
      {{'cpu:0', 'cpu:1'}, {world_size = 4}, 'the local backend holds every rank in this process: world size 4, but 2 devices'},
      {{'cpu:0', 'cpu:1'}, {ranks = {2, 1}}, 'device 1 holds rank 1, not 0'},
      {{'cpu:0', 'cpu:1'}, {world_size = 2, ranks = {1, 1}}, 'rank 0 is given twice (devices 1 and 2)'},
      {{'cpu:0', 'cpu:1'}, {world_size = 2, ranks = {1, 3}}, 'rank 2 of device 2 is out of range 0..1'},
      {{'cpu:0', 'cpu:1'}, {world_size = 1}, '2 devices for a world of 1 ranks'},
      {{'cpu:0'}, {world_size = 0}, 'world_size must be an integer >= 1, got 0'},
      {{'cpu:0'}, {ranks = {1, 2}}, 'ranks must be a list of 1 ranks (one per device)'},
      {{'cpu:0'}, {ranks = 1}, "option 'ranks' must be a table"},
      {{'cpu:0'}, {backend = 'mpi', world_size = 4}, "backend 'mpi' needs processes started by a launcher (mpirun"},
      {{'cpu:0'}, {backend = 'nccl'}, NCCL_CPU},
      {{'cpu:0'}, 'x', 'options must be a table'},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(lunet.comm.Communicator, c[1], c[2])
      assert.is_false(ok, c[3])
      assert.matches(c[3], err, 1, true)
    end
  end)

  -- raise every stored failure (each is raised once); their messages
  local function drain()
    local errs = {}
    for _ = 1, 6 do
      local ok, err = pcall(lunet.synchronize)
      if ok then break end
      errs[#errs + 1] = err
    end
    return table.concat(errs, '\n')
  end

  it('groups sharing one world (rendezvous): each calls with its own ranks\' tensors', function()
    local A = lunet.comm.Communicator({'cpu:0', 'cpu:1'}, {world_size = 3, ranks = {1, 2}, rendezvous = 'spec-w1'})
    local B = lunet.comm.Communicator({'cpu:2'}, {world_size = 3, ranks = {3}, rendezvous = 'spec-w1'})
    assert.same({3, 2, 1}, {A:size(), A:local_size(), B:local_size()})
    assert.same({{1, 2}, {3}}, {A:ranks(), B:ranks()})
    assert.equal('Communicator(local: cpu:2; ranks 3 of 3)', tostring(B))
    local ts, ref = make_inputs(3, 5000)
    A:allreduce({ts[1], ts[2]})          -- queued: its ranks wait for rank 3
    B:allreduce({ts[3]}, {op = 'sum'})
    for k = 1, 3 do assert.same(ref:totable(), ts[k]:to('cpu:0'):totable()) end
    -- async, then the other collectives, roots and peers as global ranks
    local us, uref = make_inputs(3, 300)
    B:allreduce({us[3]}, {op = 'avg', async = true})
    A:allreduce({us[1], us[2]}, {op = 'avg', async = true})
    A:wait(); B:wait()
    local want = (uref / 3):totable()
    for k = 1, 3 do
      local got = us[k]:to('cpu:0'):totable()
      for i = 1, #want do assert.is_true(math.abs(got[i] - want[i]) <= 1e-6, 'avg') end
    end
    local b = {lunet.full({4}, 1, {device = 'cpu:0'}), lunet.full({4}, 2, {device = 'cpu:1'}), lunet.full({4}, 3, {device = 'cpu:2'})}
    A:broadcast({b[1], b[2]}, {root = 3})
    B:broadcast({b[3]}, {root = 'cpu:2'})
    for k = 1, 3 do assert.same({3, 3, 3, 3}, b[k]:totable()) end
    local ins = {}
    for k = 1, 3 do ins[k] = lunet.arange(6, {dtype = 'float32', device = 'cpu:' .. (k - 1)}) + k end
    local ga = A:allgather({ins[1], ins[2]})
    local gb = B:allgather({ins[3]})
    local all = {}
    for k = 1, 3 do for i = 0, 5 do all[#all + 1] = i + k end end
    assert.same(all, ga[1]:totable()); assert.same(all, ga[2]:totable()); assert.same(all, gb[1]:totable())
    local ra = A:reduce_scatter({ins[1], ins[2]})
    local rb = B:reduce_scatter({ins[3]})
    assert.same({6, 9}, ra[1]:totable()); assert.same({12, 15}, ra[2]:totable()); assert.same({18, 21}, rb[1]:totable())
    -- point to point across groups
    B:send(lunet.full({3}, 7, {device = 'cpu:2'}), 1)
    local got = A:recv(lunet.zeros(3), 3)
    A:send(got * 2, 3)
    assert.same({14, 14, 14}, B:recv(lunet.zeros(3, {device = 'cpu:2'}), 1):totable())
    A:barrier(); B:barrier()
    lunet.synchronize()
  end)

  it('groups sharing one world: a mismatched call or a freed group is an error, not a hang', function()
    local A = lunet.comm.Communicator({'cpu:0'}, {world_size = 2, ranks = {1}, rendezvous = 'spec-w2'})
    local B = lunet.comm.Communicator({'cpu:1'}, {world_size = 2, ranks = {2}, rendezvous = 'spec-w2'})
    local a, b = lunet.ones(8), lunet.ones(8, {device = 'cpu:1'})
    A:allreduce({a})
    local ok, err = pcall(B.allgather, B, {b})
    assert.is_false(ok)
    assert.matches('collective #0 of world \'spec-w2\' is a allreduce of 8 float32 elements', err, 1, true)
    assert.matches('every group must make the same calls in the same order', drain(), 1, true)   -- A's rank aborted
    assert.same(lunet.ones(8):totable(), a:totable())
    -- both go on with their next call
    A:allreduce({a}); B:allreduce({b})
    assert.same({2, 2, 2, 2, 2, 2, 2, 2}, b:totable())
    -- a group freed while another waits in a collective: the waiter aborts
    A:allreduce({a})
    B = nil
    collectgarbage(); collectgarbage()
    assert.matches('left (their group was freed) before joining it', drain(), 1, true)
    ok, err = pcall(A.allreduce, A, {a})
    assert.is_false(ok)
    assert.matches("allreduce: a group of world 'spec-w2' was freed", err, 1, true)
    -- configuration errors
    local cases = {
      {{'cpu:3'}, {world_size = 3, ranks = {1}, rendezvous = 'spec-w2'}, "world 'spec-w2' has 2 ranks, this group says 3"},
      {{'cpu:3'}, {world_size = 2, ranks = {2}, rendezvous = 'spec-w2'}, "a group of world 'spec-w2' was freed"},
    }
    local C1 = lunet.comm.Communicator({'cpu:0'}, {world_size = 2, ranks = {1}, rendezvous = 'spec-w3'})
    cases[#cases + 1] = {{'cpu:1'}, {world_size = 2, ranks = {1}, rendezvous = 'spec-w3'}, "rank 0 of world 'spec-w3' is held by another group"}
    cases[#cases + 1] = {{'cpu:0'}, {world_size = 2, ranks = {2}, rendezvous = 'spec-w3'}, "cpu:0 holds rank 0 of world 'spec-w3' already"}
    for _, c in ipairs(cases) do
      local ok2, err2 = pcall(lunet.comm.Communicator, c[1], c[2])
      assert.is_false(ok2, c[3])
      assert.matches(c[3], err2, 1, true)
    end
    assert.equal(1, C1:local_size())
  end)

  it('a Reducer per group: two "processes" of one replica each average their gradients (as DistributedDataParallel)', function()
    local function run()
      lunet.manual_seed(5)
      local nn = lunet.nn
      local function model() return nn.Sequential { nn.Conv2d(3, 4, 3, {padding = 1}), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5) } end
      local ref = model()
      local reps = {ref:clone():to('cpu:1'), ref:clone():to('cpu:2')}
      local reducers = {}
      for k = 1, 2 do
        local g = lunet.comm.Communicator({'cpu:' .. k}, {world_size = 2, ranks = {k}, rendezvous = 'spec-ddp'})
        reducers[k] = lunet.parallel.Reducer({reps[k]:parameters()}, g, {bucket_mb = 0.0005})
      end
      local crit = nn.CrossEntropyLoss()
      local xs, ys = {lunet.randn(4, 3, 6, 6), lunet.randn(5, 3, 6, 6)}, {lunet.randint(1, 6, {4}), lunet.randint(1, 6, {5})}
      for k = 1, 2 do   -- each "process": its forward and backward; the host never waits in between
        reducers[k]:prepare(true, 1)
        crit(reps[k](xs[k]:to('cpu:' .. k)), ys[k]:to('cpu:' .. k)):backward()
      end
      assert.is_true(#reducers[1].buckets >= 2, 'buckets ' .. #reducers[1].buckets)
      local both = (crit(ref(xs[1]), ys[1]) + crit(ref(xs[2]), ys[2])) * 0.5
      both:backward()
      local p1, p2, pr = reps[1]:parameters(), reps[2]:parameters(), ref:parameters()
      for i = 1, #pr do
        assert.is_true(p1[i].grad:to('cpu:0'):eq(p2[i].grad:to('cpu:0')):all():item(), 'grad ' .. i .. ' differs')
        local d = (p1[i].grad:to('cpu:0') - pr[i].grad):abs():max():item()
        assert.is_true(d <= 1e-5 * (1 + pr[i].grad:abs():max():item()), 'grad ' .. i .. ': ' .. d)
      end
    end
    run()
    -- (the models, their autograd records and buckets: gone before the next spec counts memory)
    jit.flush()
    for _ = 1, 4 do collectgarbage() end
  end)

  it('rejects bad arguments at the call with clear messages', function()
    local cm = lunet.comm.Communicator(devs(2))
    local a, b = lunet.zeros(4, {device = 'cpu:0'}), lunet.zeros(4, {device = 'cpu:1'})
    local cases = {
      {function() cm:allreduce({a}) end, 'allreduce: tensors has 1 tensors, the communicator has 2 ranks'},
      {function() cm:allreduce({b, a}) end, 'tensor 1 is on cpu:1, but rank 0 of the communicator is cpu:0'},
      {function() cm:allreduce({a, lunet.zeros(5, {device = 'cpu:1'})}) end, 'tensor 2 has shape {5} but tensor 1 has {4}'},
      {function() cm:allreduce({a:int(), b:int()}) end, 'sum needs float32 or float64 tensors, got int32'},
      {function() cm:allreduce({a:double(), b:double()}, {compress = 'bf16'}) end, 'bfloat16 compression needs float32'},
      {function() cm:allreduce({a, b}, {op = 'prod'}) end, 'unknown op prod'},
      {function() cm:allreduce({a, b}, {compress = 'fp8'}) end, 'unknown compress fp8'},
      {function() cm:allreduce({a, 5}) end, 'tensors[2] must be a tensor'},
      {function() cm:allreduce({lunet.zeros(2, 2):t(), lunet.zeros(2, 2, {device = 'cpu:1'})}) end, 'must be contiguous'},
      {function() cm:broadcast({a, b}, {root = 3}) end, 'rank must be 1..2'},
      {function() cm:reduce_scatter({a, b}, {lunet.zeros(3), lunet.zeros(3, {device = 'cpu:1'})}) end, 'needs 2 x 3 = 6 elements'},
      {function() cm:reduce_scatter({lunet.zeros(5), lunet.zeros(5, {device = 'cpu:1'})}) end, 'not a multiple of 2 ranks'},
      {function() cm:allgather({a, b}, {a, b}) end, 'needs 2 x 4 = 8 elements'},
      {function() cm:send(lunet.zeros(2, {device = 'cpu:3'}), 1) end, 'cpu:3, which is not in the communicator'},
      {function() lunet.comm.Communicator({'cpu:1', 'cpu:1'}) end, 'cpu:1 is listed twice'},
      {function() lunet.comm.Communicator({'cpu:0', 'cpu:9'}) end, 'no device cpu:9'},
      {function() lunet.comm.Communicator({'cpu:0'}, {backend = 'nccl'}) end, NCCL_CPU},
      -- (a '.' for a ':' failed inside on a format of nil)
      {function() cm.allreduce({a, b}) end, 'allreduce: call it as a method, comm:allreduce(...) (got table for the communicator)'},
      {function() cm.send(a, 2) end, 'send: call it as a method, comm:send(...) (got tensor for the communicator)'},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, c[2])
      assert.matches(c[2], err, 1, true)
    end
  end)

  it('frees wire buffers and state after dropped tensors and communicators', function()
    release_all()
    local base = {}
    for d = 0, 3 do base[d] = lunet.memory_allocated('cpu:' .. d) end
    do
      local cm = lunet.comm.Communicator(devs(4))
      local ts = make_inputs(4, 50000)
      for _ = 1, 5 do cm:allreduce(ts, {op = 'avg', compress = 'bf16'}) end
      cm:allgather(ts)
      cm:send(ts[1], 2)                          -- never received: freed with the communicator
    end
    release_all()
    for d = 0, 3 do assert.equal(base[d], lunet.memory_allocated('cpu:' .. d)) end
  end)

  it('a one-device communicator is the identity', function()
    local cm = lunet.comm.Communicator({'cpu:2'})
    local t = lunet.arange(5, {dtype = 'float32', device = 'cpu:2'})
    cm:allreduce({t}, {op = 'avg', compress = 'fp16'})
    assert.same({0, 1, 2, 3, 4}, t:totable())
    assert.same({0, 1, 2, 3, 4}, cm:allgather({t})[1]:totable())
    cm:barrier()
  end)
end)

describe('collectives on the default single inline device', function()
  it('run inline and give the identity', function()
    assert.equal(1, lunet.device_count())
    local cm = lunet.comm.Communicator()
    local t = lunet.tensor{1.5, 2.5}
    cm:allreduce({t})
    cm:broadcast({t})
    local o = cm:reduce_scatter({t})
    assert.same({1.5, 2.5}, o[1]:totable())
    cm:send(t, 1)
    local r = cm:recv(lunet.zeros(2), 1)
    assert.same({1.5, 2.5}, r:totable())
    cm:barrier()
  end)

  it('async allreduce runs inline too', function()
    local cm = lunet.comm.Communicator()
    local t = lunet.tensor{1.5, 2.5}
    cm:allreduce({t}, {op = 'avg', async = true})
    cm:wait()
    assert.same({1.5, 2.5}, t:totable())
  end)
end)
