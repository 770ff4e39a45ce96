-- lunet.linalg.lu_factor, lu_factor_ex, lu, lu_unpack, lu_solve and t:lu()
-- against PyTorch 1.13 (tools/gen_igamma_lu_fixtures.py), with gradchecks.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local la = lunet.linalg

local F = fx.load_fixture('linalg_lu')
local NAMES = { 'sq', 'wide', 'tall', 'batch', 'sing', 'f32' }

describe('linalg LU', function()
  it('lu_factor_ex, lu and lu_unpack match torch (square, wide, tall, batched, singular, float32)', function()
    for _, n in ipairs(NAMES) do
      local A = F[n .. '.A']
      local tol = A.dtype == 'float32' and 1e-5 or 1e-12
      local LU, piv, info = la.lu_factor_ex(A)
      assert.are.equal('int32', piv.dtype)
      assert.are.equal(0, fx.maxdiff(piv, F[n .. '.piv']), n)
      assert.are.equal(0, fx.maxdiff(info, F[n .. '.info']), n)
      assert.is_true(fx.maxdiff(LU, F[n .. '.LU']) < tol, n)
      local P, L, U = la.lu(A)
      assert.is_true(fx.maxdiff(P, F[n .. '.P']) == 0 and fx.maxdiff(L, F[n .. '.L']) < tol and
                     fx.maxdiff(U, F[n .. '.U']) < tol, n)
      local P2, L2, U2 = lunet.lu_unpack(LU, piv)
      assert.is_true(fx.maxdiff(P2, P) == 0 and fx.maxdiff(L2, L) == 0 and fx.maxdiff(U2, U) == 0, n)
      assert.is_true(fx.maxdiff(P:matmul(L):matmul(U), A) < tol * 10, n)
      local LU3, piv3 = A:lu()
      assert.is_true(fx.maxdiff(LU3, LU) == 0 and fx.maxdiff(piv3, piv) == 0, n)
    end
  end)

  it('lu_factor raises on a singular matrix (lu_factor_ex reports info, t:lu() factors it)', function()
    local e = fx.err_of(la.lu_factor, F['sing.A'])
    assert.truthy(e:find('linalg.lu_factor: U[3,3] is zero', 1, true), e)
    local LU, piv, info = F['sing.A']:lu({ get_infos = true })
    assert.are.equal(3, info:item())
    local ok = pcall(la.lu_factor, F['sq.A'])
    assert.is_true(ok)
  end)

  it('lu_solve: plain, adjoint, left = false, batch broadcast', function()
    local LU, piv, B = F['s.LU'], F['s.piv'], F['s.B']
    assert.is_true(fx.maxdiff(la.lu_solve(LU, piv, B), F['s.X']) < 1e-12)
    assert.is_true(fx.maxdiff(la.lu_solve(LU, piv, B, { adjoint = true }), F['s.Xadj']) < 1e-12)
    assert.is_true(fx.maxdiff(la.lu_solve(LU, piv, B:t(), { left = false }), F['s.Xright']) < 1e-12)
    local Bb = B:unsqueeze(1):expand({ 4, 3, 2 })
    local Xb = la.lu_solve(LU, piv, Bb)
    assert.are.same({ 4, 3, 2 }, Xb:size())
    assert.is_true(fx.maxdiff(Xb[3], F['s.X']) < 1e-12)
    assert.are.same({ 3, 0 }, la.lu_solve(LU, piv, lunet.empty({ 3, 0 }, { dtype = 'float64' })):size())
  end)

  it('gradients match torch and gradcheck: lu_factor, lu (square, wide, tall, batched), lu_solve', function()
    for _, n in ipairs({ 'sq', 'wide', 'tall', 'batch' }) do
      local A = F[n .. '.A']:clone():requires_grad_()
      local _, L, U = la.lu(A)
      local loss = (L * F[n .. '.wL']):sum() + (U * F[n .. '.wU']):sum()
      loss:backward()
      assert.is_true(fx.maxdiff(A.grad, F[n .. '.dA_lu']) < 1e-10, n)
      A = F[n .. '.A']:clone():requires_grad_()
      local LU = la.lu_factor(A)
      local l2 = (LU * F[n .. '.wLU']):sum()
      l2:backward()
      assert.is_true(fx.maxdiff(A.grad, F[n .. '.dA_factor']) < 1e-10, n)
      local ok, msg = gradcheck(function(a) local _, l, u = la.lu(a); return lunet.cat({ l:reshape({ -1 }), u:reshape({ -1 }) }) end,
        { F[n .. '.A']:clone():requires_grad_() })
      assert.is_true(ok, msg)
    end
    for _, c in ipairs({ { '', {} }, { 'adj', { adjoint = true } } }) do
      local LU, B = F['s.LU']:clone():requires_grad_(), F['s.B']:clone():requires_grad_()
      local l3 = (la.lu_solve(LU, F['s.piv'], B, c[2]) * F['s.wX']):sum()
      l3:backward()
      assert.is_true(fx.maxdiff(LU.grad, F['s.dLU' .. c[1]]) < 1e-12, c[1])
      assert.is_true(fx.maxdiff(B.grad, F['s.dB' .. c[1]]) < 1e-12, c[1])
      local ok, msg = gradcheck(function(lu, b) return la.lu_solve(lu, F['s.piv'], b, c[2]) end,
        { F['s.LU']:clone():requires_grad_(), F['s.B']:clone():requires_grad_() })
      assert.is_true(ok, msg)
    end
    local ok, msg = gradcheck(function(lu, b) return la.lu_solve(lu, F['s.piv'], b, { left = false }) end,
      { F['s.LU']:clone():requires_grad_(), F['s.B']:t():contiguous():requires_grad_() })
    assert.is_true(ok, msg)
  end)

  it('empty matrices and batches', function()
    local LU, piv, info = la.lu_factor_ex(lunet.empty({ 2, 0, 3 }, { dtype = 'float64' }))
    assert.are.same({ 2, 0, 3 }, LU:size()); assert.are.same({ 2, 0 }, piv:size()); assert.are.same({ 2 }, info:size())
    local P, L, U = la.lu(lunet.empty({ 0, 3 }))
    assert.are.same({ 0, 0 }, P:size()); assert.are.same({ 0, 0 }, L:size()); assert.are.same({ 0, 3 }, U:size())
  end)

  it('named errors: pivot = false, unknown options, bad shapes and dtypes', function()
    local A = F['sq.A']
    assert.truthy(fx.err_of(la.lu_factor, A, { pivot = false }):find('LU without pivoting is not implemented', 1, true))
    assert.truthy(fx.err_of(la.lu_factor, A, { pivo = true }):find('linalg.lu_factor', 1, true))
    assert.truthy(fx.err_of(la.lu_factor, lunet.ones({ 3 }, { dtype = 'float64' })):find('at least 2 dimensions', 1, true))
    assert.truthy(fx.err_of(la.lu_factor, lunet.ones({ 3, 3 }, { dtype = 'int64' })):find('float32 or float64', 1, true))
    local LU, piv = la.lu_factor(A)
    assert.truthy(fx.err_of(la.lu_solve, LU, piv, lunet.ones({ 3 }, { dtype = 'float64' })):find('at least 2 dimensions', 1, true))
    assert.truthy(fx.err_of(la.lu_solve, LU, piv, lunet.ones({ 2, 2 }, { dtype = 'float64' })):find('Incompatible shapes', 1, true))
    assert.truthy(fx.err_of(la.lu_solve, LU, piv:to('int64'), F['s.B']):find('pivots must be an int32', 1, true))
    assert.truthy(fx.err_of(la.lu_solve, LU, piv, F['s.B'], { lef = true }):find('linalg.lu_solve', 1, true))
    assert.truthy(fx.err_of(lunet.lu_unpack, LU, lunet.tensor({ 1, 5, 3 }, { dtype = 'int32' })):find('pivots must be in', 1, true))
    assert.truthy(fx.err_of(function() return A:lu({ get_info = true }) end):find('lu', 1, true))
  end)
end)
