-- lunet.linalg.decomp: cholesky (potrf), qr (geqrf, orgqr), eigh (syevd),
-- with torch 1.13's gradients. A function of several outputs records one
-- node per output: each backward is linear in the output gradients, so
-- the sum of the nodes' gradients is torch's.
local ffi = require 'ffi'
local L = require 'lunet.linalg.lapack'
local options = require 'lunet.options'
local raise = options.raise

return function(linalg)
  local mT = L.mT

  -- ---- cholesky: gA = L^-T Phi(L^T gL) L^-1, Phi the lower triangle with the diagonal halved,
  -- symmetrized (Iain Murray 2016, as torch's cholesky_backward)
  local function chol_bw(nd, g)
    local Lw = nd.r
    if nd.upper then Lw, g = mT(Lw), mT(g) end
    local P = mT(Lw):matmul(g):tril()
    P = (P + mT(P:tril(-1))) * 0.5
    local X = linalg.solve(mT(Lw), P)
    return mT(linalg.solve(mT(Lw), mT(X)))
  end

  local CHOL_OPTS = { upper = 'boolean' }
  local LIVE_R = { r = 0 }   -- (the saved tensors' sources, for create_graph: lunet.autograd.double)
  function linalg.cholesky(A, opts)
    local fn = 'linalg.cholesky'
    L.check(fn, A, 'A', true)
    local upper = options.check(fn, opts, CHOL_OPTS) and opts.upper or false
    local n = A:size(-1)
    local _, count = L.batch(A)
    local buf = L.colmajor(A)
    local potrf, a = L.routine(fn, A.dtype, 'potrf'), L.ptr(buf)
    local nn, lda, info = L.int1(n), L.int1(math.max(1, n)), L.int1()
    for i = 0, count - 1 do
      potrf('L', nn, a + i * n * n, lda, info, 1)
      if info[0] > 0 then
        raise(('%s: the input is not positive-definite (the leading minor of order %d)%s'):format(fn, info[0],
          L.where(count, i)))
      elseif info[0] < 0 then raise(('%s: LAPACK potrf failed (info %d)'):format(fn, info[0])) end
    end
    local Lw = mT(buf):tril()
    local r = upper and mT(Lw) or Lw
    return L.record(r, chol_bw, fn, { r = r, upper = upper }, A, nil, LIVE_R)
  end

  -- ---- qr: for m >= n, gA = (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q; for
  -- m < n, A = [X | Y], R = [U | V]: gY = Q gV, gX the square case with gQ + Y gV^T, gU
  local function qr_square(Q, R, gQ, gR)
    local M = gR and R:matmul(mT(gR)) or nil
    if gQ then
      local t = mT(gQ):matmul(Q)
      M = M and M - t or -t
    end
    local cl = M:tril() + mT(M:tril(-1))
    local B = Q:matmul(cl)
    if gQ then B = B + gQ end
    return mT(linalg.solve(R, mT(B)))   -- B R^-T
  end
  local function qr_grad(nd, gQ, gR)
    local Q, R, mode = nd.Q, nd.R, nd.mode
    local m, n = Q:size(-2), R:size(-1)
    if mode == 'complete' and m > n then
      raise('linalg.qr: the QR decomposition is not differentiable when mode = \'complete\' and nrows > ncols')
    end
    if m >= n then return qr_square(Q, R, gQ, gR) end
    local A = nd.A
    local Y = A:narrow(-1, m + 1, n - m)
    local U = R:narrow(-1, 1, m)
    local gU, gV = gR and gR:narrow(-1, 1, m), gR and gR:narrow(-1, m + 1, n - m)
    local gq = gQ
    if gV then gq = gq and gq + Y:matmul(mT(gV)) or Y:matmul(mT(gV)) end
    local gX = qr_square(Q, U, gq, gU)
    local gY = gV and Q:matmul(gV) or Y * 0
    return gX:cat({ gY }, -1)
  end
  local function qrQ_bw(nd, g) return qr_grad(nd, g, nil) end
  local function qrR_bw(nd, g) return qr_grad(nd, nil, g) end

  local QR_OPTS = { mode = 'string' }
  -- qr(A[, {mode = 'reduced'}]) -> Q, R ('r': Q is an empty tensor)
  function linalg.qr(A, opts)
    local fn = 'linalg.qr'
    L.check(fn, A)
    local mode = options.check(fn, opts, QR_OPTS) and opts.mode or 'reduced'
    options.one_of(fn, 'mode', mode, { 'reduced', 'complete', 'r' })
    local m, n = A:size(-2), A:size(-1)
    local k = math.min(m, n)
    local bshape, count = L.batch(A)
    local buf = L.colmajor(A)
    local a, dt = L.ptr(buf), A.dtype
    local geqrf = L.routine(fn, dt, 'geqrf')
    local ct = L.ctype(dt)
    local tau = ffi.new(ct .. '[?]', math.max(1, count * k))
    local im, in_, info, q = L.int1(m), L.int1(n), L.int1(), ffi.new(ct .. '[1]')
    local lda = L.int1(math.max(1, m))
    geqrf(im, in_, a, lda, tau, q, L.int1(-1), info)
    local lw = L.lwork(q)
    local work = ffi.new(ct .. '[?]', lw)
    for i = 0, count - 1 do
      geqrf(im, in_, a + i * m * n, lda, tau + i * k, work, L.int1(lw), info)
      if info[0] ~= 0 then raise(('%s: LAPACK geqrf failed (info %d)'):format(fn, info[0])) end
    end
    local rrows = mode == 'complete' and m or k
    local R = mT(buf):narrow(-2, 1, rrows):triu()
    if mode == 'r' then
      return L.empty({ 0 }, dt), L.record(R, function()
        raise('linalg.qr: the derivative of linalg.qr depends on Q, which mode = \'r\' does not compute')
      end, fn, {}, A)
    end
    local qc = mode == 'complete' and m or k
    local qshape = {}
    for i, v in ipairs(bshape) do qshape[i] = v end
    qshape[#qshape + 1], qshape[#qshape + 2] = qc, m
    local qbuf = L.empty(qshape, dt)
    if k > 0 then qbuf:narrow(-2, 1, k):copy_(buf:narrow(-2, 1, k)) end
    local orgqr, qa = L.routine(fn, dt, 'orgqr'), L.ptr(qbuf)
    local iq, ik = L.int1(qc), L.int1(k)
    if m > 0 then
      orgqr(im, iq, ik, qa, lda, tau, q, L.int1(-1), info)
      lw = L.lwork(q)
      work = ffi.new(ct .. '[?]', lw)
      for i = 0, count - 1 do
        orgqr(im, iq, ik, qa + i * m * qc, lda, tau + i * k, work, L.int1(lw), info)
        if info[0] ~= 0 then raise(('%s: LAPACK orgqr failed (info %d)'):format(fn, info[0])) end
      end
    end
    local Q = mT(qbuf)
    local fields = { Q = Q, R = R, mode = mode, A = A:detach() }
    local live = { A = 1 }   -- (and the nodes of Q and R)
    return L.record(Q, qrQ_bw, fn, fields, A, nil, live, 'Q'), L.record(R, qrR_bw, fn, fields, A, nil, live, 'R')
  end

  -- ---- eigh: gA = V (diag(gL) + skew(V^T gV) / E) V^T, skew(X) = (X - X^T) / 2,
  -- E[i][j] = L_j - L_i (distinct eigenvalues)
  local function eigvals_bw(nd, g)
    local V = nd.V
    return (V * g:unsqueeze(-2)):matmul(mT(V))
  end
  local function eigvecs_bw(nd, g)
    local V, w = nd.V, nd.w
    local X = mT(V):matmul(g)
    X = (X - mT(X)) * 0.5
    local n = w:size(-1)
    local eye = L.eye(n, w.dtype)
    local E = w:unsqueeze(-2) - w:unsqueeze(-1) + eye
    return V:matmul((X / E) * (1 - eye)):matmul(mT(V))
  end

  local EIGH_OPTS = { UPLO = 'string' }
  -- eigh(A[, {UPLO = 'L'}]) -> eigenvalues (ascending), eigenvectors (columns)
  function linalg.eigh(A, opts)
    local fn = 'linalg.eigh'
    L.check(fn, A, 'A', true)
    local uplo = options.check(fn, opts, EIGH_OPTS) and opts.UPLO or 'L'
    options.one_of(fn, 'UPLO', uplo, { 'L', 'U' })
    local n = A:size(-1)
    local bshape, count = L.batch(A)
    local buf, dt = L.colmajor(A), A.dtype
    local wshape = {}
    for i, v in ipairs(bshape) do wshape[i] = v end
    wshape[#wshape + 1] = n
    local w = L.empty(wshape, dt)
    local syevd, a, pw = L.routine(fn, dt, 'syevd'), L.ptr(buf), L.ptr(w)
    local ct = L.ctype(dt)
    local nn, info, q, iq = L.int1(n), L.int1(), ffi.new(ct .. '[1]'), L.int1()
    local lda = L.int1(math.max(1, n))
    if n > 0 then
      syevd('V', uplo, nn, a, lda, pw, q, L.int1(-1), iq, L.int1(-1), info, 1, 1)
      local lw, liw = L.lwork(q), math.max(1, iq[0])
      local work, iwork = ffi.new(ct .. '[?]', lw), ffi.new('int[?]', liw)
      for i = 0, count - 1 do
        syevd('V', uplo, nn, a + i * n * n, lda, pw + i * n, work, L.int1(lw), iwork, L.int1(liw), info, 1, 1)
        if info[0] > 0 then raise(('%s: the algorithm failed to converge%s'):format(fn, L.where(count, i)))
        elseif info[0] < 0 then raise(('%s: LAPACK syevd failed (info %d)'):format(fn, info[0])) end
      end
    end
    local V = mT(buf)
    local fields = { V = V, w = w }
    local live = {}   -- (the nodes of w and V)
    return L.record(w, eigvals_bw, fn, fields, A, nil, live, 'w'), L.record(V, eigvecs_bw, fn, fields, A, nil, live, 'V')
  end

  -- eigvalsh(A[, UPLO]): the eigenvalues alone
  function linalg.eigvalsh(A, opts)
    local w = linalg.eigh(A, opts)
    return w
  end
end
