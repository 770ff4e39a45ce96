-- Dtypes: promotion rules (lunet.h), casts, scalars, in-place limits.
local lunet = require 'lunet'

local err_of = require('support.fixtures').err_of

local function of(dt, v) return lunet.tensor(v or {1, 2}, {dtype = dt}) end

describe('binary promotion', function()
  it('follows bool < uint8 < int32 < int64 < float32 < float64 for every pair', function()
    local order = {'bool', 'uint8', 'int32', 'int64', 'float32', 'float64'}
    for i, a in ipairs(order) do
      for j, b in ipairs(order) do
        local expect = order[math.max(i, j)]
        local r = of(a, {1, 0}) + of(b, {1, 1})
        assert.equal(expect, r.dtype, a .. ' + ' .. b)
      end
    end
  end)

  it('values survive promotion', function()
    assert.same({3, 2.5}, (of('int32', {1, 2}) + of('float64', {2, 0.5})):totable())
    assert.same({201, 2}, (of('uint8', {200, 1}) + of('int64', {1, 1})):totable())
    assert.same({2, 1}, (of('bool', {true, false}) + of('int32', {1, 1})):totable())
  end)

  it('a Lua number does not widen a tensor of its category', function()
    assert.equal('int32', (of('int32') + 2).dtype)
    assert.equal('uint8', (of('uint8') * 3).dtype)
    assert.equal('float32', (lunet.ones(2) * 0.5).dtype)
    assert.equal('float64', (of('float64') + 1).dtype)
    assert.equal('float32', (of('int64') + 0.5).dtype)
    assert.same({1.5, 2.5}, (of('int64') + 0.5):totable())
    assert.equal('int64', (of('bool', {true, false}) + 2).dtype)
    assert.same({3, 2}, (of('bool', {true, false}) + 2):totable())
  end)

  it('division of integers is true division in float32', function()
    local q = of('int64', {7, -7}) / 2
    assert.equal('float32', q.dtype)
    assert.same({3.5, -3.5}, q:totable())
    assert.same({0.5, 1}, (1 / of('int32', {2, 1})):totable())
    assert.equal('float64', (of('float64') / 2).dtype)
  end)

  it('comparisons and logical ops give bool', function()
    local a = of('int32', {1, 5})
    for _, op in ipairs({'eq', 'ne', 'lt', 'le', 'gt', 'ge'}) do assert.equal('bool', a[op](a, 3).dtype) end
    assert.same({false, true}, a:gt(3):totable())
    assert.same({true, false}, a:le(of('float32', {1, 4})):totable())
    assert.equal('bool', a:logical_and(of('bool', {true, true})).dtype)
    assert.same({true, false}, lunet.tensor{2.5, 0}:logical_or(lunet.tensor{0, 0}):totable())
  end)

  it('bool arithmetic: + is or, * is and; negation is refused', function()
    local t, f = of('bool', {true, false}), of('bool', {true, true})
    assert.same({true, true}, (t + f):totable())
    assert.same({true, false}, (t * f):totable())
    assert.matches('neg: negation of a bool tensor is not supported', err_of(function() return -t end))
  end)

  it('integer arithmetic wraps and keeps exact int64 values', function()
    assert.same({255}, (of('uint8', {1}) - 2):totable())
    local big = of('int64', {2 ^ 52}) * 2 + 1
    assert.is_true(big:read()[0] == 9007199254740993LL)
    assert.same({9, 1}, (of('int32', {3, 1}) ^ 2):totable())
  end)
end)

describe('unary dtypes', function()
  it('float-only functions give float32 for integer input; sign/abs keep ints', function()
    assert.equal('float32', of('int64', {4}):sqrt().dtype)
    assert.same({2}, of('int64', {4}):sqrt():totable())
    assert.equal('int64', of('int64', {-4}):abs().dtype)
    assert.same({4}, of('int64', {-4}):abs():totable())
    assert.same({-1, 0, 1}, of('int32', {-5, 0, 7}):sign():totable())
    assert.equal('bool', lunet.tensor{0 / 0, 1}:isnan().dtype)
    assert.same({true, false}, lunet.tensor{0 / 0, 1}:isnan():totable())
    assert.same({false, true}, lunet.tensor{1, math.huge}:isinf():totable())
  end)
end)

