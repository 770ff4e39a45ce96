-- The habits a PyTorch or Torch7 user brings (issue 22): `for x, y in loader`,
-- sizes that print, Torch7's x[{i, j}], nn.Module:extend for one's own
-- modules, and devices listed by type.
local lunet = require 'lunet'
local nn, data = lunet.nn, lunet.data

describe('for x, y in loader', function()
  local function loader(opts)
    local ds = data.TensorDataset(lunet.arange(10):view(10, 1):float(), lunet.arange(1, 11))
    return data.DataLoader(ds, opts)
  end

  it('iterates one epoch as loader:iter() does, each loop a new epoch', function()
    local a, b = loader({ batch_size = 4, shuffle = true, seed = 3 }), loader({ batch_size = 4, shuffle = true, seed = 3 })
    for epoch = 1, 2 do
      local got, want = {}, {}
      for _, y in a do got[#got + 1] = table.concat(y:totable(), ',') end
      for _, y in b:iter() do want[#want + 1] = table.concat(y:totable(), ',') end
      assert.same(want, got)
      assert.equal(3, #got)
      assert.equal(epoch, a.epoch)
    end
  end)

  it('starts a new epoch after a loop left early', function()
    local l = loader({ batch_size = 4 })
    for _ in l do break end
    local n = 0
    for _, y in l do n = n + 1; if n == 1 then assert.equal(1, y[1]:item()) end end
    assert.equal(3, n)
    assert.equal(2, l.epoch)
  end)

  it('works for datasets batched in Lua too', function()
    local Squares = data.Dataset:extend('Squares')
    function Squares:__init(n) self.n = n end
    function Squares:__len() return self.n end
    function Squares:get(i) return lunet.tensor { i }, i * i end
    local n, last = 0, nil
    for _, y in data.DataLoader(Squares(5), { batch_size = 2 }) do n = n + 1; last = y end
    assert.equal(3, n)
    assert.equal(25, last[1]:item())
  end)
end)

describe('sizes', function()
  it('print as {2, 3} and stay plain lists', function()
    local x = lunet.zeros(2, 3)
    assert.equal('{2, 3}', tostring(x:size()))
    assert.equal('{2, 3}', tostring(x.shape))
    assert.equal('{}', tostring(lunet.tensor(5):size()))
    local s = x:size()
    assert.equal(2, #s)
    assert.equal(3, s[2])
    assert.same({ 2, 3 }, { unpack(s) })
    assert.same({ 2, 3 }, s)
    assert.same({ 2, 3 }, lunet.ones(s):size())
    assert.equal(3, x:size(2))
  end)

  it('compare by value', function()
    assert.is_true(lunet.zeros(2, 3):size() == lunet.ones(2, 3):size())
    assert.is_false(lunet.zeros(2, 3):size() == lunet.ones(3, 2):size())
    assert.is_false(lunet.zeros(2, 3):size() == lunet.ones(2, 3, 1):size())
  end)
end)

describe("Torch7's table index", function()
  local x
  before_each(function() x = lunet.arange(1, 13):view(3, 4) end)   -- rows 1..4, 5..8, 9..12

  it('gives an element as a number when every dim is a number', function()
    assert.equal(2, x[{ 1, 2 }])
    assert.equal(12, x[{ -1, -1 }])
    assert.equal(7, x[{ 2, 3 }])
  end)

  it('gives views for ranges and partial indices', function()
    assert.same({ 3, 7 }, x[{ { 1, 2 }, 3 }]:totable())
    assert.same({ 2, 6, 10 }, x[{ {}, 2 }]:totable())
    assert.same({ { 5, 6, 7, 8 } }, x[{ { 2 } }]:totable())
    assert.same({ 5, 6, 7, 8 }, x[{ 2 }]:totable())
    assert.same({ { 7, 8 }, { 11, 12 } }, x[{ { 2, -1 }, { -2, -1 } }]:totable())
    local v = x[{ { 2, 3 }, 1 }]
    v:fill_(0)
    assert.equal(0, x[{ 3, 1 }])   -- a view: it writes through
  end)

  it('assigns numbers and tensors', function()
    x[{ 1, 1 }] = 100
    x[{ { 2, 3 }, { 3, 4 } }] = 0
    x[{ 3, { 1, 2 } }] = lunet.tensor({ -1, -2 }, { dtype = 'int64' })
    assert.same({ { 100, 2, 3, 4 }, { 5, 6, 0, 0 }, { -1, -2, 0, 0 } }, x:totable())
  end)

  it('names bad indices instead of returning nil', function()
    local cases = {
      { function() return x[{ 4, 1 }] end, 'index: index 4 is out of range for dim 1 of size 3' },
      { function() return x[{ 1, 2, 3 }] end, 'index: 3 indices for a 2-d tensor' },
      { function() return x[{ { 3, 1 } }] end, 'index: range {3, 1} is out of range for dim 1 of size 3' },
      { function() return x[{ 'a' }] end, 'index: index 1 must be a number or a {first, last} range, got string' },
      { function() return x[{ a = 1 }] end, 'index: a table index is a list of numbers' },
      { function() return x[{ { 1, 2, 3 } }] end, 'index: the range for dim 1 must be {first, last}' },
      { function() return x[{ 1.5 }] end, 'index: index 1.5 is out of range' },
      { function() return x[true] end, 'index: a tensor is indexed by a number or a table, got boolean' },
      { function() x[{ 9 }] = 1 end, 'index: index 9 is out of range' },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok)
      assert.truthy(tostring(err):find(c[2], 1, true), err)
      assert.truthy(tostring(err):find('usability_spec.lua', 1, true), err)   -- at the user's line
    end
  end)
end)

describe('nn.Module:extend', function()
  it('makes a module whose fields register children and parameters', function()
    local Net = nn.Module:extend('Net')
    function Net:__init(hidden)
      self.fc1 = nn.Linear(4, hidden)
      self.fc2 = nn.Linear(hidden, 3)
      self.scale = lunet.ones(3):requires_grad_()
    end
    function Net:forward(x) return self.fc2(self.fc1(x):relu()) * self.scale end
    local net = Net(8)
    assert.equal(5, #net:parameters())
    local keys = {}
    for k in pairs(net:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.same({ 'fc1.bias', 'fc1.weight', 'fc2.bias', 'fc2.weight', 'scale' }, keys)
    local y = net(lunet.randn(2, 4))
    assert.same({ 2, 3 }, y:size())
    y:sum():backward()
    assert.is_not_nil(net.fc1.weight.grad)
    assert.truthy(tostring(net):find('(fc1): nn.Linear(4 -> 8)', 1, true), tostring(net))
    net:eval()
    assert.is_false(net.fc2.training)
  end)
end)

describe('devices by type', function()
  it('lists no CUDA devices without GPUs, the CPU devices for cpu, and names unknown types', function()
    local ncuda = lunet.C.ln_cuda_device_count()
    assert.equal(ncuda, lunet.device_count('cuda'))
    assert.equal(ncuda, #lunet.devices('cuda'))
    local ncpu = lunet.C.ln_cpu_device_count()
    assert.equal(ncpu, lunet.device_count('cpu'))
    assert.equal('cpu:0', lunet.devices('cpu')[1])
    assert.equal(ncpu, #lunet.devices('cpu'))
    if ncuda == 0 then
      assert.same({}, lunet.devices('cuda'))
      assert.same(lunet.devices(), lunet.devices('cpu'))
      assert.equal(lunet.device_count(), lunet.device_count('cpu'))
    end
    for _, f in ipairs({ 'devices', 'device_count' }) do
      local ok, err = pcall(lunet[f], 'tpu')
      assert.is_false(ok)
      assert.truthy(err:find(f .. ": unknown device type 'tpu' (expected 'cpu' or 'cuda')", 1, true), err)
      ok, err = pcall(lunet[f], 3)
      assert.is_false(ok)
      assert.truthy(err:find(f .. ': unknown device type 3', 1, true), err)
    end
  end)

  it('counts virtual CPU devices by type in a child process', function()
    local p = io.popen([[LUNET_CPU_DEVICES=2 luajit -e "local l = require 'lunet'
      print(l.device_count('cpu'), l.device_count('cuda'), table.concat(l.devices('cpu'), ' '))" 2>&1]])
    local out = p:read('*a'); p:close()
    if lunet.C.ln_cuda_device_count() == 0 then assert.equal('2\t0\tcpu:0 cpu:1\n', out) end
  end)
end)

describe('OpenMP wait policy', function()
  -- libgomp prints the settings it took at start-up (OMP_DISPLAY_ENV)
  local function omp_env(vars)
    local p = io.popen(('env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT %s OMP_DISPLAY_ENV=verbose luajit -e "'
      .. "local l = require 'lunet'; l.ones(4):sum():item(); print('ran')" .. '" 2>&1'):format(vars))
    local out = p:read('*a'); p:close()
    assert.truthy(out:find('ran\n', 1, true), out)
    return out:match("OMP_WAIT_POLICY = '(%a+)'"), out:match("GOMP_SPINCOUNT = '(%d+)'")
  end

  it('is chosen by the load when lunet loads: passive on busy cores, else libgomp\'s spinning default', function()
    local core = require 'lunet.core'
    assert.equal('passive', core.choose_wait_policy(2.0, 2))
    assert.equal('passive', core.choose_wait_policy(1.6, 2))
    assert.equal('default', core.choose_wait_policy(1.4, 2))
    assert.equal('default', core.choose_wait_policy(0.0, 16))
    assert.equal('passive', core.choose_wait_policy(40, 16))
    assert.equal('default', core.choose_wait_policy(nil, 2))
    -- in a child, what libgomp took is what lunet chose (its choice printed)
    local p = io.popen('env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose luajit -e "'
      .. "local l = require 'lunet'; l.ones(4):sum():item(); print('chose ' .. require('lunet.core').wait_policy)"
      .. '" 2>&1')
    local out = p:read('*a'); p:close()
    local chose = out:match('chose (%a+)')
    assert.truthy(chose, out)
    local policy, spin = out:match("OMP_WAIT_POLICY = '(%a+)'"), out:match("GOMP_SPINCOUNT = '(%d+)'")
    if chose == 'passive' then
      assert.equal('PASSIVE', policy); assert.equal('0', spin)
    else
      assert.equal('default', chose)
      assert.are_not.equal('0', spin)   -- (libgomp prints PASSIVE for an unset policy; its spin count tells)
    end
  end)

  it("is the user's when OMP_WAIT_POLICY or GOMP_SPINCOUNT is set", function()
    assert.equal('ACTIVE', (omp_env('OMP_WAIT_POLICY=active')))
    local _, spin = omp_env('GOMP_SPINCOUNT=300000')
    assert.equal('300000', spin)
    _, spin = omp_env('GOMP_SPINCOUNT=1000')
    assert.equal('1000', spin)
  end)
end)
