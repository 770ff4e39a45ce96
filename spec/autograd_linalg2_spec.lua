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
local gradcheck = require 'gradcheck'
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
