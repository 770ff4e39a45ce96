-- Elementwise ops, clamp, where, fill/copy, matrix products: values against
-- Lua's float64 math, broadcasting edge cases, views, empty tensors, errors.
local lunet = require 'lunet'

local err_of = require('support.fixtures').err_of

local function map(t, f) local r = {} for i, v in ipairs(t) do r[i] = f(v) end return r end

local xs = {-2.5, -1, -0.25, 0, 0.3, 1, 2.75}
local pos = {0.1, 0.5, 1, 2, 7.5}

describe('unary ops', function()
  local function erf(x)  -- float64 reference (Abramowitz-Stegun 7.1.26 is too coarse): series/continued
    local s, term, n = x, x, 0
    repeat n = n + 1; term = term * -x * x / n; s = s + term / (2 * n + 1) until math.abs(term) < 1e-17 or n > 200
    return 2 / math.sqrt(math.pi) * s
  end
  local cases = {
    {'neg', xs, function(x) return -x end}, {'abs', xs, math.abs}, {'exp', xs, math.exp},
    {'log', pos, math.log}, {'sqrt', pos, math.sqrt}, {'rsqrt', pos, function(x) return 1 / math.sqrt(x) end},
    {'tanh', xs, math.tanh}, {'sigmoid', xs, function(x) return 1 / (1 + math.exp(-x)) end},
    {'relu', xs, function(x) return math.max(x, 0) end}, {'sin', xs, math.sin}, {'cos', xs, math.cos},
    {'sign', xs, function(x) return x > 0 and 1 or x < 0 and -1 or 0 end},
    {'floor', xs, math.floor}, {'ceil', xs, math.ceil}, {'reciprocal', pos, function(x) return 1 / x end},
    {'log1p', pos, function(x) return math.log(1 + x) end}, {'expm1', xs, function(x) return math.exp(x) - 1 end},
    {'square', xs, function(x) return x * x end}, {'erf', xs, erf},
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ' matches float64 math in float32 and float64', function()
      local ref = map(c[2], c[3])
      assert.tensor_near(lunet.tensor(c[2])[c[1]](lunet.tensor(c[2])), ref, 1e-6)
      local d = lunet.tensor(c[2], {dtype = 'float64'})
      assert.tensor_near(d[c[1]](d), ref, 1e-12)
    end)
  end

  it('round is half to even, as in PyTorch', function()
    assert.same({0, 2, 2, -0, -2}, lunet.tensor{0.5, 1.5, 2.5, -0.5, -1.5}:round():totable())
  end)

  it('in-place forms write into the tensor and return it', function()
    local t = lunet.tensor{1, 4, 9}
    local r = t:sqrt_()
    assert.equal(t, r)
    assert.same({1, 2, 3}, t:totable())
    t:neg_():exp_()
    assert.tensor_near(t, {math.exp(-1), math.exp(-2), math.exp(-3)}, 1e-6)
  end)
end)

