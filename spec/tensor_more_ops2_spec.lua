-- t:unfold, searchsorted, bucketize, histc, logspace, block_diag,
-- cartesian_prod, combinations, trapezoid, cumulative_trapezoid
-- (lunet.tensor_bins, lunet.tensor_build) and baddbmm, addbmm, addmv, addr
-- (lunet.tensor_fused) against PyTorch 1.13: float32 values, float64 values
-- and gradients from spec/fixtures/tensor_more_ops2.safetensors (written by
-- tools/gen_tensor_more_ops2_fixtures.py); then gradchecks, in-place forms,
-- views, empty and 0-d inputs, and the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local err_of = fixtures.err_of

local function maxdiff(a, b)
  assert.same(b:size(), a:size())
  if b:numel() == 0 then return 0 end
  return fixtures.maxdiff(a, b)
end

local fx, cases = fixtures.load_fixture('tensor_more_ops2')

local function long(t) return lunet.tensor(t, { dtype = 'int64' }) end

-- the case's op on inputs a, b, c (converted by conv); dt: the float dtype of the run
local function run(case, conv, dt)
  local o, name = case.opts, case.name
  local a, b, c = fx[name .. '.a'], fx[name .. '.b'], fx[name .. '.c']
  a, b, c = a and conv(a), b and conv(b), c and conv(c)
  local x = o.view == 't' and a:t() or a
  local op = case.op
  local r
  if op == 'unfold' then r = x:unfold(o.dim, o.size, o.step)
  elseif op == 'searchsorted' then r = lunet.searchsorted(x, o.value or b, o.opts)
  elseif op == 'bucketize' then r = lunet.bucketize(x, b, o.opts)
  elseif op == 'histc' then r = x:histc(o.bins, o.min, o.max)
  elseif op == 'logspace' then
    local args = o.args
    r = lunet.logspace(args[1], args[2], args[3], args[4], { dtype = dt })
  elseif op == 'block_diag' or op == 'cartesian_prod' then r = c and lunet[op](x, b, c) or lunet[op](x, b)
  elseif op == 'combinations' then r = lunet.combinations(x, o.r, o.with_replacement)
  elseif op == 'trapezoid' or op == 'cumulative_trapezoid' then
    if b then r = lunet[op](x, b, o.opts) else r = lunet[op](x, o.opts) end
  elseif op == 'polygamma' then r = x:polygamma(o.n)
  elseif op == 'xlogy' or op == 'copysign' then r = lunet[op](x, b)
  elseif not b then r = x[op](x)
  else r = x[op](x, b, c, o.opts) end
  return r, { a, b, c }
end

describe('more tensor ops (2) against PyTorch 1.13 (fixtures)', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 50) end)
  for _, case in ipairs(cases) do
    it(case.name .. ': float32 values, float64 values and gradients', function()
      local want = fx[case.name .. '.out']
      local r = run(case, function(t) return t end, 'float32')
      assert.same(want:size(), r:size())
      if want.dtype == 'int64' or want.dtype == 'bool' then
        assert.equal(want.dtype, r.dtype)
        assert.same(want:totable(), r:totable())
        return
      end
      assert.equal('float32', r.dtype)
      if want:numel() > 0 then assert.is_true(fixtures.rel(r:double(), want) < 1e-5, case.name) end
      local r64, leaves = run(case, function(t)
        local d = t:double(); d.requires_grad = true; return d
      end, 'float64')
      assert.is_true(maxdiff(r64, want) < 1e-9, case.name)
      if not r64.requires_grad or not fx[case.name .. '.da'] then return end
      r64:backward(fx[case.name .. '.dout']:double())
      for k, key in ipairs({ 'a', 'b', 'c' }) do
        local dg = fx[case.name .. '.d' .. key]
        if dg and leaves[k] then
          assert.is_not_nil(leaves[k].grad, case.name .. ' d' .. key)
          assert.is_true(maxdiff(leaves[k].grad, dg) < 1e-9, case.name .. ' d' .. key)
        end
      end
    end)
  end
end)

