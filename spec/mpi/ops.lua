-- Run by spec/mpi_spec.lua under `mpirun -np N`: every collective of the
-- mpi backend against the local backend's result (the same inputs on N
-- virtual devices of this process when it has them, else the same sums in
-- rank order). Prints "rank R ok NAME" per check, "rank R FAIL NAME: why",
-- and "rank R done" at the end.
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local info = dist.init{timeout = 20}
local R, N = info.rank, info.world_size
local world = dist.world()
local ndev = lunet.C.ln_cpu_device_count()

local function say(s) io.stdout:write(('rank %d %s\n'):format(R, s)); io.stdout:flush() end
local function check(name, fn)
  local ok, err = pcall(fn)
  say(ok and ('ok ' .. name) or ('FAIL ' .. name .. ': ' .. tostring(err)))
end

-- rank k's input: the same on every process
local function input(k, numel, dtype, salt)
  lunet.manual_seed(1000 * (salt or 1) + k)
  return lunet.randn({numel}, {dtype = dtype or 'float32'})
end

local function max_rel(a, b)
  local d = (a:to('float64') - b:to('float64')):abs():max():item()
  local s = b:to('float64'):abs():max():item()
  return d / math.max(s, 1e-30)
end

-- the local backend's allreduce of every rank's input (N devices here), or
-- the same in plain tensor arithmetic (rank order)
local function reference(numel, dtype, op, compress, salt)
  if ndev >= N and N > 1 then
    local devs, ts = {}, {}
    for k = 1, N do devs[k] = 'cpu:' .. (k - 1); ts[k] = input(k - 1, numel, dtype, salt):to(devs[k]) end
    lunet.comm.Communicator(devs):allreduce(ts, {op = op, compress = compress})
    return ts[1]:to('cpu:0')
  end
  assert(not compress, 'no local reference for compress without N devices')
  local acc = input(0, numel, dtype, salt)
  for k = 1, N - 1 do
    local x = input(k, numel, dtype, salt)
    if op == 'max' then acc = lunet.maximum(acc, x) elseif op == 'min' then acc = lunet.minimum(acc, x)
    else acc = acc + x end
  end
  if op == 'avg' then acc = acc / N end
  return acc
end

for _, dtype in ipairs({'float32', 'float64'}) do
  for _, op in ipairs({'sum', 'avg', 'max', 'min'}) do
    for _, numel in ipairs({1, 1037, 300001}) do   -- the last: the ring (uneven chunks)
      check(('allreduce %s %s %d'):format(op, dtype, numel), function()
        local t = input(R, numel, dtype)
        world:allreduce({t}, {op = op})
        local e = max_rel(t, reference(numel, dtype, op))
        assert(e <= (dtype == 'float32' and 2e-6 or 1e-14), 'relative error ' .. e)
      end)
    end
  end
end

if ndev >= N then
  for _, compress in ipairs({'bf16', 'fp16'}) do
    for _, op in ipairs({'sum', 'avg'}) do
      for _, numel in ipairs({5000, 200000}) do   -- MPI's all-reduce; the ring (large)
        check(('allreduce %s compress %s %d'):format(op, compress, numel), function()
          local t = input(R, numel, 'float32', 3)
          world:allreduce({t}, {op = op, compress = compress})
          local ref = reference(numel, 'float32', op, compress, 3)
          local exact = reference(numel, 'float32', op, nil, 3)
          -- two ranks round as local does (inputs, then the result); more
          -- ranks round each partial sum on the wire as well
          local e = max_rel(t, ref)
          if N == 2 then assert(e == 0, 'differs from local by ' .. e) end
          local tol = compress == 'bf16' and 2e-2 or 3e-3
          assert(max_rel(t, exact) < tol, 'far from the exact sum: ' .. max_rel(t, exact))
        end)
      end
    end
  end
end

check('allreduce async', function()
  local t = input(R, 70000, 'float32', 4)
  world:allreduce({t}, {op = 'sum', async = true})
  world:wait()
  assert(max_rel(t, reference(70000, 'float32', 'sum', nil, 4)) < 2e-6)
end)

