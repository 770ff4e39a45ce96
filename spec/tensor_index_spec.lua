-- index_select, gather, scatter_add_, cat, stack, split, chunk, unbind.
local lunet = require 'lunet'

local err_of = require('support.fixtures').err_of

local function long(t) return lunet.tensor(t, {dtype = 'int64'}) end

describe('index_select', function()
  local t = lunet.tensor{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}

  it('picks rows and columns with 1-based tables or int64 tensors', function()
    assert.same({{7, 8, 9}, {1, 2, 3}}, t:index_select(1, {3, 1}):totable())
    assert.same({{3, 3}, {6, 6}, {9, 9}}, t:index_select(2, long{3, 3}):totable())
    assert.same({{2}, {5}, {8}}, t:index_select(-1, {2}):totable())
    assert.same({{4, 5, 6}}, lunet.index_select(t, 1, lunet.tensor({2}, {dtype = 'int32'})):totable())
  end)

  it('works on non-contiguous inputs and keeps the dtype', function()
    local tt = t:t()
    assert.same({{3, 6, 9}, {1, 4, 7}}, tt:index_select(1, {3, 1}):totable())
    local i = lunet.tensor({10, 20, 30}, {dtype = 'int64'}):index_select(1, {3, 1})
    assert.equal('int64', i.dtype)
    assert.same({30, 10}, i:totable())
  end)

  it('an empty index gives an empty result', function()
    local e = t:index_select(1, lunet.zeros(0, {dtype = 'int64'}))
    assert.same({0, 3}, e:size())
  end)

  -- (values are checked by the kernel: on a queued device the error comes at
  -- the next sync, so these read the result inside the pcall)
  it('an out-of-range index fails naming the op and the index', function()
    assert.matches('index_select: index 4 is out of range for dim 1 of size 3',
      err_of(function() return t:index_select(1, {1, 4}):totable() end))
    assert.matches('index_select: index 0 is out of range', err_of(function() return t:index_select(2, {0}):totable() end))
  end)

  it('rejects float indices, 2-d indices and bad dims', function()
    assert.matches('index_select: index must be an int64 %(or int32%) tensor, got float32',
      err_of(function() return t:index_select(1, lunet.tensor{1}) end))
    assert.matches('index_select: index must be 1%-d', err_of(function() return t:index_select(1, long{{1}}) end))
    assert.matches('index_select: dim 3 out of range', err_of(function() return t:index_select(3, {1}) end))
    assert.matches('index_select: index must be a tensor or a table', err_of(function() return t:index_select(1, 'x') end))
  end)
end)

describe('gather', function()
  local t = lunet.tensor{{1, 2}, {3, 4}}

  it('follows torch.gather (out[i][j] = t[i][idx[i][j]] for dim 2)', function()
    assert.same({{1, 1}, {4, 3}}, t:gather(2, long{{1, 1}, {2, 1}}):totable())
    assert.same({{1, 4}, {3, 2}}, t:gather(1, long{{1, 2}, {2, 1}}):totable())
    -- a smaller index than the input
    assert.same({{2}, {3}}, t:gather(2, {{2}, {1}}):totable())
  end)

  it('picks class scores: logits:gather(2, labels:view(-1, 1))', function()
    local logits = lunet.tensor{{0.1, 0.7, 0.2}, {0.5, 0.3, 0.2}}
    local labels = long{2, 3}
    assert.tensor_near(logits:gather(2, labels:view(-1, 1)):view(-1), {0.7, 0.2}, 1e-7)
  end)

  it('checks index rank, shape and values', function()
    assert.matches('gather: index has 1 dims but the input has 2', err_of(function() return t:gather(1, long{1}) end))
    assert.matches('gather: index shape {3,1} does not fit the input shape {2,2}',
      err_of(function() return t:gather(2, long{{1}, {1}, {1}}) end))
    assert.matches('gather: index 3 is out of range for dim 2 of size 2',
      err_of(function() return t:gather(2, long{{1, 3}, {1, 1}}):totable() end))
  end)
end)