describe('gradcheck (float64 finite differences)', function()
  local function check(f, inputs)
    local ok, msg = gradcheck(f, inputs)
    assert.is_true(ok, tostring(msg))
  end
  local function r64(...) return lunet.randn({ ... }, { dtype = 'float64', requires_grad = true }) end
  it('unfold, block_diag, combinations, trapezoid', function()
    check(function(a) return a:unfold(2, 3, 1) end, { r64(2, 5) })
    check(function(a) return a:t():unfold(1, 2, 2) end, { r64(3, 5) })
    check(function(a, b) return lunet.block_diag(a, b) end, { r64(2, 2), r64(3) })
    check(function(a) return lunet.combinations(a, 2, true) end, { r64(3) })
    check(function(y, x) return lunet.cumulative_trapezoid(y, x) end, { r64(2, 4), r64(4) })
  end)
  it('baddbmm, addbmm, addmv, addr', function()
    local o = { beta = 0.5, alpha = 2 }
    check(function(a, b, c) return a:baddbmm(b, c, o) end, { r64(1, 3), r64(2, 2, 4), r64(2, 4, 3) })
    check(function(a, b, c) return a:addbmm(b, c, o) end, { r64(2, 3), r64(2, 2, 4), r64(2, 4, 3) })
    check(function(a, b, c) return a:addmv(b, c, o) end, { r64(3), r64(3, 2), r64(2) })
    check(function(a, b, c) return a:addr(b, c, o) end, { r64(3, 1), r64(3), r64(2) })
  end)
  it('lgamma, digamma, erfc, erfinv, xlogy, copysign', function()
    local function pos64(n) return lunet.rand({ n }, { dtype = 'float64' }):add(0.5):requires_grad_() end
    check(function(a) return a:lgamma() end, { pos64(4) })
    check(function(a) return a:digamma() end, { r64(2, 3) })
    check(function(a) return a:erfc() end, { r64(4) })
    check(function(a) return (a * 0.5):erfinv() end, { lunet.rand({ 4 }, { dtype = 'float64', requires_grad = true }) })
    check(function(a, b) return lunet.xlogy(a, b) end, { r64(2, 3), pos64(3) })
    check(function(a, b) return lunet.copysign(a, b) end, { r64(2, 3), r64(3) })
  end)
end)

