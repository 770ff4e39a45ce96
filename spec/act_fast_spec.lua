-- The float32 activations that run on SLEEF's vector functions on the CPU
-- (c/cpu/vact.c: exp, sigmoid, tanh, erf, log1p, expm1, and the one-kernel silu, gelu with
-- approximate 'none' and 'tanh', mish, hardswish, hardsigmoid, elu / celu / selu, softplus
-- with their backward kernels, tanh's and sigmoid's from the output) against
-- PyTorch 1.13 and a float64 reference (spec/fixtures/act_fast.safetensors,
-- tools/gen_act_fast_fixtures.py) over a sweep of inputs: large and small
-- magnitudes, denormals, +-inf, NaN. Counted in float32 ulps of the float64
-- value: within a few where the formula is well-conditioned, and nowhere
-- less accurate than torch's float32 (whose formulas lose digits in the same
-- tails) beyond a few ulps; NaN and inf exactly where torch has them. Also
-- the vector tail (every length 1..40 bit-identical to the long run),
-- strided views (the scalar loop), float64, 0-d and empty tensors,
-- gradcheck, and F.gelu's errors.
local lunet = require 'lunet'
local json = require 'lunet.json'
local gradcheck = require 'gradcheck'
local fx = require 'support.fixtures'
local F = lunet.nn.functional

local here = debug.getinfo(1, 'S').source:match('^@(.*/)') or './'
local T, meta = lunet.load(here .. 'fixtures/act_fast.safetensors')
local OPS = json.decode(meta.cases)
local FN = {
  exp = function(x) return x:exp() end, sigmoid = function(x) return x:sigmoid() end,
  tanh = function(x) return x:tanh() end, erf = function(x) return x:erf() end,
  log1p = function(x) return x:log1p() end, expm1 = function(x) return x:expm1() end,
  silu = F.silu, gelu = F.gelu, gelu_tanh = function(x) return F.gelu(x, 'tanh') end, mish = F.mish,
  hardswish = F.hardswish, hardsigmoid = F.hardsigmoid, elu = F.elu,
  elu_a = function(x) return F.elu(x, 0.5) end, celu = function(x) return F.celu(x, 2) end, selu = F.selu,
  softplus = F.softplus, softplus_b = function(x) return F.softplus(x, 2, 5) end,
}
-- the ops whose gradient is one kernel (exp's is a multiplication; erf's ... tensor ops)
local KERNEL_GRAD = { silu = true, gelu = true, gelu_tanh = true, mish = true, tanh = true, sigmoid = true,
  hardswish = true, hardsigmoid = true, elu = true, elu_a = true, celu = true, selu = true, softplus = true,
  softplus_b = true }
-- x from which the forward is well-conditioned (the gelus cancel 1 + erf / tanh below 0;
-- torch's elu computes exp(x) - 1, not expm1, as lunet's)
local WELL_FROM = { gelu = 0, gelu_tanh = 0, elu = 0, elu_a = 0, celu = 0, selu = 0 }

-- |y - ref| in float32 ulps of ref (float64); the spacing of denormals below 2^-126
local function ulps(y, ref)
  local e = ref:abs():log2():floor():clamp(-126, 127)
  return (y:double() - ref):abs() / (e - 23):exp2()
end

local function where_first(mask, x)
  local _, i = mask:double():max(1)
  return x[i:item()]:item()
end

