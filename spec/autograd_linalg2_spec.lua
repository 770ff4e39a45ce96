-- Double backward through lunet.linalg (autograd.grad with create_graph):
-- the Hessians torch 1.13 gives of log-determinants, determinants, inverses,
-- solve-based quadratic forms, cholesky-based Gaussian log-likelihoods
-- (MultivariateNormal.log_prob), qr, eigh, svd / svdvals, the matrix norms,
-- pinv, matrix_power and multi_dot, from
-- spec/fixtures/autograd_linalg2.safetensors
-- (tools/gen_autograd_linalg2_fixtures.py); then float64 finite differences
-- of each gradient (gradgradcheck-style), non-contiguous and empty inputs,
-- and the plain backward left as it was.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local gradgrad = require 'support.gradgrad'
local A = lunet.autograd
local AF = A.functional
local LA = lunet.linalg
local dist = lunet.distributions

local T, CASES = fx.load_fixture('autograd_linalg2')
local function close(a, b, tol)
  assert.are.same(b:size(), a:size())
  local d = fx.maxdiff(a, b) / math.max(b:abs():max():item(), 1)
  assert.is_true(d < (tol or 1e-8), ('differs by %g'):format(d))
end
local function sym(a) return (a + a:transpose(-1, -2)) * 0.5 end
local function gauss(mu, a, X)   -- (as the generator's: N(mu, a a^T + I), via cholesky)
  local n = mu:size(-1)
  local L = LA.cholesky(a:matmul(a:t()) + lunet.eye(n, { dtype = 'float64' }))
  local z = LA.solve(L, (X - mu):t())
  return -(z * z):sum() * 0.5 - L:diagonal(0, -2, -1):log():sum() * X:size(-2) - X:size(-2) * 0.5 * n * math.log(2 * math.pi)
end
local function mvn(mu, a, X)
  local cov = a:matmul(a:transpose(-1, -2)) + lunet.eye(3, { dtype = 'float64' })
  return dist.MultivariateNormal(mu, cov):log_prob(X):sum()
end
local function qr_sq(a, C1, C2)
  local Q, R = LA.qr(a)
  return (Q:pow(2) * C1):sum() + (R:pow(2) * C2):sum()
end

-- the generator's functions, by case name (the constants after the inputs)
local F = {
  logdet = function(a) local _, l = LA.slogdet(a); return l end,
  logdet_batched = function(a) local _, l = LA.slogdet(a); return l:sum() end,
  det = function(a) return LA.det(a) end,
  det_singular = function(a) return LA.det(a) end,
  det_batched = function(a, c) return (LA.det(a) * c):sum() end,
  inv = function(a, C) return (LA.inv(a) * C):sum() end,
  solve_quad = function(a, b) return (b * LA.solve(a, b)):sum() end,
  solve_batched = function(a, B) return (B * LA.solve(a, B)):sum() end,
  solve_broadcast = function(a, B, C) return (LA.solve(a, B):pow(2) * C):sum() end,
  gauss_cholesky = gauss,
  mvn_log_prob = mvn,
  mvn_log_prob_batched = mvn,
  cholesky_upper = function(a, C) return (LA.cholesky(sym(a), { upper = true }) * C):sum() end,
  qr = qr_sq, qr_tall = qr_sq, qr_wide = qr_sq,
  eigvalsh = function(a, c) return (LA.eigvalsh(sym(a)) * c):sum() end,
  eigh_batched = function(a, c, C)
    local w, V = LA.eigh(sym(a))
    return (w * c):sum() + (V:pow(2) * C):sum()
  end,
  svdvals = function(a, c) return (LA.svdvals(a) * c):sum() end,
  svdvals_batched_tall = function(a, c) return (LA.svdvals(a) * c):sum() end,
  svd_uv = function(a, c, C1, C2)
    local U, S, Vh = LA.svd(a, { full_matrices = false })
    return (S * c):sum() + (U:pow(2) * C1):sum() + (Vh:pow(2) * C2):sum()
  end,
  norm_nuc = function(a) return LA.matrix_norm(a, 'nuc'):sum() end,
  norm_spectral = function(a, c) return (LA.matrix_norm(a, 2) * c):sum() + LA.matrix_norm(a, -2):sum() end,
  norm_fro = function(a, c) return (LA.matrix_norm(a) * c):sum() + LA.norm(a:select(1, 1)) end,
  vector_norm = function(x) return LA.vector_norm(x, 3, 2):sum() + LA.vector_norm(x, 1.5) end,
  pinv = function(a, C) return (LA.pinv(a) * C):sum() end,
  matrix_power_neg = function(a, C) return (LA.matrix_power(a, -2) * C):sum() end,
  multi_dot = function(a, b, c) return LA.multi_dot({ a, b, c }):pow(2):sum() end,
}

describe('linalg double backward against torch 1.13 (Hessians)', function()
  for _, c in ipairs(CASES) do
    it(c.name, function()
      local ins, cs = {}, {}
      for i = 1, c.n_in do ins[i] = T[c.name .. '.in' .. i] end
      for i = 1, c.n_c do cs[i] = T[c.name .. '.c' .. i] end
      local f = assert(F[c.name], 'no function for ' .. c.name)
      local function fun(...)
        local args = { ... }
        for i = 1, #cs do args[#args + 1] = cs[i] end
        return f(unpack(args))
      end
      local H = AF.hessian(fun, ins)
      for i = 1, c.n_in do
        for j = 1, c.n_in do
          local ok, e = pcall(close, H[i][j], T[('%s.H%d.%d'):format(c.name, i, j)])
          assert(ok, ('H[%d][%d]: %s'):format(i, j, tostring(e)))
        end
      end
    end)
  end
end)

-- second derivatives against finite differences of the first: gradcheck of
-- inputs -> d sum(f(inputs) * w) / d(inputs) (create_graph), as torch's gradgradcheck
describe('linalg double backward (finite differences of the gradient)', function()
  lunet.manual_seed(5)
  local function r(...) return lunet.randn({ ... }, { dtype = 'float64' }):requires_grad_() end
  local function wc(...)   -- (well-conditioned: + 3 I)
    local s = { ... }
    return (lunet.randn(s, { dtype = 'float64' }) + lunet.eye(s[#s], { dtype = 'float64' }) * 3):requires_grad_()
  end
  local function spd(...)
    local s = { ... }
    local a = lunet.randn(s, { dtype = 'float64' })
    return (a:matmul(a:transpose(-1, -2)) + lunet.eye(s[#s], { dtype = 'float64' }) * 2):requires_grad_()
  end
  local cases = {
    { 'det, slogdet, logdet (batched)', function(a)
      local _, l = LA.slogdet(a)
      return LA.det(a) + l + a:logdet()
    end, { wc(2, 3, 3) } },
    { 'inv, inverse, matrix_power -3', function(a) return LA.inv(a) + a:inverse():pow(2) + LA.matrix_power(a, -3) end, { wc(3, 3) } },
    { 'solve: matrix B, broadcast A, vector B, left = false', function(a, a1, B, b)
      return LA.solve(a, B):sum(3) + LA.solve(a1, B):sum(3) + LA.solve(a1, b):sum() * 0.3
        + LA.solve(a1, B:transpose(-1, -2), { left = false }):sum(2)
    end, { wc(2, 3, 3), wc(3, 3), r(2, 3, 3), r(3) } },
    { 'cholesky, upper', function(a) return LA.cholesky(sym(a)) + LA.cholesky(sym(a), { upper = true }):pow(2) end, { spd(2, 3, 3) } },
    { 'MultivariateNormal log_prob (covariance, scale_tril, precision)', function(mu, a)
      local X = lunet.linspace(-1, 1, 12, { dtype = 'float64' }):reshape(4, 3)
      local cov = a:matmul(a:t()) + lunet.eye(3, { dtype = 'float64' })
      return dist.MultivariateNormal(mu, cov):log_prob(X)
        + dist.MultivariateNormal(mu, { precision_matrix = cov }):log_prob(X)
        + dist.MultivariateNormal(mu, { scale_tril = LA.cholesky(cov) }):log_prob(X)
    end, { r(3), r(3, 3) } },
    { 'qr square, tall, wide', function(a, b, c)
      local Q1, R1 = LA.qr(a)
      local Q2, R2 = LA.qr(b)
      local Q3, R3 = LA.qr(c)
      return Q1:sum() + R1:pow(2):sum() + Q2:pow(3):sum() + R2:sum() + Q3:pow(2):sum() + R3:pow(3):sum()
    end, { wc(3, 3), r(4, 3), r(2, 3) } },
    { 'eigh (values, vectors), eigvalsh', function(a)
      local w, V = LA.eigh(sym(a))
      return w:pow(2):sum() + (V:pow(2) * lunet.linspace(-1, 1, 9, { dtype = 'float64' }):reshape(3, 3)):sum()
        + LA.eigvalsh(sym(a), { UPLO = 'U' }):pow(3):sum()
    end, { r(3, 3) } },
    { 'svd (full, reduced, tall, wide), svdvals', function(a, b, c)
      local U, S, Vh = LA.svd(a)
      local U2, S2, Vh2 = LA.svd(b, { full_matrices = false })
      local U3, _, Vh3 = LA.svd(c, { full_matrices = false })
      return S:pow(2):sum() + U:pow(4):sum() + Vh:pow(4):sum() + S2:sum() + U2:pow(4):sum() + Vh2:pow(4):sum()
        + U3:pow(4):sum() + Vh3:pow(4):sum() + LA.svdvals(c):pow(3):sum()
    end, { r(3, 3), r(4, 3), r(2, 2, 3) } },
    { 'matrix norms: nuc, 2, -2, fro, 1, inf; vector_norm p = 2, 3, inf', function(a)
      return LA.matrix_norm(a, 'nuc') + LA.matrix_norm(a, 2) + LA.matrix_norm(a, -2) * 2 + LA.matrix_norm(a) * 3
        + LA.matrix_norm(a, 1) + LA.matrix_norm(a, math.huge) + LA.vector_norm(a, 3, { 2, 3 })
        + LA.vector_norm(a, math.huge, { 2, 3 }) + LA.norm(a, nil, 3, true):sum(2):squeeze(2)
    end, { r(2, 3, 4) } },
    { 'pinv, lstsq, multi_dot', function(a, b, c, d)
      local X = LA.lstsq(a, b)
      return LA.pinv(a):pow(2):sum() + X:pow(2):sum() + LA.multi_dot({ b:select(2, 1), a, d, c }):pow(2):sum()
    end, { r(4, 3), r(4, 2), r(2, 2), r(3, 2) } },
    { 'cross', function(a, b) return LA.cross(a * a, b):pow(2) end, { r(2, 3), r(2, 3) } },
  }
  gradgrad.each(it, cases)

  it('non-contiguous inputs (a transpose, a strided batch)', function()
    local base = (lunet.randn({ 3, 3 }, { dtype = 'float64' }) + lunet.eye(3, { dtype = 'float64' }) * 3)
    local a = base:t():requires_grad_()
    assert.is_false(a:is_contiguous())
    local ref = base:t():contiguous():requires_grad_()
    local function hs(x)
      local _, l = LA.slogdet(x)
      local g = A.grad(l + LA.svdvals(x):pow(3):sum() + LA.inv(x):sum(), x, { create_graph = true })[1]
      return A.grad((g * g):sum(), x)[1]
    end
    close(hs(a), hs(ref), 1e-12)
    local b = lunet.randn({ 4, 3, 3 }, { dtype = 'float64' }):requires_grad_()
    local sl = b:narrow(1, 1, 4):select(2, 1)   -- (rows of each matrix: a strided 4x3)
    local g = A.grad(LA.svdvals(sl):pow(3):sum(), b, { create_graph = true })[1]
    local d = A.grad(g:pow(2):sum(), b)[1]
    local bc = b:detach():clone():requires_grad_()
    local g2 = A.grad(LA.svdvals(bc:select(2, 1):contiguous()):pow(3):sum(), bc, { create_graph = true })[1]
    close(d, A.grad(g2:pow(2):sum(), bc)[1], 1e-12)
  end)

  it('empty batches: the gradient and its gradient are empty', function()
    local a = lunet.zeros({ 0, 3, 3 }, { dtype = 'float64' }):requires_grad_()
    for _, f in ipairs({ function(x) local _, l = LA.slogdet(x); return l:sum() end,
      function(x) return LA.inv(x):sum() end, function(x) return LA.svdvals(x):sum() end,
      function(x) return LA.eigvalsh(x):sum() end }) do
      local g = A.grad(f(a), a, { create_graph = true, allow_unused = true })[1]
      assert.are.same({ 0, 3, 3 }, g:size())
      local d = A.grad(g:sum(), a, { allow_unused = true })[1]
      if d then assert.are.same({ 0, 3, 3 }, d:size()) end
    end
  end)
end)

describe('linalg double backward: the plain path and what stays unsupported', function()
  it('the plain backward records nothing and gives the same gradients', function()
    local a = (lunet.randn({ 2, 3, 3 }, { dtype = 'float64' }) + lunet.eye(3, { dtype = 'float64' }) * 3):requires_grad_()
    local function f(x)
      local _, l = LA.slogdet(x)
      local w = LA.eigvalsh(sym(x))
      return l:sum() + LA.det(x):sum() + LA.inv(x):sum() + LA.solve(x, x:sum(3)):sum() + LA.svdvals(x):sum()
        + w:pow(2):sum() + LA.cholesky(x:matmul(x:transpose(-1, -2))):sum() + LA.matrix_norm(x, 'nuc'):sum()
    end
    f(a):backward()
    local plain = a.grad
    assert.is_false(plain.requires_grad)
    local g = A.grad(f(a), a, { create_graph = true })[1]
    assert.is_true(g.requires_grad)
    close(g, plain, 1e-12)
  end)

  it('qr with mode = \'r\' has no gradient, first or second', function()
    local a = lunet.randn({ 3, 3 }, { dtype = 'float64' }):requires_grad_()
    local _, R = LA.qr(a, { mode = 'r' })
    local e = fx.err_of(function() A.grad(R:sum(), a, { create_graph = true }) end)
    assert.matches('linalg.qr: the derivative of linalg.qr depends on Q', e, 1, true)
  end)

  it('a node without a differentiable backward still names itself at the second derivative (beside linalg\'s)', function()
    local x = lunet.rand({ 3 }, { dtype = 'float64' }):requires_grad_()
    local g = A.grad(x:polygamma(0):sum() + LA.det(x:reshape(3, 1) * x:reshape(1, 3) + lunet.eye(3, { dtype = 'float64' })), x, { create_graph = true })[1]
    local e = fx.err_of(function() A.grad(g:sum(), x) end)
    assert.matches('double backward through polygamma is not supported yet', e, 1, true)
  end)

  it('the Hessian of logdet is -A^-T (x) A^-1 (analytic)', function()
    local a = (lunet.randn({ 3, 3 }, { dtype = 'float64' }) + lunet.eye(3, { dtype = 'float64' }) * 3)
    local H = AF.hessian(function(x) return x:logdet() end, a)
    local Ai = LA.inv(a)
    -- d2 logdet / dA_ij dA_kl = -(A^-1)_jk (A^-1)_li
    -- H[i][j][k][l] = -Ai[j][k] Ai[l][i]
    local want = -(Ai:reshape(1, 3, 3, 1) * Ai:t():reshape(3, 1, 1, 3))
    close(H, want, 1e-12)
  end)
end)