describe('scatter_add_', function()
  it('accumulates repeated indices (a histogram)', function()
    local counts = lunet.zeros(4)
    counts:scatter_add_(1, long{1, 3, 3, 4, 3}, lunet.ones(5))
    assert.same({1, 0, 3, 1}, counts:totable())
  end)

  it('follows torch.scatter_add_ along dim 1 and 2', function()
    local a = lunet.zeros(3, 2)
    a:scatter_add_(1, long{{1, 2}, {3, 1}}, lunet.tensor{{1, 2}, {3, 4}})
    assert.same({{1, 4}, {0, 2}, {3, 0}}, a:totable())
    local b = lunet.zeros(2, 3, {dtype = 'float64'})
    b:scatter_add_(2, long{{3, 3}, {1, 2}}, lunet.tensor({{1, 2}, {5, 6}}, {dtype = 'float64'}))
    assert.same({{0, 0, 3}, {5, 6, 0}}, b:totable())
  end)

  it('is the adjoint of gather: <gather(x, i), y> = <x, scatter_add(0, i, y)>', function()
    lunet.manual_seed(7)
    local x = lunet.randn(5, 6, {dtype = 'float64'})
    local i = lunet.randint(1, 6, {5, 4})
    local y = lunet.randn(5, 4, {dtype = 'float64'})
    local lhs = (x:gather(2, i) * y):sum():item()
    local rhs = (x * lunet.zeros(5, 6, {dtype = 'float64'}):scatter_add_(2, i, y)):sum():item()
    assert.near(lhs, rhs, 1e-12)
  end)

  it('out-of-range indices fail before anything is written', function()
    local a = lunet.zeros(3)
    assert.matches('scatter_add_: index 9 is out of range for dim 1 of size 3',
      err_of(function() a:scatter_add_(1, long{1, 9}, lunet.ones(2)):totable() end))
    assert.same({0, 0, 0}, a:totable())
  end)

  it('refuses mismatched dtypes, expanded targets and big indices', function()
    assert.matches('scatter_add_: src dtype float64 differs',
      err_of(function() lunet.zeros(3):scatter_add_(1, long{1}, lunet.ones(1, {dtype = 'float64'})) end))
    assert.matches('scatter_add_: cannot write in place to an expanded tensor',
      err_of(function() lunet.zeros(1):expand(3):scatter_add_(1, long{1}, lunet.ones(1)) end))
    assert.matches('scatter_add_: index shape {3} is larger than the src shape {2}',
      err_of(function() lunet.zeros(3):scatter_add_(1, long{1, 1, 1}, lunet.ones(2)) end))
    assert.matches('scatter_add_: src must be a tensor', err_of(function() lunet.zeros(3):scatter_add_(1, long{1}) end))
  end)

  it('scatter_add (no underscore) leaves the input alone', function()
    local a = lunet.zeros(2)
    local b = a:scatter_add(1, long{2}, lunet.tensor{5})
    assert.same({0, 5}, b:totable())
    assert.same({0, 0}, a:totable())
  end)
end)

describe('t[i] = v and t[{...}] = v', function()
  it('fill with a number, copy a tensor, its leading dims of size 1 dropped as PyTorch does', function()
    local y = lunet.zeros(3)
    y[2] = lunet.tensor({ 5 })   -- (a {1} into an element: it was "source shape {1} cannot be broadcast")
    y[3] = 4
    assert.same({ 0, 5, 4 }, y:totable())
    local z = lunet.zeros(2, 3)
    z[1] = lunet.tensor({ { 1, 2, 3 } })
    z[{ 2, { 1, 2 } }] = lunet.tensor({ { { 7, 8 } } })
    assert.same({ { 1, 2, 3 }, { 7, 8, 0 } }, z:totable())
    local ok, err = pcall(function() z[1] = lunet.ones(2, 3) end)
    assert.is_false(ok)
    assert.matches('copy_: source shape {2,3} cannot be broadcast to destination shape {3}', err, 1, true)
  end)
end)

describe('cat and stack', function()
  local a = lunet.tensor{{1, 2}, {3, 4}}
  local b = lunet.tensor{{5, 6}}

  it('cat joins along dim 1 by default, or any dim', function()
    assert.same({{1, 2}, {3, 4}, {5, 6}}, lunet.cat({a, b}):totable())
    assert.same({{1, 2, 1, 2}, {3, 4, 3, 4}}, lunet.cat({a, a}, 2):totable())
    assert.same({{1, 2, 1, 2}, {3, 4, 3, 4}}, lunet.cat({a, a}, -1):totable())
    assert.same({{1, 2}, {3, 4}, {5, 6}}, a:cat(b):totable())  -- torch7-style method
  end)

  it('cat promotes dtypes and takes non-contiguous parts', function()
    local c = lunet.cat({lunet.tensor({1, 2}, {dtype = 'int32'}), lunet.tensor{0.5}})
    assert.equal('float32', c.dtype)
    assert.same({1, 2, 0.5}, c:totable())
    assert.same({{1, 3, 1}, {2, 4, 2}}, lunet.cat({a:t(), a:t():narrow(2, 1, 1)}, 2):totable())
  end)

  it('cat skips 1-d empty tensors and keeps empty parts of the right shape', function()
    assert.same({{1, 2}, {3, 4}}, lunet.cat({lunet.zeros(0), a}):totable())
    assert.same({2, 2}, lunet.cat({a, lunet.zeros(0, 2)}):size())
  end)

  it('cat errors name the mismatch', function()
    assert.matches('cat: shapes must match except in dim 1: {2,2} and {1,3} %(tensor 2%)',
      err_of(function() return lunet.cat({a, lunet.zeros(1, 3)}) end))
    assert.matches('cat: expected a non%-empty list', err_of(function() return lunet.cat({}) end))
    assert.matches('cat: element 2 of the list must be a tensor, got number', err_of(function() return lunet.cat({a, 3}) end))
    assert.matches('cat: dim 3 out of range', err_of(function() return lunet.cat({a, a}, 3) end))
    assert.matches('cat: tensor 1 is 0%-d', err_of(function() return lunet.cat({lunet.tensor(1)}) end))
  end)

  it('stack adds a new dim at any position', function()
    local x, y = lunet.tensor{1, 2}, lunet.tensor{3, 4}
    assert.same({{1, 2}, {3, 4}}, lunet.stack({x, y}):totable())
    assert.same({{1, 3}, {2, 4}}, lunet.stack({x, y}, 2):totable())
    assert.same({{1, 3}, {2, 4}}, lunet.stack({x, y}, -1):totable())
    assert.same({2, 2, 2}, lunet.stack({a, a}, 3):size())
    assert.same({{{1, 1}, {2, 2}}, {{3, 3}, {4, 4}}}, lunet.stack({a, a}, 3):totable())
  end)

  it('stack errors on different shapes and bad dims', function()
    assert.matches('stack: all tensors must have the same shape: {2} %(tensor 1%) and {3} %(tensor 2%)',
      err_of(function() return lunet.stack({lunet.zeros(2), lunet.zeros(3)}) end))
    assert.matches('stack: dim 4 out of range', err_of(function() return lunet.stack({a, a}, 4) end))
  end)
end)