check('async allreduces in flight around sync collectives', function()
  local a, b = input(R, 200000, 'float32', 6), input(R, 333, 'float64', 7)
  world:allreduce({a}, {op = 'avg', async = true})
  world:allreduce({b}, {op = 'max', async = true})
  local c = input(R, 1000, 'float32', 8)
  world:allreduce({c}, {op = 'min'})   -- the compute stream's, meanwhile
  world:wait()
  assert(max_rel(a, reference(200000, 'float32', 'avg', nil, 6)) < 2e-6, 'a')
  assert(max_rel(b, reference(333, 'float64', 'max', nil, 7)) == 0, 'b')
  assert(max_rel(c, reference(1000, 'float32', 'min', nil, 8)) == 0, 'c')
end)

for root = 1, N do
  check('broadcast root ' .. root, function()
    local t = lunet.full({3, 5}, R, {dtype = 'int32'})
    world:broadcast({t}, {root = root})
    assert(t:eq(root - 1):all():item() and t:sum():item() == 15 * (root - 1), 'got ' .. t:sum():item())
  end)
end

check('reduce_scatter', function()
  local m = 1000
  local x = input(R, m * N, 'float32', 5)
  local out = world:reduce_scatter({x}, {op = 'sum'})[1]
  local full = reference(m * N, 'float32', 'sum', nil, 5)
  assert(max_rel(out, full:narrow(1, R * m + 1, m):contiguous()) < 2e-6)
end)

check('allgather', function()
  local x = lunet.arange(4):float() + 10 * R
  local out = world:allgather({x})[1]
  for k = 0, N - 1 do
    for j = 0, 3 do assert(out[k * 4 + j + 1]:item() == 10 * k + j, 'element ' .. k * 4 + j) end
  end
end)

check('send/recv ring', function()
  local to, from = (R + 1) % N, (R - 1) % N
  local x = lunet.full({257}, R + 0.5)
  local y = lunet.zeros({257})
  if R % 2 == 0 then world:send(x, to + 1); world:recv(y, from + 1)
  else world:recv(y, from + 1); world:send(x, to + 1) end
  lunet.synchronize()
  assert(y:eq(from + 0.5):all():item(), 'got ' .. y[1]:item())
end)

check('send/recv: every rank sends a large tensor before it receives (no deadlock)', function()
  local to, from = (R + 1) % N, (R - 1) % N
  local x = lunet.full({1000000}, R + 0.25)
  world:send(x, to + 1)
  x:fill_(-1)   -- the send took its value when it ran
  local y = lunet.zeros({1000000})
  world:recv(y, from + 1)
  lunet.synchronize()
  assert(y:eq(from + 0.25):all():item(), 'got ' .. y[1]:item())
end)

check('barrier', function() dist.barrier() end)

check('group of the first and last', function()
  local g = dist.group({N - 1, 0})
  if R ~= 0 and R ~= N - 1 then assert(g == nil); return end
  assert(g:size() == 2)
  local t = lunet.tensor({R + 1.0})
  g:allreduce({t})
  assert(t:item() == N + 1, 'got ' .. t:item())
  -- its rank 1 is process N-1 (the list's order)
  local b = lunet.tensor({R * 1.0})
  g:broadcast({b}, {root = 1})
  assert(b:item() == N - 1, 'broadcast got ' .. b:item())
end)

check('recv of another size is an error', function()
  if R > 1 then return end
  local peer = 1 - R
  if R == 0 then world:send(lunet.zeros({7}), peer + 1); lunet.synchronize() return end
  local ok, err = pcall(function() world:recv(lunet.zeros({5}), peer + 1); lunet.synchronize() end)
  assert(not ok and tostring(err):find('recv: the send from rank 0 has 7 float32 elements, the receiving tensor 5', 1, true),
    tostring(err))
end)

world:barrier()
lunet.synchronize()
say('done')
