-- sinh, cosh, asinh, acosh, atanh, asin, acos, atan (and their arc* names),
-- log2, log10, exp2, trunc (fix), frac, logit, hypot, logaddexp, logaddexp2
-- and isclose against PyTorch 1.13: values and float64 gradients from
-- spec/fixtures/tensor_more_math.safetensors (written by
-- tools/gen_tensor_more_math_fixtures.py) inside the domains, at special
-- values (inf, NaN, -0.0, the domains' edges and beyond), for integer and
-- bool inputs and broadcasting operands; then the in-place forms, aliases,
-- views, empty and 0-d tensors, the default dtype, finite-difference
-- gradchecks and the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'

local fx, cases = fixtures.load_fixture('tensor_more_math')

local UNARY = { 'sinh', 'cosh', 'asinh', 'acosh', 'atanh', 'asin', 'acos', 'atan', 'log2', 'log10', 'exp2',
  'trunc', 'frac' }
local BINARY = { 'hypot', 'logaddexp', 'logaddexp2' }
local ALIASES = { arcsin = 'asin', arccos = 'acos', arctan = 'atan', arcsinh = 'asinh', arccosh = 'acosh',
  arctanh = 'atanh', fix = 'trunc' }

-- (here, not support.fixtures': errors raised at the caller's level name this file)
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'no error')
  return tostring(e)
end

-- the case's op on a (and b), as a method or through lunet[op]
local function call(case, a, b, functional)
  local f = functional and lunet[case.op] or lunet.Tensor[case.op]
  if case.op == 'logit' then return f(a, case.opts.eps) end
  if b then return f(a, b) end
  return f(a)
end

local function tol_of(dtype) return dtype == 'float32' and 2e-6 or 1e-12 end

-- same dtype, shape and values (NaN equal to NaN, infinities exactly)
local function assert_close(want, got, tol, what)
  assert.equal(want.dtype, got.dtype, what)
  assert.same(want:size(), got:size(), what)
  assert.tensor_near(got, want, tol)
end

-- a contiguous tensor's values in a transposed (non-contiguous) layout
local function strided(t)
  if t:dim() < 2 or t:size(1) == 1 or t:size(2) == 1 then return t end
  local s = t:transpose(1, 2):contiguous():transpose(1, 2)
  assert.is_false(s:is_contiguous())
  return s
end