describe('SLEEF float32 activations against torch 1.13 and float64', function()
  local x, g = T.x, T.g
  for _, name in ipairs(OPS) do
    it(name .. ': forward and gradient', function()
      local xg = x:clone():requires_grad_()
      local y = FN[name](xg)
      y:backward(g)
      assert.are.equal('float32', y.dtype)
      for _, w in ipairs({ { 'out', y:detach() }, { 'dx', xg.grad } }) do
        local what = name .. ' ' .. w[1]
        local mine, tor, ref = w[2], T[name .. '.' .. w[1]], T[name .. '.' .. w[1] .. '64']
        -- NaN where torch has NaN, the same infinities
        assert.is_true(mine:isnan():eq(tor:isnan()):all():item(), what .. ': NaN elsewhere than torch')
        local inf = tor:isinf()
        assert.is_true(mine:eq(tor):logical_or(inf:logical_not()):all():item(), what .. ': infinities differ from torch')
        if w[1] == 'dx' and not KERNEL_GRAD[name] then return end
        local fin = ref:isnan():logical_or(ref:isinf()):logical_not():logical_and(ref:abs():le(3.4e38))
        local u, ut = ulps(mine, ref):where(fin, 0), ulps(tor, ref):where(fin, 0)
        if w[1] == 'out' then
          -- no less accurate than torch's float32 anywhere (up to 4 ulps) ...
          local worse = u:gt(ut * 2 + 4)
          assert.is_false(worse:any():item(), ('%s: %d elements less accurate than torch, first at x = %g')
            :format(what, worse:sum():item(), where_first(worse, x)))
          -- ... and within 4 ulps where the formula is well-conditioned
          local well = x:ge(WELL_FROM[name] or -3):logical_and(x:abs():le(1e6))
          local m = u:where(well, 0):max():item()
          assert(m <= 4, ('%s: %.1f ulps from float64 on x >= %g'):format(what, m, WELL_FROM[name] or -3))
        else
          -- the gradient: the same, with an absolute slack of 2^-22 |g| for
          -- its cancelling terms (near its zeros and in the gelus' tails)
          local err, errt = (mine:double() - ref):abs(), (tor:double() - ref):abs()
          local tol = errt * 2 + g:double():abs() * 2 ^ -22
          tol = tol + (ref:abs():log2():floor():clamp(-126, 127) - 23):exp2() * 8
          local worse = err:gt(tol):logical_and(fin)
          assert.is_false(worse:any():item(), ('%s: %d elements off, first at x = %g')
            :format(what, worse:sum():item(), where_first(worse, x)))
        end
      end
    end)
  end

  it('every length 1..40 (the vector tail) is bit-identical to the same elements of a long run', function()
    local long = lunet.linspace(-0.95, 6, 40)   -- (in log1p's domain)
    local g40 = lunet.linspace(1, 2, 40)
    for _, name in ipairs(OPS) do
      local full = FN[name](long)
      for n = 1, 40 do
        local part = FN[name](long:narrow(1, 1, n):clone())
        assert.are.equal(0, fx.maxdiff(part, full:narrow(1, 1, n)), name .. ' length ' .. n)
      end
      if KERNEL_GRAD[name] then
        local xg = long:clone():requires_grad_()
        FN[name](xg):backward(g40)
        for _, n in ipairs({ 1, 7, 15, 17, 33 }) do
          local xp = long:narrow(1, 1, n):clone():requires_grad_()
          FN[name](xp):backward(g40:narrow(1, 1, n):clone())
          assert.are.equal(0, fx.maxdiff(xp.grad, xg.grad:narrow(1, 1, n)), name .. ' grad length ' .. n)
        end
      end
    end
  end)

  it('strided views (the scalar loop) agree with the vector kernels (within 4 ulps where well-conditioned)', function()
    local base = lunet.linspace(-9, 9, 600):reshape(20, 30)
    local v = base:t()   -- non-contiguous
    for _, name in ipairs(OPS) do
      local a, b = FN[name](v), FN[name](v:contiguous())
      local u = ulps(a, b:double())
      assert.is_true(a:isnan():eq(b:isnan()):all():item(), name .. ': strided NaN elsewhere')
      local m = u:where(v:ge(WELL_FROM[name] or -3):logical_and(b:isnan():logical_not()), 0):max():item()
      assert(m <= 4, ('%s: strided %.1f ulps from contiguous'):format(name, m))
      if KERNEL_GRAD[name] then
        local x1, x2 = base:clone():requires_grad_(), base:clone():requires_grad_()
        local gg = lunet.linspace(-1, 1, 600):reshape(30, 20)
        FN[name](x1:t()):backward(gg)                     -- strided input and gradient
        FN[name](x2:t():contiguous()):backward(gg:contiguous())
        assert(fx.maxdiff(x1.grad, x2.grad) <= 1e-6, name .. ': strided gradient')
      end
    end
  end)

  it('float64 follows its float64 reference (libm)', function()
    for _, name in ipairs(OPS) do
      local xg = T.x:double():requires_grad_()
      local y = FN[name](xg)
      y:backward(T.g:double())
      for _, w in ipairs({ { 'out', y:detach() }, { 'dx', xg.grad } }) do
        local ref = T[name .. '.' .. w[1] .. '64']
        local ok = w[2]:isnan():eq(ref:isnan()):all():item()
        assert.is_true(ok, name .. ' ' .. w[1] .. ' float64: NaN elsewhere than torch')
        local fin = ref:isnan():logical_or(ref:isinf()):logical_not()
        local d = (w[2] - ref):abs():where(fin, 0)
        local tol = (ref:abs() * 1e-9 + 1e-12 * (1 + T.g:double():abs())):where(fin, 0)
        local bad = d:gt(tol)
        assert.is_false(bad:any():item(), ('%s %s float64: off at x = %g'):format(name, w[1], where_first(bad, T.x)))
      end
    end
  end)

  it('0-d and empty tensors', function()
    for _, name in ipairs(OPS) do
      local s = FN[name](lunet.tensor(0.5))
      assert.are.equal(0, s:dim())
      local ref = FN[name](lunet.tensor({ 0.5 }))
      assert.are.equal(ref[1]:item(), s:item())
      local e = FN[name](lunet.zeros(0, 3))
      assert.are.same({ 0, 3 }, e:size())
    end
  end)

  it('gradcheck (float64) of silu, gelu (both), mish, hardswish, hardsigmoid, elu, celu, selu, softplus, tanh, sigmoid', function()
    local function d() return (lunet.randn({ 3, 5 }, { dtype = 'float64' }) * 3):requires_grad_() end
    lunet.manual_seed(5)
    for _, name in ipairs({ 'silu', 'gelu', 'gelu_tanh', 'mish', 'hardswish', 'hardsigmoid', 'elu', 'elu_a', 'celu',
      'selu', 'softplus', 'softplus_b', 'tanh', 'sigmoid' }) do
      local x = d()
      if name:match('^hard') then   -- (away from the kinks at +-3, where finite differences straddle them)
        x = x:detach():where((x:detach():abs() - 3):abs():gt(1e-3), 0):requires_grad_()
      end
      assert.is_true(gradcheck(FN[name], { x }), name)
    end
  end)

  it('second derivatives (create_graph) of the one-kernel gradients follow their formulas', function()
    lunet.manual_seed(6)
    for _, name in ipairs({ 'hardswish', 'elu_a', 'celu', 'selu', 'softplus_b', 'tanh', 'sigmoid' }) do
      local x = (lunet.randn({ 4, 3 }, { dtype = 'float64' }) * 3):requires_grad_()
      local gx = require('lunet.autograd').grad(FN[name](x):sum(), x, { create_graph = true })[1]
      local hx = require('lunet.autograd').grad(gx:sum(), x)[1]
      -- finite differences of the first gradient
      local eps, xd = 1e-6, x:detach()
      local function g1(v)
        local vv = v:clone():requires_grad_()
        FN[name](vv):sum():backward()
        return vv.grad
      end
      local fd = (g1(xd + eps) - g1(xd - eps)) / (2 * eps)
      assert(fx.maxdiff(hx, fd) < 1e-5, name .. ': second derivative ' .. fx.maxdiff(hx, fd))
    end
  end)

  it('the C entry points refuse the parametric ops without their parameters', function()
    local C = require('lunet.core').C
    local x = lunet.randn(3)
    assert.is_true(C.ln_unary(C.LN_ELU, x.p) == nil)
    assert.matches('elu: has parameters', require('lunet.core').last_error())
    assert.is_true(C.ln_binary(C.LN_SOFTPLUS_BWD, x.p, x.p) == nil)
    assert.matches('softplus_backward: has parameters', require('lunet.core').last_error())
  end)

  it('F.gelu: approximate as nn.GELU, errors named', function()
    local x = lunet.randn(4)
    assert.are.equal(0, fx.maxdiff(F.gelu(x, { approximate = 'tanh' }), F.gelu(x, 'tanh')))
    assert.are.equal(0, fx.maxdiff(F.gelu(x, 'none'), F.gelu(x)))
    assert.matches("gelu: approximate must be 'none' or 'tanh', got 'erf'", fx.err_of(F.gelu, x, 'erf'))
    assert.matches('gelu: approximate must be', fx.err_of(F.gelu, x, 3))
    assert.matches('gelu: unknown option', fx.err_of(F.gelu, x, { approx = 'tanh' }))
    assert.matches('gelu: input must be a floating%-point tensor', fx.err_of(F.gelu, lunet.tensor({ 1, 2 }, { dtype = 'int64' })))
    assert.matches('silu: input must be a floating%-point tensor', fx.err_of(F.silu, lunet.tensor({ 1, 2 }, { dtype = 'int64' })))
  end)
end)