describe('binary ops', function()
  local a = lunet.tensor{-3, -1.5, 2, 5}
  local b = lunet.tensor{2, 0.5, -4, 3}
  it('arithmetic, pow, maximum/minimum, fmod, atan2 against float64', function()
    local A, B = a:totable(), b:totable()
    local function ref(f) local r = {} for i = 1, 4 do r[i] = f(A[i], B[i]) end return r end
    assert.tensor_near(a + b, ref(function(x, y) return x + y end), 0)
    assert.tensor_near(a - b, ref(function(x, y) return x - y end), 0)
    assert.tensor_near(a * b, ref(function(x, y) return x * y end), 0)
    assert.tensor_near(a / b, ref(function(x, y) return x / y end), 1e-7)
    assert.tensor_near(a:abs() ^ b, ref(function(x, y) return math.abs(x) ^ y end), 1e-6)
    assert.tensor_near(a:maximum(b), ref(math.max), 0)
    assert.tensor_near(a:minimum(b), ref(math.min), 0)
    assert.tensor_near(a:fmod(b), ref(math.fmod), 1e-7)
    assert.tensor_near(a:atan2(b), ref(function(y, x) return math.atan2(y, x) end), 1e-6)
    assert.tensor_near(lunet.pow(2, b), map(B, function(y) return 2 ^ y end), 1e-6)
  end)

  it('% is the remainder with the sign of the divisor (as Lua and PyTorch); fmod keeps the dividend\'s', function()
    local v = {7, -7, 5.5, -5.5, 6, 0}
    local t = lunet.tensor(v)
    assert.same(map(v, function(x) return x % 3 end), (t % 3):totable())
    assert.same(map(v, function(x) return x % -2 end), (t % -2):totable())
    assert.same(map(v, function(x) return math.fmod(x, 3) end), t:fmod(3):totable())
    local i = lunet.tensor({7, -7, 7, -7}, {dtype = 'int64'})
    local d = lunet.tensor({3, 3, -3, -3}, {dtype = 'int64'})
    assert.equal('int64', (i % d).dtype)
    assert.same({7 % 3, -7 % 3, 7 % -3, -7 % -3}, (i % d):totable())
    assert.same({10 % 3, 10 % -3}, (10 % lunet.tensor{3, -3}):totable())
  end)

  it('add/sub with alpha, as torch.add(a, b, alpha=...)', function()
    assert.same({1, -0.5, -6, 11}, a:add(b, 2):totable())
    assert.same({-7, -2.5, 10, -1}, a:sub(b, 2):totable())
    local c = a:clone()
    c:add_(b, -1)
    assert.same((a - b):totable(), c:totable())
  end)

  it('in-place binary ops broadcast the right operand into the target', function()
    local m = lunet.zeros(2, 3)
    m:add_(lunet.tensor{1, 2, 3})
    m:mul_(lunet.tensor{{2}, {3}})
    assert.same({{2, 4, 6}, {3, 6, 9}}, m:totable())
    m:div_(2):sub_(1)
    assert.same({{0, 1, 2}, {0.5, 2, 3.5}}, m:totable())
    assert.matches("add_: shape {2,3} cannot be broadcast into the in%-place target's shape {3}",
      err_of(function() lunet.zeros(3):add_(lunet.zeros(2, 3)) end))
  end)

  it('NaN and infinities propagate', function()
    local r = (lunet.tensor{1, -1, 0} / 0):totable()
    assert.equal(math.huge, r[1])
    assert.equal(-math.huge, r[2])
    assert.is_true(r[3] ~= r[3])
    local m = lunet.tensor{0 / 0, 1}:maximum(lunet.tensor{1, 0 / 0}):totable()
    assert.is_true(m[1] ~= m[1] and m[2] ~= m[2])
  end)
end)

describe('broadcasting', function()
  it('0-d with n-d, leading dims, and both sides expanding', function()
    local s = lunet.tensor(10)
    assert.same({{11, 12}}, (s + lunet.tensor{{1, 2}}):totable())
    assert.same({2, 3, 4}, (lunet.zeros(3, 1) + lunet.zeros(2, 1, 4)):size())
    local r = lunet.tensor{{1}, {2}} * lunet.tensor{{10, 20, 30}}
    assert.same({{10, 20, 30}, {20, 40, 60}}, r:totable())
  end)

  it('size-0 dims broadcast against 1 and stay empty', function()
    assert.same({0, 4}, (lunet.zeros(0, 1) + lunet.zeros(1, 4)):size())
    assert.same({0, 3}, (lunet.zeros(0, 3) * 2):size())
    assert.equal(0, lunet.zeros(0):exp():numel())
    assert.matches('add: shapes {0} and {2} cannot broadcast', err_of(function() return lunet.zeros(0) + lunet.zeros(2) end))
  end)

  it('non-contiguous operands give the contiguous answer (large parallel path too)', function()
    lunet.manual_seed(11)
    local x = lunet.randn(300, 257)
    local y = lunet.randn(257, 300)
    local ref = x + y:t():contiguous()
    assert.is_true((x + y:t()):equal(ref))
    local n = x:narrow(2, 5, 200)
    assert.is_true(n:exp():equal(n:contiguous():exp()))
    local e = lunet.randn(300, 1):expand(300, 257)
    assert.is_true((x * e):equal(x * e:contiguous()))
  end)
end)