describe('worked examples', function()
  it('unfold is a view sharing storage; 0-d and empty windows', function()
    local x = lunet.arange(6):float()
    local u = x:unfold(1, 2, 2)
    assert.same({ { 0, 1 }, { 2, 3 }, { 4, 5 } }, u:totable())
    u:select(1, 2):fill_(9)
    assert.equal(9, x:totable()[3])
    assert.same({ 7, 0 }, lunet.zeros(6):unfold(1, 0, 1):size())
    assert.same({ 1 }, lunet.tensor(5):unfold(1, 1, 1):size())
    assert.same({ 3, 2, 2 }, lunet.randn(3, 4):unfold(-1, 2, 2):size())
  end)
  it('searchsorted: scalars, sorter, out_int32, int and float mixed; bucketize', function()
    local s = lunet.tensor{ 1, 3, 5, 7 }
    assert.equal(3, lunet.searchsorted(s, 3, { right = true }):item())
    assert.equal(0, lunet.searchsorted(s, 3):dim())
    local unsorted = lunet.tensor{ 5, 1, 7, 3 }
    assert.same({ 1, 3, 5 }, lunet.searchsorted(unsorted, lunet.tensor{ 0, 4, 8 }, { sorter = unsorted:argsort() }):totable())
    assert.equal('int32', lunet.searchsorted(s, lunet.tensor{ 2 }, { out_int32 = true }).dtype)
    assert.same({ 3, 2 }, lunet.searchsorted(long{ 1, 3, 5 }, lunet.tensor{ 3.5, 3 }):totable())
    assert.same({ { 1, 2 } }, lunet.bucketize(lunet.tensor{ { 1, 2 } }, lunet.tensor{ 1, 2 }):totable())
    assert.same({ 0 }, lunet.searchsorted(s, lunet.zeros(0)):size())
    local strided = lunet.tensor{ 1, 9, 3, 9, 5, 9, 7, 9 }:unfold(1, 1, 2):select(2, 1)   -- {1, 3, 5, 7}, stride 2
    assert.same({ 1, 3, 5 }, lunet.searchsorted(strided, lunet.tensor{ -1, 4, 9 }):totable())
  end)
  it('histc: NaN in the first bin (as torch), options table, min = max', function()
    assert.same({ 1, 2, 1, 0 }, lunet.tensor{ 1, 2, 1, 0 / 0 }:histc(4, 0, 3):totable())
    assert.same({ 0, 0, 2, 0 }, lunet.tensor{ 2, 2 }:histc({ bins = 4 }):totable())
    assert.same({ 0, 0, 0 }, lunet.zeros(0):histc(3):totable())
    assert.equal('float64', lunet.randn({ 5 }, { dtype = 'float64' }):histc(2).dtype)
    assert.same({ 2, 1 }, lunet.tensor{ { 0, 5 }, { 9, 1 } }:t():histc(2, 0, 5):totable())
  end)
  it('logspace, block_diag, cartesian_prod, combinations', function()
    assert.same({ 1, 2, 4 }, lunet.logspace(0, 2, 3, 2, { dtype = 'int64' }):totable())
    assert.same({ 1, 0 }, lunet.block_diag():size())
    assert.equal('float32', lunet.block_diag(long{ 1 }, lunet.ones(1)).dtype)
    assert.same({ 1, 2 }, lunet.cartesian_prod(lunet.tensor{ 1, 2 }):totable())
    assert.same({ 0 }, lunet.combinations(lunet.tensor{ 1, 2 }, 0):size())
    assert.same({ { 1, 1 }, { 1, 2 }, { 2, 2 } }, lunet.combinations(long{ 1, 2 }, { with_replacement = true }):totable())
  end)
  it('fused products: in place, beta = 0 ignores NaN, integers', function()
    local y = lunet.ones(2, 2)
    y:addr_(lunet.ones(2), lunet.tensor{ 1, 2 }, { alpha = 2 })
    assert.same({ { 3, 5 }, { 3, 5 } }, y:totable())
    local nan = lunet.full({ 2 }, 0 / 0)
    assert.same({ 3, 3 }, nan:addmv(lunet.ones(2, 3), lunet.ones(3), { beta = 0 }):totable())
    assert.same({ 7, 7 }, lunet.ones(2):addmv(lunet.ones(2, 2), lunet.tensor{ 1, 2 }, { alpha = 2 }):totable())
    local w = lunet.randn({ 2, 2 }, { requires_grad = true })
    local t = lunet.zeros(1, 2, 2) + w
    t:baddbmm_(lunet.ones(1, 2, 3), lunet.ones(1, 3, 2))
    t:sum():backward()
    assert.same({ { 1, 1 }, { 1, 1 } }, w.grad:totable())
  end)
end)

describe('special functions', function()
  it('signbit of -0.0, sgn, int promotion, in-place forms, numbers', function()
    assert.same({ true, false, true }, lunet.tensor{ -0.0, 0, -1 }:signbit():totable())
    assert.same({ true, false }, long{ -3, 3 }:signbit():totable())
    assert.same({ -1, 0, 1 }, lunet.tensor{ -2, 0, 3 }:sgn():totable())
    assert.equal('float32', long{ 1 }:lgamma().dtype)
    local y = lunet.tensor{ 2, 3 }
    y:xlogy_(1)
    assert.same({ 0, 0 }, y:totable())
    assert.same({ -1, -2 }, lunet.copysign(lunet.tensor{ 1, 2 }, -0.0):totable())
    assert.same({ 0 }, lunet.xlogy(0, lunet.tensor{ 0 }):totable())
    assert.equal(0, lunet.zeros(0):digamma():numel())
    assert.same({}, lunet.tensor(0.5):erfinv():size())
  end)
  it('errors', function()
    assert.matches('polygamma: n = 2 is not implemented', err_of(lunet.ones(1).polygamma, lunet.ones(1), 2))
    local t = lunet.ones({ 2 }, { dtype = 'float64', requires_grad = true })
    assert.matches('polygamma%(2%), which is not implemented', err_of(function() t:polygamma(1):sum():backward() end))
    assert.is_nil(lunet.Tensor.signbit_)
    assert.matches("xlogy_: result type float can't be stored in place into int64", err_of(long{ 1 }.xlogy_, long{ 1 }, 2))
    assert.matches('copysign: expected a tensor and a tensor or number', err_of(lunet.copysign, 1, 2))
  end)
end)

