-- The nccl collective backend (c/cuda/nccl.c, in liblunet_cuda.so; NCCL
-- loaded with dlopen on first use). The first block runs everywhere: NCCL's
-- presence and version, and the errors that say why the backend is not
-- there (no CUDA backend, no driver, libnccl.so.2 missing). The second needs
-- a GPU (LUNET_TEST_DEVICE=cuda:0, or cuda:0 when there is one; pending
-- otherwise; tools/gpu-check.sh runs it): a world-of-one NCCL communicator's
-- collectives (and compress's wire formats) equal the local backend's on CPU
-- copies, and DataParallel over the one GPU trains as the plain model does
-- (a world of one cannot show multi-rank reduction order or overlap; NCCL
-- over several GPUs has not run). Two ranks of one communicator
-- on one GPU are unsupported by NCCL (they may hang), so nothing here makes
-- them. LUNET_TEST_DEVICE=cpu:1 runs the second block with the local backend
-- on a second CPU device, which checks the spec itself.
local lunet = require 'lunet'
local comm = require 'lunet.comm'
local nn = lunet.nn
local optim = require 'lunet.optim'
local shell = require 'shell'
local root, sh = shell.root, shell.sh

local lib = os.getenv('LUNET_LIB') or (root .. 'build/liblunet.so')

-- a child luajit with env set, printing what code prints
local function child(env, code)
  return sh(('cd %q && %s LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUNET_LIB=%q luajit -e %q'):format(
    root, env, lib, "local l = require 'lunet'; local comm = require 'lunet.comm'; " .. code))
end

local err_of = require('support.fixtures').err_of

describe('nccl backend, without a GPU', function()
  it('reports NCCL\'s version, or why it is not there', function()
    local v, why = comm.nccl_version()
    if v then
      assert.is_true(v >= 21900, 'version ' .. v)
    else
      assert.truthy(why:find('NCCL did not load', 1, true) or why:find("needs the CUDA backend", 1, true), why)
    end
  end)

  it('names dlopen\'s reason when libnccl.so.2 is missing', function()
    local out = child('LUNET_NCCL_LIB=/nonexistent/libnccl.so.2',
      "print(comm.nccl_version()); print(pcall(comm.nccl_unique_id))")
    if out:find("needs the CUDA backend", 1, true) then   -- (no liblunet_cuda.so, or LUNET_CUDA=0)
      assert.truthy(out:find('nil\tnccl_version: backend \'nccl\' needs the CUDA backend, which is not available (' ..
        lunet.cuda.reason(), 1, true), out)
      return
    end
    assert.truthy(out:find('nil\tnccl_version: NCCL did not load: /nonexistent/libnccl.so.2: cannot open shared object', 1, true), out)
    assert.truthy(out:find('false\t[^\n]*nccl_unique_id: NCCL did not load: /nonexistent/libnccl.so.2'), out)
  end)

  it('names the CUDA reason when the CUDA backend is off', function()
    local out = child('LUNET_CUDA=0', [[
      print(comm.nccl_version())
      print(pcall(comm.Communicator, {'cpu:0'}, {backend = 'nccl'}))
      print(pcall(comm.Communicator, {'cuda:0'}))]])
    assert.truthy(out:find("nil\tnccl_version: backend 'nccl' needs the CUDA backend, which is not available " ..
      "(CUDA disabled by LUNET_CUDA=0)", 1, true), out)
    assert.truthy(out:find("comm_new: backend 'nccl' needs the CUDA backend, which is not available " ..
      "(CUDA disabled by LUNET_CUDA=0)", 1, true), out)
    assert.truthy(out:find('false\t[^\n]*comm_new: backend'), out)
    assert.truthy(out:find('false\t[^\n]*cuda:0 is not available %(CUDA disabled by LUNET_CUDA=0%)'), out)
  end)

  it('makes unique ids of 256 hex digits, a new one each time (where NCCL loads)', function()
    if not comm.nccl_version() then pending('NCCL is not available: ' .. select(2, comm.nccl_version())) return end
    local a, b = comm.nccl_unique_id(), comm.nccl_unique_id()
    assert.equal(256, #a)
    assert.truthy(a:match('^%x+$'), a)
    assert.are_not.equal(a, b)
  end)

  it('refuses CPU devices, and cuda devices that are not there, by name', function()
    local e = err_of(comm.Communicator, {'cpu:0'}, {backend = 'nccl'})
    if comm.nccl_version() then
      assert.truthy(e:find("comm_new: device 1 is cpu:0; backend 'nccl' takes cuda devices only", 1, true), e)
    else
      assert.truthy(e:find("needs the CUDA backend", 1, true) or e:find('NCCL did not load', 1, true), e)
    end
    if lunet.cuda.is_available() then return end
    e = err_of(comm.Communicator, {'cuda:0'})
    assert.truthy(e:find('cuda:0 is not available (' .. lunet.cuda.reason(), 1, true), e)
    e = err_of(comm.Communicator, {'cuda:0'}, {backend = 'nccl'})
    assert.truthy(e:find('cuda:0 is not available', 1, true), e)
    e = err_of(require('lunet.distributed').init, {device = 'cuda'})
    assert.truthy(e:find('distributed.init: cuda:0 is not available', 1, true), e)
  end)

  it('hands NCCL\'s unique id over MPI to every process of the world and of a group (mpirun -np 3)', function()
    if not sh('command -v mpirun'):match('mpirun') then pending('mpirun not installed') return end
    local shim = lib:gsub('liblunet%.so$', 'liblunet_mpi.so')
    local f = io.open(shim)
    if not f then pending(shim .. ' not built (no mpicc)') return end
    f:close()
    if not comm.nccl_version() then pending('NCCL is not available: ' .. select(2, comm.nccl_version())) return end
    local out = shell.mpirun(3, 'spec/mpi/nccl_id.lua', nil, 60)
    shell.ranks_ok(out, 3)
    local world, group = {}, {}
    for rank, kind, hex in out:gmatch('rank (%d) (%a+) (%x+)') do
      (kind == 'world' and world or group)[tonumber(rank)] = hex
    end
    assert.equal(256, #(world[0] or ''), out)
    assert.equal(world[0], world[1], out)
    assert.equal(world[0], world[2], out)
    assert.equal(256, #(group[2] or ''), out)
    assert.equal(group[2], group[0], out)
    assert.is_nil(group[1], out)
    assert.are_not.equal(world[0], group[2], out)
  end)

  it('is listed among the backends when the name is wrong', function()
    local e = err_of(comm.Communicator, {'cpu:0'}, {backend = 'gloo'})
    assert.truthy(e:find("unknown backend 'gloo' (available: local, mpi, nccl)", 1, true), e)
  end)
end)

-- ---- on a GPU ----------------------------------------------------------------------------

local dev = os.getenv('LUNET_TEST_DEVICE')
if dev == '' or dev == 'cpu:0' then dev = nil end
if not dev and lunet.cuda.is_available() then dev = 'cuda:0' end
local on_cuda = dev and dev:match('^cuda:') ~= nil
local backend = on_cuda and 'nccl' or 'local'
local why = dev == nil and ('no GPU (' .. tostring(lunet.cuda.reason()) ..
  '): tools/gpu-check.sh, or LUNET_TEST_DEVICE=cuda:0 on a GPU machine, runs these') or nil

local function it_dev(name, f)
  it(name, function()
    if not dev then pending(why) return end
    f()
  end)
end

-- b (on dev) equals a (CPU) exactly: shape, dtype, every value
local function same(a, b, what)
  assert.equal(a.dtype, b.dtype, what .. ': dtype')
  assert.same(a:size(), b:size(), what .. ': shape')
  local ba, n = a:read()
  local bb = b:to('cpu:0'):read()
  for i = 0, n - 1 do
    if tonumber(ba[i]) ~= tonumber(bb[i]) then
      error(('%s: element %d is %s on the CPU, %s on %s'):format(what, i, tostring(ba[i]), tostring(bb[i]), dev), 2)
    end
  end
end

local SIZES = {0, 1, 1000, 65537}

describe('nccl backend, a world of one on a GPU', function()
  it_dev('is the default for a list of cuda devices; local and mpi refuse them', function()
    local c = comm.Communicator({dev})
    assert.equal(backend, c:backend())
    assert.equal(1, c:size())
    assert.equal(1, c:local_size())
    if not on_cuda then return end
    assert.equal('Communicator(nccl: cuda:0)', tostring(c))
    for _, b in ipairs({'local', 'mpi'}) do
      local e = err_of(comm.Communicator, {dev}, {backend = b})
      assert.truthy(e:find("device 1 is cuda:0; backend '" .. b .. "' takes CPU tensors only", 1, true), e)
    end
    local e = err_of(comm.Communicator, {dev}, {backend = 'nccl', rendezvous = 'zz'})
    assert.truthy(e:find('rendezvous must be the 256 hex digits', 1, true), e)
    e = err_of(comm.Communicator, {dev}, {backend = 'nccl', world_size = 2})
    assert.truthy(e:find('needs rendezvous', 1, true), e)
    e = err_of(comm.Communicator, {dev, 'cpu:0'})
    assert.truthy(e:find("device 2 is cpu:0; backend 'nccl' takes cuda devices only", 1, true), e)
    e = err_of(comm.Communicator, {'cpu:0', dev})
    assert.truthy(e:find("device 2 is cuda:0; backend 'local' takes CPU tensors only", 1, true), e)
    e = err_of(function() c:allreduce({lunet.ones(4)}) end)
    assert.truthy(e:find('allreduce: tensor 1 is on cpu:0, but rank 0 of the communicator is cuda:0', 1, true), e)
  end)

  it_dev('allreduce (sum, avg, max, min; float32, float64) equals the local backend on CPU copies', function()
    local c, ref = comm.Communicator({dev}), comm.Communicator({'cpu:0'})
    for _, dt in ipairs({'float32', 'float64'}) do
      for _, n in ipairs(SIZES) do
        for _, op in ipairs({'sum', 'avg', 'max', 'min'}) do
          local x = lunet.randn(n):to(dt)
          local g = x:to(dev)
          ref:allreduce({x}, {op = op})
          c:allreduce({g}, {op = op})
          same(x, g, ('allreduce %s %s n=%d'):format(op, dt, n))
        end
      end
    end
  end)

  it_dev('the unique-id path (ncclCommInitRank, as across processes) works for a world of one', function()
    if not on_cuda then pending('nccl only') return end
    local c = comm.Communicator({dev}, {backend = 'nccl', world_size = 1, ranks = {1}, rendezvous = comm.nccl_unique_id()})
    local x = lunet.randn(333)
    local g = x:to(dev)
    c:allreduce({g}, {op = 'sum'})
    same(x, g, 'allreduce after ncclCommInitRank')
  end)

  it_dev('broadcast, allgather and reduce_scatter equal the local backend on CPU copies, any dtype', function()
    local c, ref = comm.Communicator({dev}), comm.Communicator({'cpu:0'})
    for _, dt in ipairs({'float32', 'float64', 'int64', 'int32', 'uint8', 'float16', 'bfloat16'}) do
      for _, n in ipairs(SIZES) do
        local x = (lunet.randn(n) * 20):round():abs():to(dt)
        local g = x:to(dev)
        ref:broadcast({x}, {root = 1}); c:broadcast({g}, {root = 1})
        same(x, g, ('broadcast %s n=%d'):format(dt, n))
        local ax, ag = ref:allgather({x}), c:allgather({g})
        same(ax[1], ag[1], ('allgather %s n=%d'):format(dt, n))
      end
    end
    for _, dt in ipairs({'float32', 'float64'}) do
      for _, op in ipairs({'sum', 'avg', 'max', 'min'}) do
        local x = lunet.randn(1001):to(dt)
        local rx, rg = ref:reduce_scatter({x}, {op = op}), c:reduce_scatter({x:to(dev)}, {op = op})
        same(rx[1], rg[1], ('reduce_scatter %s %s'):format(op, dt))
      end
    end
  end)

  it_dev('send and recv to self: the value at the send; a recv with no send is an error', function()
    local c = comm.Communicator({dev})
    for _, dt in ipairs({'float32', 'int64', 'uint8'}) do
      local x = (lunet.randn(777) * 9):round():to(dt)
      local t = x:to(dev)
      c:send(t, 1)
      t:fill_(0)   -- after the send: the recv gets the value sent
      local u = lunet.zeros(777, {dtype = dt, device = dev})
      c:recv(u, 1)
      same(x, u, 'send/recv ' .. dt)
    end
    local e = err_of(function() c:recv(lunet.zeros(3, {device = dev}), 1) end)
    assert.truthy(e:find('recv', 1, true), e)
    c:barrier()
    lunet.synchronize(dev)
  end)

  it_dev('allreduce async runs on the comm stream; wait orders the compute stream after it', function()
    -- (a world of one reduces to the identity, so the order is not visible in
    -- the values: this checks the async path, its held storages and wait)
    local c = comm.Communicator({dev})
    local x = lunet.randn(1 + 2 ^ 20)
    local g = (x:to(dev) * 2) * 0.5
    c:allreduce({g}, {op = 'avg', async = true})
    c:allreduce({(x:to(dev) * 3)}, {op = 'sum', async = true})   -- its tensor dropped at once
    collectgarbage(); collectgarbage()
    c:wait()
    local h = g + 1
    same(x + 1, h, 'async allreduce, then compute')
  end)

  it_dev('float16/bfloat16 wire formats (compress) equal the local backend\'s rounding on CPU copies', function()
    local c, ref = comm.Communicator({dev}), comm.Communicator({'cpu:0'})
    for _, w in ipairs({'fp16', 'bf16'}) do
      for _, op in ipairs({'sum', 'avg', 'max', 'min'}) do
        for _, n in ipairs(SIZES) do
          local x = lunet.randn(n) * 100
          local g = x:to(dev)
          ref:allreduce({x}, {op = op, compress = w})
          c:allreduce({g}, {op = op, compress = w})
          same(x, g, ('allreduce %s compress %s n=%d'):format(op, w, n))
        end
        local x = lunet.randn(1001) * 100
        local rx = ref:reduce_scatter({x}, {op = op, compress = w})
        local rg = c:reduce_scatter({x:to(dev)}, {op = op, compress = w})
        same(rx[1], rg[1], ('reduce_scatter %s compress %s'):format(op, w))
      end
      local x = lunet.randn(4097) * 100
      local g = x:to(dev)
      ref:allreduce({x}, {op = 'avg', compress = w})
      c:allreduce({g}, {op = 'avg', compress = w, async = true})
      c:wait()
      same(x, g, 'async allreduce compress ' .. w)
    end
  end)

  it_dev('DataParallel over the one device goes through the communicator and trains as the model alone (1e-5)', function()
    local function model()
      lunet.manual_seed(11)
      return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 5))
    end
    local ref = model():to(dev)
    local dp = lunet.parallel.DataParallel(model(), {devices = {dev}, bucket_mb = 0.001})
    if on_cuda then
      assert.is_not_nil(dp.comm, 'DataParallel made no communicator')
      assert.equal('nccl', dp.comm:backend())
    end
    local ro = optim.SGD(ref:parameters(), {lr = 0.05, momentum = 0.9})
    local po = optim.SGD(dp:parameters(), {lr = 0.05, momentum = 0.9})
    local crit = nn.CrossEntropyLoss()
    lunet.manual_seed(3)
    for step = 1, 8 do
      local x = lunet.randn(16, 12):to(dev)
      local y = lunet.randint(1, 6, {16}):to(dev)
      ro:zero_grad(); po:zero_grad()
      local l1 = crit(ref(x), y); l1:backward(); ro:step()
      local l2 = crit(dp(x), y); l2:backward(); po:step()
      local a, b = l1:item(), l2:item()
      assert.is_true(math.abs(a - b) <= 1e-5 * math.max(1, math.abs(a)), ('step %d: loss %g vs %g'):format(step, b, a))
    end
    for i, p in ipairs(ref:parameters()) do
      local q = dp:parameters()[i]
      local d = (p - q):abs():max():item()
      assert.is_true(d <= 1e-5 * math.max(1, p:abs():max():item()), ('parameter %d differs by %g'):format(i, d))
    end
  end)
end)