describe('clamp, where, fill, copy', function()
  it('clamp with both, one or open bounds, on ints too', function()
    local t = lunet.tensor{-2, 0.5, 3}
    assert.same({-1, 0.5, 1}, t:clamp(-1, 1):totable())
    assert.same({0, 0.5, 3}, t:clamp(0):totable())
    assert.same({-2, 0.5, 1}, t:clamp(nil, 1):totable())
    assert.same({0, 1, 1}, lunet.tensor({-5, 1, 9}, {dtype = 'int64'}):clamp(0, 1):totable())
    local c = t:clone()
    c:clamp_(0, 2)
    assert.same({0, 0.5, 2}, c:totable())
    assert.matches('clamp: min 2 is greater than max 1', err_of(function() return t:clamp(2, 1) end))
  end)

  it('where picks by a broadcast bool condition and promotes the branches', function()
    local cond = lunet.tensor{{true, false, true}}
    local r = lunet.where(cond, lunet.tensor{{1}, {2}}, lunet.tensor({0, 0, 0}, {dtype = 'float64'}))
    assert.equal('float64', r.dtype)
    assert.same({{1, 0, 1}, {2, 0, 2}}, r:totable())
    local x = lunet.tensor{-1, 2, -3}
    assert.same({0, 2, 0}, x:where(x:gt(0), lunet.zeros(3)):totable())
    assert.matches('where: condition must be bool, got float32',
      err_of(function() return lunet.where(lunet.ones(1), lunet.ones(1), lunet.ones(1)) end))
  end)

  it('where takes Lua numbers for either branch (PyTorch\'s dtype rule for them)', function()
    local x = lunet.tensor{-1, 2, -3}
    local c = x:gt(0)
    local r = x:where(c, 0)
    assert.equal('float32', r.dtype)
    assert.same({0, 2, 0}, r:totable())
    assert.same({7, 2, 7}, lunet.where(c:logical_not(), 7, x):totable())
    local i = lunet.tensor({1, 2, 3}, {dtype = 'int32'})
    assert.equal('int32', lunet.where(c, i, 9).dtype)       -- an integer keeps the tensor's dtype
    local f = lunet.where(c, i, 0.5)                          -- a fraction beside integers: float32
    assert.equal('float32', f.dtype)
    assert.same({0.5, 2, 0.5}, f:totable())
    local both = lunet.where(c, 1, 0)
    assert.equal('int64', both.dtype)
    assert.same({0, 1, 0}, both:totable())
    assert.equal('float32', lunet.where(c, 1.5, 0).dtype)
    assert.matches('where: input must be a tensor, got string', err_of(function() return lunet.where(c, 'a', 1) end))
  end)

  it('integer tensors to negative integer powers are an error, not a truncated result', function()
    local i = lunet.tensor({2, 3}, {dtype = 'int64'})
    assert.matches('pow: integers to negative integer powers are not allowed %(exponent %-1 on int64',
      err_of(function() return i:pow(-1) end))
    assert.matches('pow_: integers to negative integer powers', err_of(function() return i:clone():pow_(-2) end))
    assert.same({4, 9}, i:pow(2):totable())
    assert.same({0.5, 0.25}, lunet.tensor({2, 4}):pow(-1):totable())
  end)

  it('fill_, zero_ and copy_ across dtypes and into views', function()
    local t = lunet.zeros(2, 3, {dtype = 'int32'})
    t:fill_(7)
    assert.same({{7, 7, 7}, {7, 7, 7}}, t:totable())
    t:select(2, 2):zero_()
    assert.same({{7, 0, 7}, {7, 0, 7}}, t:totable())
    t:t():copy_(lunet.tensor{{1, 2}, {3, 4}, {5, 6}})
    assert.same({{1, 3, 5}, {2, 4, 6}}, t:totable())
    assert.same({true, true}, lunet.zeros(2, {dtype = 'bool'}):fill_(true):totable())
    assert.matches('fill_: value must be a number, got string', err_of(function() t:fill_('x') end))
  end)
end)