describe('errors', function()
  local x = lunet.randn(3, 4)
  it('unfold, searchsorted, bucketize, histc', function()
    assert.matches('unfold: size must be in 0..4', err_of(x.unfold, x, 2, 5, 1))
    assert.matches('unfold: step must be > 0', err_of(x.unfold, x, 2, 2, 0))
    assert.matches('unfold: dim 3 out of range', err_of(x.unfold, x, 3, 2, 1))
    assert.matches('searchsorted: sorted_sequence must be 1%-d or have the leading dims',
      err_of(lunet.searchsorted, x, lunet.randn(4, 4)))
    assert.matches("searchsorted: side = 'left' and right = true contradict",
      err_of(lunet.searchsorted, x, x, { right = true, side = 'left' }))
    assert.matches("searchsorted: unknown option 'rigth'", err_of(lunet.searchsorted, x, x, { rigth = true }))
    assert.matches('searchsorted: sorter must have the shape', err_of(lunet.searchsorted, x, x, { sorter = long{ 1 } }))
    assert.matches('bucketize: boundaries must be 1%-d', err_of(lunet.bucketize, x, x))
    assert.matches("bucketize: unknown option 'side'", err_of(lunet.bucketize, x, lunet.ones(2), { side = 'left' }))
    assert.matches('histc: input must be a float tensor', err_of(x.histc, long{ 1 }))
    assert.matches('histc: max must be larger than min', err_of(x.histc, x, 4, 3, 1))
    assert.matches('histc: bins must be an integer', err_of(x.histc, x, 0))
    assert.matches('histc: range of %[.*%] is not finite', err_of(x.histc, lunet.tensor{ 1, 1 / 0 }))
  end)
  it('the builders and the fused products', function()
    assert.matches('logspace: steps must be a non%-negative integer', err_of(lunet.logspace, 0, 1, -1))
    assert.matches('block_diag: tensors must have at most 2 dims', err_of(lunet.block_diag, lunet.ones(1, 1, 1)))
    assert.matches('cartesian_prod: tensors must have one dtype', err_of(lunet.cartesian_prod, lunet.ones(2), long{ 1 }))
    assert.matches('combinations: input must be 1%-d', err_of(lunet.combinations, x))
    assert.matches('trapezoid: x has 2 elements but y has 4', err_of(lunet.trapezoid, x, lunet.ones(2)))
    assert.matches('trapezoid: give x or dx, not both', err_of(lunet.trapezoid, x, lunet.ones(4), { dx = 1 }))
    assert.matches('baddbmm: inner sizes do not match', err_of(lunet.baddbmm, lunet.ones(1), lunet.ones(2, 2, 3), lunet.ones(2, 2, 3)))
    assert.matches('addmv: vec is float64 on cpu:0 but input is float32',
      err_of(lunet.addmv, lunet.ones(2), lunet.ones(2, 3), lunet.ones({ 3 }, { dtype = 'float64' })))
    assert.matches('addmv: input of shape {3} cannot broadcast', err_of(lunet.addmv, lunet.ones(3), lunet.ones(2, 3), lunet.ones(3)))
    assert.matches('addr: needs float32 or float64 tensors %(as matmul%), got int64',
      err_of(lunet.addr, long{ { 1 } }, long{ 1 }, long{ 1 }, { alpha = 1.5 }))
    assert.matches("addbmm: unknown option 'gamma'", err_of(lunet.addbmm, x, lunet.ones(1, 3, 2), lunet.ones(1, 2, 4), { gamma = 1 }))
    assert.matches('addmv_: input has shape {1} but the result {2}',
      err_of(lunet.ones(1).addmv_, lunet.ones(1), lunet.ones(2, 3), lunet.ones(3)))
  end)
end)
