-- lunet.igamma / igammac (torch.igamma, torch.igammac = torch.special.gammainc
-- / gammaincc): the regularized incomplete gamma functions P(a, x), Q(a, x),
-- against PyTorch 1.13 and mpmath (tools/gen_igamma_lu_fixtures.py).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local gradcheck = require 'gradcheck'

local F = fx.load_fixture('igamma')

-- largest |got - want| / |want| where |want| > 1e-300 (and both finite)
local function maxrel(got, want)
  local keep = want:abs():gt(1e-300)
  local d = ((got:double() - want) / want:where(keep, 1)):abs()
  return d:where(keep, 0):max():item()
end

-- same NaN positions, and equal elsewhere (to 1e-14: torch's P(1e-10, 1)
-- is 1 - Q rounded off by 1e-15)
local function same(got, want)
  assert.is_true(got:isnan():eq(want:isnan()):all():item(), 'NaN positions differ')
  local ok = want:isnan():logical_not()
  assert.is_true((got:double() - want):where(ok, 0):abs():max():item() < 1e-14)
end

describe('igamma, igammac', function()
  it('match mpmath to 1e-12 over a in [1e-3, 1e4], x in [0, 1e4] (float64)', function()
    local a, x = F.a, F.x
    assert.is_true(maxrel(a:igamma(x), F.ref_p) < 1e-12)
    assert.is_true(maxrel(a:igammac(x), F.ref_q) < 1e-12)
    -- torch 1.13 within its own error (~2e-9 for a of 20 to 100 near x ~ a)
    assert.is_true(maxrel(lunet.igamma(a, x), F.igamma) < 1e-8)
    assert.is_true(maxrel(lunet.igammac(a, x), F.igammac) < 1e-8)
    -- and to 1e-12 where torch agrees with mpmath
    local good = ((F.igamma - F.ref_p):abs():le(F.ref_p:abs() * 1e-13))
    assert.is_true(maxrel(a:igamma(x):where(good, 1), F.igamma:where(good, 1)) < 1e-12)
  end)

  it('float32: float64 on the same inputs rounded once; torch within its float32 error', function()
    local p, q = F.a32:igamma(F.x32), F.a32:igammac(F.x32)
    assert.are.equal('float32', p.dtype)
    local a, x = F.a32:double(), F.x32:double()
    assert.is_true(maxrel(p, a:igamma(x):float():double()) == 0)
    assert.is_true(maxrel(q, a:igammac(x):float():double()) == 0)
    -- (torch 1.13's float kernel is off by up to 1.2e-4 relative above 1e-10:
    -- Q(1e-3, 1) ~ 2e-4 as 1 - P in float; 2e-5 for a ~ 100)
    local keep = F.igamma32:abs():gt(1e-10)
    assert.is_true(maxrel(p:where(keep, 1), F.igamma32:where(keep, 1):double()) < 2e-4)
    keep = F.igammac32:abs():gt(1e-10)
    assert.is_true(maxrel(q:where(keep, 1), F.igammac32:where(keep, 1):double()) < 2e-4)
  end)

  it('edge cases as torch: a = 0, x = 0, inf, NaN, negative', function()
    same(F.ea:igamma(F.ex), F.eigamma)
    same(F.ea:igammac(F.ex), F.eigammac)
  end)

  it('broadcasts, takes views, 0-d and empty tensors, in place', function()
    local a = lunet.tensor({ { 0.5 }, { 2 }, { 40 } }, { dtype = 'float64' })
    local x = lunet.tensor({ 0.1, 1, 3, 45 }, { dtype = 'float64' })
    local r = a:igamma(x)
    assert.are.same({ 3, 4 }, r:size())
    assert.is_true(fx.maxdiff(r + a:igammac(x), lunet.ones({ 3, 4 }, { dtype = 'float64' })) < 1e-15)
    local t = lunet.rand({ 4, 3 }, { dtype = 'float64' }):mul(5):t()
    assert.is_false(t:is_contiguous())
    assert.is_true(fx.maxdiff(t:igamma(t), t:contiguous():igamma(t:contiguous())) == 0)
    assert.are.same({}, lunet.tensor(2.0):igamma(lunet.tensor(1.0)):size())
    assert.are.same({ 0, 3 }, lunet.empty({ 0, 3 }):igamma(lunet.empty({ 3 })):size())
    local y = a:clone()
    y:igammac_(lunet.tensor({ 1.0 }, { dtype = 'float64' }))
    assert.is_true(fx.maxdiff(y, a:igammac(lunet.tensor({ 1.0 }, { dtype = 'float64' }))) == 0)
    -- an integer operand promotes with a float one (as torch)
    assert.are.equal('float32', lunet.tensor({ 1, 2 }, { dtype = 'int64' }):igamma(lunet.tensor({ 1.0, 2.0 })).dtype)
  end)

  it('gradient w.r.t. x (torch values and gradcheck); w.r.t. a a named error', function()
    for _, c in ipairs({ { 'igamma', F.gp }, { 'igammac', F.gq } }) do
      local x = F.gx:clone():requires_grad_()
      lunet[c[1]](F.ga, x):sum():backward()
      assert.is_true(fx.maxdiff(x.grad, c[2]) < 1e-14)
      local ok, msg = gradcheck(function(xx) return lunet[c[1]](F.ga, xx) end, { F.gx:clone():requires_grad_() })
      assert.is_true(ok, msg)
      local a = F.ga:clone():requires_grad_()
      local e = fx.err_of(function() lunet[c[1]](a, F.gx):sum():backward() end)
      assert.truthy(e:find(c[1] .. ": the derivative for 'input' (a) is not implemented", 1, true), e)
    end
  end)

  it('refuses integer tensors and non-tensors with named errors', function()
    local i = lunet.tensor({ 1, 2 }, { dtype = 'int64' })
    assert.truthy(fx.err_of(function() return i:igamma(i) end):find('igamma: not implemented for int64', 1, true))
    assert.truthy(fx.err_of(function() return i:igammac(i) end):find('igammac: not implemented for int64', 1, true))
    assert.truthy(fx.err_of(function() return lunet.igamma(lunet.ones({ 2 }), 'x') end):find('igamma', 1, true))
    assert.truthy(fx.err_of(function() return lunet.igamma(lunet.ones({ 2 }), lunet.ones({ 3 })) end):find('igamma', 1, true))
  end)
end)
