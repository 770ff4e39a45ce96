-- bitwise_and / or / xor / not, bitwise_left_shift / right_shift, gcd, lcm
-- (C kernels, lunet.tensor_math) against PyTorch 1.13: every case of
-- spec/fixtures/tensor_bitwise.safetensors (written by
-- tools/gen_bitwise_fixtures.py): uint8, int32, int64 and bool, two tensors
-- broadcasting, a Lua number on either side, transposed views, empty and
-- 0-d tensors, shift counts past the width and negative ones, promotion
-- across dtypes, the in-place forms; then the functional forms, autograd
-- (no result asks for grad) and the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'

local fx, cases = fixtures.load_fixture('tensor_bitwise')

-- (here, not support.fixtures': errors raised at the caller's level name this file)
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'no error')
  return tostring(e)
end

local function T(v, dtype) return lunet.tensor(v, { dtype = dtype }) end

-- the case's call, as a method (in place on a clone) or through lunet[op]
local function call(case, functional)
  local a, b, op = fx[case.name .. '.a'], fx[case.name .. '.b'], case.op
  if case.view == 't' then
    a = a:t()
    assert.is_false(a:is_contiguous())
  end
  if case.inplace then
    local r = a:clone()
    local got
    if case.kind == 'un' then got = r[op .. '_'](r)
    elseif case.kind == 'ts' then got = r[op .. '_'](r, case.scalar)
    else got = r[op .. '_'](r, b) end
    assert.equal(r, got)   -- (returns self)
    return r
  end
  local f = functional and lunet[op] or lunet.Tensor[op]
  if case.kind == 'un' then return f(a)
  elseif case.kind == 'ts' then return f(a, case.scalar)
  elseif case.kind == 'st' then return f(case.scalar, a) end
  return f(a, b)
end

-- exact: dtype, shape and every value (compared by eq, so int64 extremes count)
local function same(got, want, name)
  assert.equal(want.dtype, got.dtype, name .. ': dtype')
  assert.same(want:size(), got:size(), name .. ': shape')
  if want:numel() > 0 and not got:eq(want):all():item() then
    error(('%s: values differ\n got  %s\n want %s'):format(name, tostring(got), tostring(want)))
  end
end

describe('bitwise ops against PyTorch 1.13', function()
  it('has its fixture', function()
    assert.is_true(#cases > 400)
  end)

  it('every case (methods and in-place forms)', function()
    for _, case in ipairs(cases) do same(call(case, false), fx[case.name .. '.out'], case.name) end
  end)

  it('every out-of-place case through lunet.*', function()
    for _, case in ipairs(cases) do
      if not case.inplace then same(call(case, true), fx[case.name .. '.out'], case.name) end
    end
  end)
end)

describe('bitwise ops', function()
  it('shift counts modulo the width (torch 1.13 CPU), arithmetic right shifts of negatives', function()
    local a = T({ 1, -1, 5, -128, 100 }, 'int32')
    assert.same({ 1, -1, 5, -128, 100 }, a:bitwise_left_shift(32):totable())
    assert.same({ 16, -16, 80, -2048, 1600 }, a:bitwise_left_shift(100):totable())
    assert.same({ 0, -1, 0, -1, 0 }, a:bitwise_right_shift(-1):totable())
    assert.same({ 0, 127, 8 }, T({ 1, 255, 128 }, 'uint8'):bitwise_right_shift(T({ 8, 1, 100 }, 'uint8')):totable())  -- (128 >> 4)
  end)

  it('a Lua boolean is a bool scalar; a number beside a bool tensor gives int64', function()
    local p = T({ true, false })
    local r = p:bitwise_xor(true)
    assert.equal('bool', r.dtype); assert.same({ false, true }, r:totable())
    assert.equal('bool', lunet.Tensor.bitwise_and(true, p).dtype)   -- (lunet.* takes no boolean first)
    assert.equal('int64', p:bitwise_or(2).dtype)
    assert.same({ 4, 5 }, T({ 5, 4 }, 'int32'):bitwise_xor(true):totable())
    assert.equal('int32', T({ 5, 4 }, 'int32'):bitwise_xor(true).dtype)
  end)

  it('no result requires grad', function()
    local i = T({ 1, 2 }, 'int64')
    lunet.autograd = lunet.autograd or require('lunet.autograd')
    for _, op in ipairs({ 'bitwise_and', 'bitwise_or', 'bitwise_xor', 'bitwise_left_shift', 'gcd', 'lcm' }) do
      assert.is_false(i[op](i, i).requires_grad == true, op)
    end
    assert.is_false(T({ true }):bitwise_not().requires_grad == true)
    -- a float tensor that requires grad is refused as any float is
    local f = lunet.ones({ 2 }, { dtype = 'float64', requires_grad = true })
    assert.matches('bitwise_and: only integer and bool tensors', err_of(f.bitwise_and, f, f))
  end)

  it('lcm where torch 1.13 dies of SIGFPE (min / -1) gives a wrapped value instead', function()
    local m = T({ -2147483648, -2147483648 }, 'int32')
    local r = m:lcm(T({ -2147483647, 255 }, 'int32'))
    assert.equal('int32', r.dtype)
    assert.equal(2, r:numel())
  end)

  it('raises named errors', function()
    local f, i, b = lunet.ones({ 2 }), T({ 1, 2 }, 'int32'), T({ true, false })
    for _, op in ipairs({ 'bitwise_and', 'bitwise_or', 'bitwise_xor' }) do
      assert.matches(op .. ': only integer and bool tensors are supported, got float32', err_of(f[op], f, f))
      assert.matches(op .. ': only integer and bool tensors are supported, got float32', err_of(i[op], i, f))
      assert.matches(op .. ': only integer and bool tensors', err_of(i[op], i, 2.5))
    end
    for _, op in ipairs({ 'bitwise_left_shift', 'bitwise_right_shift', 'gcd', 'lcm' }) do
      assert.matches(op .. ': only integer tensors are supported, got float64', err_of(i[op], i, f:double()))
      assert.matches(op .. ': not implemented for bool tensors', err_of(b[op], b, b))
      assert.matches(op .. '_: not implemented for bool tensors', err_of(b[op .. '_'], b, b))
    end
    assert.matches('bitwise_not: only integer and bool tensors are supported, got float32', err_of(f.bitwise_not, f))
    assert.matches('bitwise_not_: only integer and bool tensors', err_of(f.bitwise_not_, f))
    assert.matches('bitwise_and: second argument must be a tensor, got string', err_of(lunet.bitwise_and, i, 'x'))
    assert.matches("bitwise_and_: result type int32 can't be cast to the in%-place target's type bool",
      err_of(b.bitwise_and_, b, i))
    assert.matches("bitwise_or_: result type int64 can't be cast", err_of(b.bitwise_or_, b, 3))
    assert.matches('bitwise_xor_: shape .* cannot be broadcast', err_of(i.bitwise_xor_, i, T({ { 1 }, { 2 } }, 'int32')))
    assert.matches('bitwise_and: .*shape', err_of(i.bitwise_and, i, T({ 1, 2, 3 }, 'int32')))
  end)
end)