describe('more math against PyTorch 1.13 (fixtures)', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 120, tostring(#cases)) end)

  for _, case in ipairs(cases) do
    local name = case.name
    if case.kind == 'grad' then
      it(name .. ': float64 values and gradients, float32 values, views, the functional form', function()
        local a, b = fx[name .. '.a'], fx[name .. '.b']
        local a64 = a:double():requires_grad_()
        local b64 = b and b:double():requires_grad_()
        local out = call(case, a64, b64)
        assert_close(fx[name .. '.out'], out, 1e-12, 'out')
        out:backward(fx[name .. '.dout']:double())
        assert_close(fx[name .. '.da'], a64.grad, 1e-10, 'da')
        if b then assert_close(fx[name .. '.db'], b64.grad, 1e-10, 'db') end
        local want32 = fx[name .. '.out']:float()
        local got32 = call(case, a, b)
        assert.equal('float32', got32.dtype)
        assert.tensor_near(got32, want32, 2e-6)
        assert.tensor_near(call(case, strided(a), b and strided(b), true), got32, 0)
      end)
    elseif case.kind == 'values' then
      it(name .. ': values' .. (case.grad and ' and gradients' or ''), function()
        local a, b = fx[name .. '.a'], fx[name .. '.b']
        local want = fx[name .. '.out']
        assert_close(want, call(case, a, b), tol_of(want.dtype))
        assert_close(want, call(case, a, b, true), tol_of(want.dtype), 'functional')
        if case.grad then
          local ag, bg = a:clone():requires_grad_(), b and b:clone():requires_grad_()
          call(case, ag, bg):sum():backward()
          assert_close(fx[name .. '.da'], ag.grad, 1e-12, 'da')
          if b then assert_close(fx[name .. '.db'], bg.grad, 1e-12, 'db') end
        end
      end)
    elseif case.kind == 'isclose' then
      it(name, function()
        local a, b = fx[name .. '.a'], fx[name .. '.b']
        local opts = next(case.opts) and case.opts or nil
        assert_close(fx[name .. '.out'], lunet.isclose(a, b, opts), 0)
        assert_close(fx[name .. '.out'], a:isclose(b, opts), 0, 'method')
      end)
    end
  end
end)

describe('more math: forms, shapes and dtypes', function()
  local x = lunet.tensor({ { -0.7, 0.3, 0.9 }, { 0.1, -0.2, 0.5 } }, { dtype = 'float64' })

  it('works in place (the _ forms), on views too', function()
    for _, op in ipairs(UNARY) do
      local want = x[op](x)
      local y = x:clone()
      assert.equal(y, y[op .. '_'](y))
      assert.tensor_near(y, want, 0)
      local z = x:clone():t()   -- (a transposed view, written through)
      z[op .. '_'](z)
      assert.tensor_near(z, want:t(), 0)
    end
    local y = x:clone()
    y:hypot_(lunet.tensor({ 3, 4, 0 }, { dtype = 'float64' }))
    assert.tensor_near(y, x:hypot(lunet.tensor({ 3, 4, 0 }, { dtype = 'float64' })), 0)
    local l = x:clone():logit_(0.2)
    assert.tensor_near(l, x:logit(0.2), 0)
    -- (torch has no logaddexp_ nor logaddexp2_)
    assert.is_nil(lunet.Tensor.logaddexp_)
    assert.is_nil(lunet.Tensor.logaddexp2_)
  end)

  it('has PyTorch\'s other names', function()
    for alias, op in pairs(ALIASES) do
      assert.tensor_near(x[alias](x), x[op](x), 0)
      assert.tensor_near(lunet[alias](x), x[op](x), 0)
      local y = x:clone()
      y[alias .. '_'](y)
      assert.tensor_near(y, x[op](x), 0)
    end
    -- the aliases record too
    local a = x:clone():requires_grad_()
    a:arcsin():sum():backward()
    assert.tensor_near(a.grad, (1 - x * x):rsqrt(), 1e-12)
  end)

  it('keeps empty and 0-d shapes', function()
    local e = lunet.zeros({ 0, 3 })
    for _, op in ipairs(UNARY) do
      assert.same({ 0, 3 }, e[op](e):size())
      assert.same({}, lunet.tensor(0.5)[op](lunet.tensor(0.5)):size())
    end
    assert.same({ 0, 3 }, e:logit():size())
    for _, op in ipairs(BINARY) do
      assert.same({ 0, 3 }, lunet[op](e, lunet.zeros({ 1, 3 })):size())
      assert.same({ 2, 0, 3 }, lunet[op](lunet.zeros({ 2, 1, 1 }), e):size())
    end
    assert.same({ 0, 3 }, lunet.isclose(e, lunet.zeros({ 3 })):size())
    assert.equal('bool', lunet.isclose(e, lunet.zeros({ 3 })).dtype)
  end)

  it('takes a Lua number on either side of hypot and logaddexp', function()
    local t = lunet.tensor({ 3, -0.5 })
    assert.tensor_near(lunet.hypot(t, 4), { 5, math.sqrt(16.25) }, 1e-6)
    assert.tensor_near(lunet.hypot(4, t), { 5, math.sqrt(16.25) }, 1e-6)
    assert.tensor_near(t:logaddexp(1), { math.log(math.exp(3) + math.exp(1)), math.log(math.exp(-0.5) + math.exp(1)) }, 1e-6)
    assert.tensor_near(lunet.logaddexp2(1, t), { math.log(8 + 2) / math.log(2), math.log(2 ^ -0.5 + 2) / math.log(2) }, 1e-6)
  end)

  it('promotes integer inputs to the default float dtype', function()
    local i = lunet.tensor({ 1, 2 }, { dtype = 'int64' })
    assert.equal('float32', i:sinh().dtype)
    assert.equal('int64', i:trunc().dtype)
    lunet.set_default_dtype('float64')
    local ok, err = pcall(function()
      for _, op in ipairs(UNARY) do
        if op ~= 'trunc' and op ~= 'frac' then assert.equal('float64', i[op](i).dtype, op) end
      end
      assert.equal('float64', i:logit().dtype)
      assert.equal('int64', i:fix().dtype)
      assert.equal('bool', lunet.isclose(i, i, { rtol = 0.1 }).dtype)
    end)
    lunet.set_default_dtype('float32')
    assert(ok, err)
  end)

  it('gives logit(1 - eps) everywhere for an eps over 0.5 (PyTorch\'s vectorized kernel)', function()
    local t = lunet.tensor({ -1, 0, 0.5, 0.9, 1, 2 }, { dtype = 'float64' })
    local want = math.log(0.3 / 0.7)
    assert.tensor_near(t:logit(0.7), { want, want, want, want, want, want }, 1e-12)
  end)

  it('handles logaddexp\'s infinities as PyTorch', function()
    local inf = math.huge
    local a = lunet.tensor({ -inf, inf, -inf, 1000, -1000 }, { dtype = 'float64' })
    local b = lunet.tensor({ -inf, inf, 0, 1000, -1000 }, { dtype = 'float64' })
    assert.tensor_near(lunet.logaddexp(a, b), { -inf, inf, 0, 1000 + math.log(2), -1000 + math.log(2) }, 1e-14)
    assert.tensor_near(lunet.logaddexp2(a, b), { -inf, inf, 0, 1001, -999 }, 1e-14)
  end)
end)

describe('more math: gradchecks (float64 finite differences)', function()
  local function rand(lo, hi, ...)
    return (lunet.rand({ ... }, { dtype = 'float64' }) * (hi - lo) + lo):requires_grad_()
  end
  local DOM = { acosh = { 1.2, 3 }, atanh = { -0.9, 0.9 }, asin = { -0.9, 0.9 }, acos = { -0.9, 0.9 },
    log2 = { 0.2, 3 }, log10 = { 0.2, 3 }, trunc = { 0.1, 0.9 }, frac = { 0.1, 0.9 } }

  for _, op in ipairs(UNARY) do
    it(op, function()
      local d = DOM[op] or { -2, 2 }
      local ok, msg = gradcheck(function(a) return a[op](a) end, { rand(d[1], d[2], 3, 4) })
      assert(ok, msg)
    end)
  end

  it('logit with and without eps', function()
    local ok, msg = gradcheck(function(a) return a:logit() end, { rand(0.05, 0.95, 3, 4) })
    assert(ok, msg)
    -- (eps 0.2: points well away from the clamp's edges, on both sides)
    local a = lunet.tensor({ 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95 }, { dtype = 'float64' }):requires_grad_()
    ok, msg = gradcheck(function(t) return t:logit(0.2) end, { a })
    assert(ok, msg)
  end)

  for _, op in ipairs(BINARY) do
    it(op .. ' (broadcasting, a number on either side)', function()
      local ok, msg = gradcheck(function(a, b) return lunet[op](a, b) end, { rand(-2, 2, 2, 1, 3), rand(-2, 2, 4, 3) })
      assert(ok, msg)
      ok, msg = gradcheck(function(a) return lunet[op](a, 0.5) end, { rand(-2, 2, 3) })
      assert(ok, msg)
      ok, msg = gradcheck(function(b) return lunet[op](-1.5, b) end, { rand(-2, 2, 3) })
      assert(ok, msg)
    end)
  end

  it('atan2, fmod and remainder (they recorded nothing: a silent zero gradient)', function()
    local ok, msg = gradcheck(function(a, b) return lunet.atan2(a, b) end, { rand(-2, 2, 2, 1, 3), rand(0.5, 2, 4, 3) })
    assert(ok, msg)
    for _, op in ipairs({ 'fmod', 'remainder' }) do
      -- (a / b kept off the integers, where both jump)
      local a = lunet.tensor({ 5.5, -3.2, 7.3, -0.7 }, { dtype = 'float64' }):requires_grad_()
      local b = lunet.tensor({ 2.1, 2.5, -3.0, 0.9 }, { dtype = 'float64' }):requires_grad_()
      ok, msg = gradcheck(function(x, y) return x[op](x, y) end, { a, b })
      assert(ok, msg)
      ok, msg = gradcheck(function(x) return x[op](x, 1.5) end, { a })
      assert(ok, msg)
    end
    -- torch 1.13's values: d/db is -trunc(a / b) for fmod, -floor(a / b) for remainder
    local a = lunet.tensor({ 5.5, -3.2, 7.0 }, { dtype = 'float64' }):requires_grad_()
    local b = lunet.tensor({ 2.0, 2.5, -3.0 }, { dtype = 'float64' }):requires_grad_()
    a:fmod(b):sum():backward()
    assert.tensor_near(b.grad, { -2, 1, 2 }, 0)
    assert.tensor_near(a.grad, { 1, 1, 1 }, 0)
    b.grad = nil
    a:remainder(b):sum():backward()
    assert.tensor_near(b.grad, { -2, 2, 3 }, 0)
  end)

  it('records the in-place forms', function()
    local a = rand(-0.9, 0.9, 3)
    local ok, msg = gradcheck(function(t) return (t * 1):asin_():sinh_() end, { a })
    assert(ok, msg)
    ok, msg = gradcheck(function(t) return (t * 1):hypot_(t) end, { a })
    assert(ok, msg)
  end)

  it('leaves isclose out of autograd', function()
    local a = rand(-1, 1, 3)
    local r = lunet.isclose(a, a * 1)
    assert.is_false(r.requires_grad)
  end)
end)

describe('more math: errors', function()
  local f = lunet.tensor({ 0.5 })
  local i = lunet.tensor({ 1, 2 }, { dtype = 'int64' })

  it('names the op for inputs that are no tensors', function()
    for _, op in ipairs(UNARY) do
      assert.matches(op .. ': input must be a tensor', err_of(lunet[op], 'x'))
    end
    assert.matches('logit: ', err_of(lunet.logit, 3))
    assert.matches('hypot: second argument must be a tensor', err_of(lunet.hypot, f, 'x'))
    assert.matches('logaddexp: first argument must be a tensor', err_of(lunet.logaddexp, {}, f))
    assert.matches('isclose: second argument must be a tensor, got number', err_of(lunet.isclose, f, 1))
  end)

  it('refuses what PyTorch has no kernel for', function()
    assert.matches('frac: not implemented for int64', err_of(lunet.frac, i))
    assert.matches('frac_: not implemented for int64', err_of(i.frac_, i))
    assert.matches('frac: not implemented for bool', err_of(lunet.frac, lunet.tensor({ true })))
    for _, op in ipairs(BINARY) do
      assert.matches(op .. ': not implemented for int64', err_of(lunet[op], i, i))
    end
    assert.matches('hypot_: not implemented for int64', err_of(i.hypot_, i, i))
    assert.matches("sinh_: result type float32 can't be stored in place into int64", err_of(i.sinh_, i))
    assert.matches("hypot_: result type float32 can't be cast", err_of(i.hypot_, i, f))
    -- (an alias names itself)
    assert.matches("arcsin_: result type float32 can't be stored in place into int64", err_of(i.arcsin_, i))
    assert.matches('arcsinh: input must be a tensor', err_of(lunet.arcsinh, 'x'))
    assert.matches('arctanh_: a leaf tensor that requires grad',
      err_of(function() local l = lunet.zeros({ 2 }):requires_grad_(); l:arctanh_() end))
    assert.matches('hypot_: shape .* cannot be broadcast', err_of(f.hypot_, f, lunet.zeros({ 2, 3 })))
  end)

  it('checks logit\'s eps and isclose\'s options', function()
    assert.matches('logit: eps must be a number or nil, got string', err_of(f.logit, f, 'x'))
    assert.matches('logit: eps must be a number or nil, got nan', err_of(f.logit, f, 0 / 0))
    assert.matches("isclose: unknown option 'rtl'", err_of(lunet.isclose, f, f, { rtl = 1 }))
    assert.matches('isclose: options must be a table', err_of(lunet.isclose, f, f, 1e-5))
    assert.matches('isclose: rtol must be a number >= 0, got %-1', err_of(lunet.isclose, f, f, { rtol = -1 }))
    assert.matches('isclose: atol must be a number >= 0, got nan', err_of(lunet.isclose, f, f, { atol = 0 / 0 }))
    assert.matches('isclose: a and b must have the same dtype, got float32 and int64', err_of(lunet.isclose, f, i))
    assert.matches('isclose: .*broadcast', err_of(lunet.isclose, lunet.zeros({ 2 }), lunet.zeros({ 3 })))
  end)
end)