describe('casts', function()
  it('float to int truncates toward zero; to bool tests nonzero', function()
    local f = lunet.tensor{1.7, -1.7, 0, 2.5}
    assert.same({1, -1, 0, 2}, f:long():totable())
    assert.same({1, -1, 0, 2}, f:int():totable())
    assert.same({true, true, false, true}, f:bool():totable())
    assert.same({1, 0}, of('bool', {true, false}):float():totable())
    assert.equal('uint8', f:abs():byte().dtype)
  end)

  it('to() takes dtype names, aliases, tables and other tensors; returns self when unchanged', function()
    local t = lunet.ones(2)
    assert.equal(t, t:to('float32'))
    assert.equal('float64', t:to('float64').dtype)
    assert.equal('float64', t:to('double').dtype)
    assert.equal('int64', t:to('long').dtype)
    assert.equal('int32', t:to{dtype = 'int'}.dtype)
    assert.equal('uint8', t:to(of('uint8')).dtype)
    assert.equal('float64', t:type('float64').dtype)
    assert.equal('float32', t:type())
    assert.matches('to: unknown dtype complex64', err_of(function() return t:to{dtype = 'complex64'} end))
  end)

  it('float16 and bfloat16 round to nearest even and round-trip representable values', function()
    assert.same({1.5, -2, 65504}, lunet.tensor{1.5, -2, 65504}:half():float():totable())
    assert.equal(1 + 2 ^ -10, lunet.tensor{1 + 2 ^ -10}:half():float():item())
    assert.equal(1, lunet.tensor{1 + 2 ^ -11}:half():float():item())           -- tie to even
    assert.equal(math.huge, lunet.tensor{70000}:half():float():item())         -- overflow
    assert.equal(1, lunet.tensor{1 + 2 ^ -8}:bfloat16():float():item())        -- tie to even
    assert.equal(1 + 2 ^ -7, lunet.tensor{1 + 2 ^ -7}:bfloat16():float():item())
    assert.equal(2, lunet.tensor{1.5}:half():element_size())
    assert.equal('float32', (lunet.tensor{1.5}:half() + 1).dtype)            -- math runs in float32
  end)

  it('copy_ casts into the destination dtype and broadcasts', function()
    local d = lunet.zeros(2, 3, {dtype = 'int64'})
    d:copy_(lunet.tensor{1.9, -2.9, 3})
    assert.same({{1, -2, 3}, {1, -2, 3}}, d:totable())
    assert.matches('copy_: shapes {2,3} and {2} cannot broadcast',
      err_of(function() d:copy_(lunet.zeros(2)) end))
  end)

  it('is_floating_point, element_size, default dtype', function()
    assert.is_true(lunet.ones(1):is_floating_point())
    assert.is_false(lunet.arange(3):is_floating_point())
    assert.equal(8, lunet.arange(3):element_size())
    assert.equal('float32', lunet.get_default_dtype())
    lunet.set_default_dtype('float64')
    local z = lunet.zeros(2)
    lunet.set_default_dtype('float32')
    assert.equal('float64', z.dtype)
    assert.equal('float32', lunet.zeros(2).dtype)
    assert.equal('int64', lunet.arange(3).dtype)
    assert.equal('float32', lunet.arange(0, 1, 0.5).dtype)
    assert.equal('bool', lunet.tensor{true, false}.dtype)
  end)
end)

describe('in-place dtype limits', function()
  it('an in-place result must fit the target type', function()
    assert.matches("add_: result type float32 can't be cast to the in%-place target's type int64",
      err_of(function() of('int64'):add_(0.5) end))
    assert.matches("mul_: result type float64 can't be cast to the in%-place target's type int32",
      err_of(function() of('int32'):mul_(of('float64')) end))
    assert.matches("sqrt_: result type float32 can't be stored in place into int64",
      err_of(function() of('int64'):sqrt_() end))
    -- a narrower operand is fine: float32 += int64
    local f = lunet.tensor{0.5, 0.5}
    f:add_(of('int64', {1, 2}))
    assert.same({1.5, 2.5}, f:totable())
    local i = of('int64', {1, 2})
    i:add_(of('int32', {10, 10}))
    assert.same({11, 12}, i:totable())
  end)
end)