describe('split, chunk, unbind', function()
  local t = lunet.arange(10):view(5, 2)

  it('split by size: views sharing storage, the last one shorter', function()
    local parts = t:split(2)
    assert.equal(3, #parts)
    assert.same({{0, 1}, {2, 3}}, parts[1]:totable())
    assert.same({{8, 9}}, parts[3]:totable())
    assert.is_true(parts[2]:is_same_storage(t))
    local base = t:clone()
    base:split(2)[2]:fill_(-1)   -- writes through to rows 3 and 4
    assert.same({{0, 1}, {2, 3}, {-1, -1}, {-1, -1}, {8, 9}}, base:totable())
  end)

  it('split by a list of sizes, along another dim', function()
    local p = t:split({1, 4})
    assert.same({1, 2}, p[1]:size())
    assert.same({4, 2}, p[2]:size())
    local q = t:split(1, 2)
    assert.same({0, 2, 4, 6, 8}, q[1]:view(-1):totable())
    assert.matches('split: sizes add up to 4 but dim 1 has size 5', err_of(function() return t:split({1, 3}) end))
    assert.matches('split: size must be a positive integer', err_of(function() return t:split(0) end))
  end)

  it('chunk into n pieces (ceil size, as in PyTorch)', function()
    local c = lunet.arange(5):chunk(2)
    assert.equal(2, #c)
    assert.same({0, 1, 2}, c[1]:totable())
    assert.same({3, 4}, c[2]:totable())
    assert.equal(3, #lunet.arange(6):chunk(4))  -- sizes 2, 2, 2
    assert.matches('chunk: number of chunks must be a positive integer', err_of(function() return t:chunk(0) end))
  end)

  it('unbind removes a dim', function()
    local u = t:unbind(2)
    assert.equal(2, #u)
    assert.same({1, 3, 5, 7, 9}, u[2]:totable())
  end)
end)

describe('index errors on virtual devices', function()
  it('a bad index in a queued kernel surfaces at the next sync, naming the op', function()
    collectgarbage(); collectgarbage()
    local before = lunet.C.ln_cpu_device_count()
    lunet.set_cpu_devices(2)
    local ok, err = pcall(function()
      local x = lunet.zeros(4, {device = 'cpu:1'})
      local i = long{1, 7}:to('cpu:1')
      x:scatter_add_(1, i, lunet.ones(2, {device = 'cpu:1'}))   -- returns at once
      lunet.synchronize('cpu:1')
    end)
    local ok2, err2 = pcall(function()   -- the device works again after the error
      return lunet.ones(3, {device = 'cpu:1'}):sum():item()
    end)
    collectgarbage(); collectgarbage()
    lunet.set_cpu_devices(before)
    assert.is_false(ok)
    assert.matches('scatter_add_: index 7 is out of range for dim 1 of size 4', tostring(err))
    assert.matches('in scatter_add_, cpu:1', tostring(err))
    assert.is_true(ok2, tostring(err2))
    assert.equal(3, err2)
  end)

  it('reductions and cat run on virtual devices and match cpu:0', function()
    collectgarbage(); collectgarbage()
    local before = lunet.C.ln_cpu_device_count()
    lunet.set_cpu_devices(2)
    local ok, res = pcall(function()
      local x = lunet.arange(12):float():view(3, 4)
      local y = x:to('cpu:1')
      local v, i = y:max(2)
      return {y:sum(1):totable(), v:totable(), i:totable(), lunet.cat({y, y}, 2):sum():item(), y:var():item(), x:var():item()}
    end)
    collectgarbage(); collectgarbage()
    lunet.set_cpu_devices(before)
    assert.is_true(ok, tostring(res))
    assert.same({12, 15, 18, 21}, res[1])
    assert.same({3, 7, 11}, res[2])
    assert.same({4, 4, 4}, res[3])
    assert.equal(132, res[4])
    assert.equal(res[6], res[5])
  end)
end)
