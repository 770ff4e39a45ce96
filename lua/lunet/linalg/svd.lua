-- lunet.linalg.svd: svd and svdvals (gesdd), and what they give:
-- matrix_rank, pinv, lstsq. The gradient is torch's svd_backward (distinct
-- nonzero singular values), one node per output; pinv and lstsq are made of
-- differentiable ops on it (torch's pinv is the same composition).
local ffi = require 'ffi'
local L = require 'lunet.linalg.lapack'
local options = require 'lunet.options'
local raise = options.raise

return function(linalg)
  local mT = L.mT

  -- (U, S, Vh) of each matrix; jobz 'N' (S alone), 'S' (reduced) or 'A' (full)
  local function gesdd(fn, A, jobz)
    local m, n = A:size(-2), A:size(-1)
    local k = math.min(m, n)
    local bshape, count = L.batch(A)
    local dt, ct = A.dtype, L.ctype(A.dtype)
    local function shape(...)
      local s = {}
      for i, v in ipairs(bshape) do s[i] = v end
      for _, v in ipairs({ ... }) do s[#s + 1] = v end
      return s
    end
    local uc, vr = jobz == 'A' and m or k, jobz == 'A' and n or k
    local S = L.empty(shape(k), dt)
    local ub = L.empty(shape(jobz == 'N' and 0 or uc, m), dt)
    local vb = L.empty(shape(n, jobz == 'N' and 0 or vr), dt)
    if k == 0 then
      if jobz == 'A' then ub:copy_(L.eye(m, dt)); vb:copy_(L.eye(n, dt)) end
    else
      local buf = L.colmajor(A)
      local f, a, s, u, v = L.routine(fn, dt, 'gesdd'), L.ptr(buf), L.ptr(S), L.ptr(ub), L.ptr(vb)
      local im, in_, info, q = L.int1(m), L.int1(n), L.int1(), ffi.new(ct .. '[1]')
      local ldu, ldvt = L.int1(m), L.int1(math.max(1, vr))
      local iwork = ffi.new('int[?]', 8 * k)
      f(jobz, im, in_, a, im, s, u, ldu, v, ldvt, q, L.int1(-1), iwork, info, 1)
      local lw = L.lwork(q)
      local work = ffi.new(ct .. '[?]', lw)
      local us, vs = jobz == 'N' and 0 or uc * m, jobz == 'N' and 0 or vr * n
      for i = 0, count - 1 do
        f(jobz, im, in_, a + i * m * n, im, s + i * k, u + i * us, ldu, v + i * vs, ldvt, work, L.int1(lw), iwork,
          info, 1)
        if info[0] > 0 then raise(('%s: the algorithm failed to converge%s'):format(fn, L.where(count, i)))
        elseif info[0] < 0 then raise(('%s: LAPACK gesdd failed (info %d)'):format(fn, info[0])) end
      end
    end
    return mT(ub), S, mT(vb)
  end

  -- the reduced factors a node works with (full_matrices: the first k columns / rows)
  local function reduced(nd)
    local U, S, Vh = nd.U, nd.S, nd.Vh
    local k = S:size(-1)
    return U:narrow(-1, 1, k), S, Vh:narrow(-2, 1, k), k
  end
  local function E_of(S)
    local S2 = S * S
    local eye = L.eye(S:size(-1), S.dtype)
    return S2:unsqueeze(-2) - S2:unsqueeze(-1) + eye
  end
  local function S_bw(nd, g)
    local U, _, Vh = reduced(nd)
    return (U * g:unsqueeze(-2)):matmul(Vh)
  end
  local function U_bw(nd, g)
    local U, S, Vh, k = reduced(nd)
    g = g:narrow(-1, 1, k)
    local X = mT(U):matmul(g)
    local inner = (X - mT(X)) * S:unsqueeze(-2) / E_of(S)
    local gA = U:matmul(inner)
    if U:size(-2) > k then
      local gUS = g / S:unsqueeze(-2)
      gA = gA + gUS - U:matmul(mT(U):matmul(gUS))
    end
    return gA:matmul(Vh)
  end
  local function Vh_bw(nd, g)
    local U, S, Vh, k = reduced(nd)
    g = g:narrow(-2, 1, k)
    local V, gV = mT(Vh), mT(g)
    local X = mT(V):matmul(gV)
    local inner = S:unsqueeze(-1) * (X - mT(X)) / E_of(S)
    local gA = inner:matmul(Vh)
    if Vh:size(-1) > k then
      local SgVh = g / S:unsqueeze(-1)
      gA = gA + SgVh - SgVh:matmul(V):matmul(Vh)
    end
    return U:matmul(gA)
  end

  local SVD_OPTS = { full_matrices = 'boolean' }
  -- svd(A[, {full_matrices = true}]) -> U, S, Vh (S descending)
  function linalg.svd(A, opts)
    local fn = 'linalg.svd'
    L.check(fn, A)
    opts = options.check(fn, opts, SVD_OPTS)
    local full = not (opts and opts.full_matrices == false)
    local U, S, Vh = gesdd(fn, A, full and 'A' or 'S')
    local f, live = { U = U, S = S, Vh = Vh }, {}   -- (live: the nodes of U, S and Vh)
    return L.record(U, U_bw, fn, f, A, nil, live, 'U'), L.record(S, S_bw, fn, f, A, nil, live, 'S'),
      L.record(Vh, Vh_bw, fn, f, A, nil, live, 'Vh')
  end

  function linalg.svdvals(A)
    local fn = 'linalg.svdvals'
    L.check(fn, A)
    if not L.records(A) then
      local _, S = gesdd(fn, A, 'N')
      return S
    end
    -- (U and Vh recorded too: S's gradient is differentiable through them)
    local _, S = linalg.svd(A, { full_matrices = false })
    return S
  end

  -- the cut-off below which singular values count as zero: max(atol, rtol smax),
  -- rtol eps max(m, n) when neither is given (torch 1.13)
  local TOL_OPTS = { atol = 'number', rtol = 'number', hermitian = 'boolean' }
  local EPS = { float32 = 2 ^ -23, float64 = 2 ^ -52 }
  local function tolerance(A, S, o)
    local atol, rtol = o and o.atol, o and o.rtol
    if rtol == nil then rtol = (atol and atol > 0) and 0 or EPS[A.dtype] * math.max(A:size(-2), A:size(-1)) end
    local smax = S:size(-1) > 0 and S:detach():amax(-1, true) or S:sum(-1, true)
    return (smax * rtol):clamp_min(atol or 0)
  end
  local function values(A, o)
    if o and o.hermitian then return linalg.eigvalsh(A):abs() end
    return linalg.svdvals(A)
  end

  -- matrix_rank(A[, {atol =, rtol =, hermitian =}]) -> int64 (batch shape)
  function linalg.matrix_rank(A, opts)
    local fn = 'linalg.matrix_rank'
    L.check(fn, A)
    opts = options.check(fn, opts, TOL_OPTS)
    local S = values(A, opts):detach()
    return S:gt(tolerance(A, S, opts)):sum(-1):long()
  end

  -- pinv(A[, {atol =, rtol =, hermitian =}]) = V diag(1 / S above the cut-off) U^T
  function linalg.pinv(A, opts)
    local fn = 'linalg.pinv'
    L.check(fn, A)
    opts = options.check(fn, opts, TOL_OPTS)
    local U, S, Vh = linalg.svd(A, { full_matrices = false })
    local keep = S:detach():gt(tolerance(A, S, opts)):to(A.dtype)
    local Sinv = keep / (S + (1 - keep))
    return (mT(Vh) * Sinv:unsqueeze(-2)):matmul(mT(U))
  end

  -- lstsq(A, B) -> solution, residuals, rank, singular_values, as torch's
  -- CPU default driver gelsy gives them: residuals and singular_values
  -- empty. The solution is pinv(A) B: the minimum-norm least-squares one
  -- gelsy gives (rcond: pinv's rtol).
  local LSTSQ_OPTS = { rcond = 'number', driver = 'string' }
  function linalg.lstsq(A, B, opts)
    local fn = 'linalg.lstsq'
    L.check(fn, A)
    L.check(fn, B, 'B', false, 1)
    opts = options.check(fn, opts, LSTSQ_OPTS)
    if opts and opts.driver then options.one_of(fn, 'driver', opts.driver, { 'gelsy' }) end
    if A.dtype ~= B.dtype then raise(('%s: A and B must have the same dtype, got %s and %s'):format(fn, A.dtype, B.dtype)) end
    local vec = B:dim() == A:dim() - 1
    local B2 = vec and B:unsqueeze(-1) or B
    if B2:dim() < 2 or B2:size(-2) ~= A:size(-2) then
      raise(('%s: A has %d rows but B has %d'):format(fn, A:size(-2), B2:dim() < 2 and B2:size(-1) or B2:size(-2)))
    end
    local m, n = A:size(-2), A:size(-1)
    local o = opts and opts.rcond and { rtol = opts.rcond } or { rtol = EPS[A.dtype] * math.max(m, n) }
    local X = linalg.pinv(A, o):matmul(B2)
    local rank = linalg.matrix_rank(A, o)
    return vec and X:squeeze(-1) or X, L.empty({ 0 }, A.dtype), rank, L.empty({ 0 }, A.dtype)
  end
end