describe('matrix products', function()
  local function ref_mm(A, B)
    local r = {}
    for i = 1, #A do
      r[i] = {}
      for j = 1, #B[1] do
        local s = 0
        for k = 1, #B do s = s + A[i][k] * B[k][j] end
        r[i][j] = s
      end
    end
    return r
  end

  it('matmul/mm match a float64 triple loop, transposed operands included', function()
    lunet.manual_seed(5)
    local a, b = lunet.randn(7, 13), lunet.randn(13, 5)
    local r = ref_mm(a:totable(), b:totable())
    assert.tensor_near(a:matmul(b), r, 1e-5)
    assert.tensor_near(a:t():contiguous():t():mm(b), r, 1e-5)
    assert.tensor_near(a:mm(b:t():contiguous():t()), r, 1e-5)
    local d = a:double():matmul(b:double())
    assert.tensor_near(d, r, 1e-12)
  end)

  it('mv, dot, 1-d promotion and batched broadcasting', function()
    local m = lunet.tensor{{1, 2}, {3, 4}}
    local v = lunet.tensor{1, 1}
    assert.same({3, 7}, m:mv(v):totable())
    assert.equal(11, lunet.tensor{1, 2}:dot(lunet.tensor{3, 4}):item())
    assert.same({4, 6}, v:matmul(m):totable())
    assert.same({5, 2, 4}, lunet.ones(5, 2, 3):matmul(lunet.ones(3, 4)):size())
    assert.same({2, 4}, lunet.ones(3):matmul(lunet.ones(2, 3, 4)):size())
    assert.equal(3, lunet.ones(5, 2, 3):matmul(lunet.ones(3, 4))[5][2][4]:item())
  end)

  it('bmm and addmm (beta, alpha) against hand values', function()
    local a = lunet.tensor{{{1, 2}}, {{3, 4}}}        -- 2x1x2
    local b = lunet.tensor{{{1}, {1}}, {{2}, {0}}}     -- 2x2x1
    assert.same({{{3}}, {{6}}}, a:bmm(b):totable())
    local c = lunet.tensor{1, 2}
    local r = c:addmm(lunet.tensor{{1, 2}, {3, 4}}, lunet.eye(2), {beta = 2, alpha = 3})
    assert.same({{5, 10}, {11, 16}}, r:totable())
  end)

  it('errors name the op and the shapes', function()
    assert.matches('matmul: shapes {2,3} and {2,3} are not aligned', err_of(function() return lunet.ones(2, 3):matmul(lunet.ones(2, 3)) end))
    assert.matches('matmul: needs float32 or float64 tensors, got int64', err_of(function() return lunet.arange(4):view(2, 2):matmul(lunet.arange(4):view(2, 2)) end))
    assert.matches('matmul: dtypes differ %(float32 and float64%)', err_of(function() return lunet.ones(2, 2):matmul(lunet.ones(2, 2, {dtype = 'float64'})) end))
    assert.matches('mm: needs two 2%-d tensors', err_of(function() return lunet.ones(2):mm(lunet.ones(2, 2)) end))
    assert.matches('matmul: second argument must be a tensor, got nil', err_of(function() return lunet.ones(2, 2):matmul(nil) end))
  end)
end)

describe('memory of temporaries', function()
  it('dropped temporaries are collected before they pile up (the GC sees only handles)', function()
    -- (from a collection that re-arms the trigger: an earlier spec's peak
    -- may have left the next collection at twice that peak)
    require('lunet.tensor').collect_rearm()
    local base = lunet.memory_allocated()
    local a = lunet.ones(1024, 1024)          -- 4 MB
    for _ = 1, 150 do local r = a + a end      -- 600 MB if nothing were collected
    local grown = lunet.memory_allocated() - base
    assert.is_true(grown < 400 * 2 ^ 20, ('%.0f MB still allocated'):format(grown / 2 ^ 20))
    a = nil
    collectgarbage()
  end)
end)

describe('argument errors', function()
  it('name the function for nil, wrong types and mismatched devices', function()
    assert.matches('add: second argument must be a tensor, got nil', err_of(function() return lunet.ones(2) + nil end))
    assert.matches('mul: second argument must be a tensor, got string', err_of(function() return lunet.ones(2) * 'x' end))
    assert.matches('exp: input must be a tensor, got number', err_of(function() return lunet.exp(3) end))
    assert.matches('copy_: source must be a tensor, got table', err_of(function() return lunet.ones(2):copy_({1, 2}) end))
    assert.matches('tensor: element must be a number, got string', err_of(function() return lunet.tensor{1, 'a'} end))
    assert.matches("zeros: invalid device gpu", err_of(function() return lunet.zeros(2, {device = 'gpu'}) end))
    assert.matches('zeros: no device cpu:5', err_of(function() return lunet.zeros(2, {device = 'cpu:5'}) end))
  end)
end)
