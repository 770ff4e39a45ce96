-- lunet.linalg.lu_factor: the LU factorization with partial pivoting
-- (LAPACK getrf, getrs) of (..., m, n) float32/float64 CPU matrices, as
-- torch 1.13's, with its gradients:
--   lu_factor(A[, {pivot = true}])     LU, pivots (int32, (..., min(m, n)),
--                                      1-based row swaps as LAPACK's and torch's);
--                                      a singular A is an error
--   lu_factor_ex(A[, {pivot = true}])  LU, pivots, info (int32, batch shape:
--                                      k > 0 where U[k][k] is zero; no error)
--   lu(A[, {pivot = true}])            P, L, U with A = P L U
--   lu_unpack(LU, pivots)              P, L, U
--   lu_solve(LU, pivots, B[, {left = true, adjoint = false}])
-- Gradients (A = P L U; P constant): with gL, gU the parts of gLU below and
-- on/above the diagonal, gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T for
-- square A, the extra columns (rows) of a wide (tall) A entering through
-- U2 = L^-1 P^T A2 (L2 = A2' U^-1); lu_solve: gB by the adjoint solve, gLU
-- from gA = -gB X^T (-X gB^T with adjoint). pivot = false is not
-- implemented on the CPU in torch either.
local ffi = require 'ffi'
local L = require 'lunet.linalg.lapack'
local options = require 'lunet.options'
local factory = require 'lunet.factory'
local raise, mT = options.raise, L.mT
local function lunet_cat(list, d) return require('lunet.tensor').Tensor.cat(list, d) end

return function(linalg)
  local PIVOT = { pivot = 'boolean' }

  local function solve(A, B, left) return linalg.solve(A, B, left == false and { left = false } or nil) end

  -- P, L, U (no gradient) of a factorization
  local function unpack_raw(fn, LU, piv)
    local m, n = LU:size(-2), LU:size(-1)
    local k = math.min(m, n)
    local Lm = LU:narrow(-1, 1, k):tril(-1) + factory.eye(m, k, { dtype = LU.dtype })
    local U = LU:narrow(-2, 1, k):triu()
    local bshape, count = L.batch(LU)
    local ps = { unpack(bshape) }
    ps[#ps + 1], ps[#ps + 2] = m, m
    local P = factory.zeros(ps, { dtype = LU.dtype })
    if count > 0 and m > 0 then
      local pv = piv:contiguous()
      local pp, out = ffi.cast('int32_t*', pv:data_ptr()), L.ptr(P)
      local perm = {}
      for b = 0, count - 1 do
        for i = 1, m do perm[i] = i end
        for i = 1, k do
          local j = pp[b * k + i - 1]
          if j < i or j > m then raise(('%s: pivots must be in %d..%d at position %d, got %d'):format(fn, i, m, i, j)) end
          perm[i], perm[j] = perm[j], perm[i]
        end
        -- row perm[i] of A is row i of L U: P[perm[i]][i] = 1
        for i = 1, m do out[b * m * m + (perm[i] - 1) * m + i - 1] = 1 end
      end
    end
    return P, Lm, U
  end

  -- the gradient of A from gL (m, k) and gU (k, n)
  local function lu_grad(P, Lm, U, gL, gU)
    local m, n = Lm:size(-2), U:size(-1)
    if m == n then
      local M = mT(Lm):matmul(gL):tril(-1) + gU:matmul(mT(U)):triu()
      return P:matmul(solve(mT(U), solve(mT(Lm), M), false))
    elseif m < n then
      local U1, U2, gU1, gU2 = U:narrow(-1, 1, m), U:narrow(-1, m + 1, n - m), gU:narrow(-1, 1, m), gU:narrow(-1, m + 1, n - m)
      local M = (mT(Lm):matmul(gL) - gU2:matmul(mT(U2))):tril(-1) + gU1:matmul(mT(U1)):triu()
      local g1 = solve(mT(U1), solve(mT(Lm), M), false)
      return P:matmul(lunet_cat({ g1, solve(mT(Lm), gU2) }, -1))
    end
    local L1, L2, gL1, gL2 = Lm:narrow(-2, 1, n), Lm:narrow(-2, n + 1, m - n), gL:narrow(-2, 1, n), gL:narrow(-2, n + 1, m - n)
    local M = mT(L1):matmul(gL1):tril(-1) + (gU:matmul(mT(U)) - mT(L2):matmul(gL2)):triu()
    local g1 = solve(mT(U), solve(mT(L1), M), false)
    return P:matmul(lunet_cat({ g1, solve(mT(U), gL2, false) }, -2))
  end

  local function factor_bw(nd, g)
    local P, Lm, U = unpack_raw('linalg.lu_factor', nd.LU, nd.piv)
    local k = math.min(Lm:size(-2), U:size(-1))
    return lu_grad(P, Lm, U, g:narrow(-1, 1, k):tril(-1), g:narrow(-2, 1, k):triu())
  end

  local function factor(fn, A, opts)
    L.check(fn, A, 'A')
    opts = options.check(fn, opts, PIVOT)
    if opts and opts.pivot == false then raise(fn .. ': LU without pivoting is not implemented on the CPU') end
    local m, n = A:size(-2), A:size(-1)
    local k = math.min(m, n)
    local bshape, count = L.batch(A)
    local ps = { unpack(bshape) }
    ps[#ps + 1] = k
    local piv, info = factory.zeros(ps, { dtype = 'int32' }), factory.zeros(bshape, { dtype = 'int32' })
    local lu = L.colmajor(A)   -- (LAPACK's column-major copy: LU comes back as its transposed view)
    if count > 0 and k > 0 then
      local getrf = L.routine(fn, A.dtype, 'getrf')
      local a, pp = L.ptr(lu), ffi.cast('int*', piv:data_ptr())
      local ip = ffi.cast('int*', info:data_ptr())
      local mm, nn, lda, inf = L.int1(m), L.int1(n), L.int1(m), L.int1()
      for i = 0, count - 1 do
        getrf(mm, nn, a + i * m * n, lda, pp + i * k, inf)
        if inf[0] < 0 then raise(('%s: LAPACK getrf failed (info %d)'):format(fn, inf[0])) end
        ip[i] = inf[0]
      end
    end
    local LU = mT(lu)
    return L.record(LU, factor_bw, fn, { LU = LU:detach(), piv = piv }, A), piv, info
  end

  function linalg.lu_factor_ex(A, opts) return factor('linalg.lu_factor_ex', A, opts) end

  function linalg.lu_factor(A, opts)
    local fn = 'linalg.lu_factor'
    local LU, piv, info = factor(fn, A, opts)
    local _, count = L.batch(A)
    local ip = count > 0 and ffi.cast('int*', info:data_ptr())
    for b = 0, count - 1 do
      local j = ip[b]
      if j > 0 then
        raise(('%s: U[%d,%d] is zero (the matrix is singular)%s; linalg.lu_factor_ex and linalg.lu factor it anyway')
          :format(fn, j, j, L.where(count, b)))
      end
    end
    return LU, piv
  end

  function linalg.lu(A, opts)
    local LU, piv = factor('linalg.lu', A, opts)
    return linalg.lu_unpack(LU, piv)
  end

  -- P, L, U of lu_factor's LU and pivots (L and U differentiable w.r.t. LU)
  function linalg.lu_unpack(LU, pivots)
    local fn = 'lu_unpack'
    L.check(fn, LU, 'LU')
    if not require('lunet.tensor').is_tensor(pivots) or pivots.dtype ~= 'int32' then
      raise(('%s: pivots must be an int32 tensor, got %s'):format(fn, require('lunet.core').typename(pivots) == 'tensor'
        and pivots.dtype or require('lunet.core').typename(pivots)))
    end
    local want = LU:size()
    want[#want], want[#want - 1] = nil, math.min(LU:size(-2), LU:size(-1))
    if table.concat(pivots:size(), ',') ~= table.concat(want, ',') then
      raise(('%s: pivots must have shape {%s} for LU of shape {%s}, got {%s}'):format(fn, table.concat(want, ','),
        table.concat(LU:size(), ','), table.concat(pivots:size(), ',')))
    end
    return unpack_raw(fn, LU, pivots)
  end

  local SOLVE = { left = 'boolean', adjoint = 'boolean' }

  -- X with A X = B (A^T X = B with adjoint) for A = P L U, batches broadcast
  local function solve_left(fn, LU, piv, B, adjoint)
    local n = LU:size(-1)
    if B:size(-2) ~= n then
      raise(('%s: Incompatible shapes of A and B for the equation %s (%dx%d and %dx%d)'):format(fn,
        adjoint and 'A^H X = B' or 'AX = B', n, n, B:size(-2), B:size(-1)))
    end
    local k = B:size(-1)
    local ba, bb = L.batch(LU), L.batch(B)
    local nd, bs = math.max(#ba, #bb), {}
    for i = 1, nd do
      local x, y = ba[#ba - nd + i] or 1, bb[#bb - nd + i] or 1
      if x ~= y and x ~= 1 and y ~= 1 then
        raise(('%s: the batch dims of LU {%s} and B {%s} do not broadcast'):format(fn, table.concat(ba, ','), table.concat(bb, ',')))
      end
      bs[i] = x == 1 and y or x
    end
    local count = 1
    for _, v in ipairs(bs) do count = count * v end
    local shA, shP, shB = { unpack(bs) }, { unpack(bs) }, { unpack(bs) }
    shA[nd + 1], shA[nd + 2], shP[nd + 1], shB[nd + 1], shB[nd + 2] = n, n, n, n, k
    local lu = L.colmajor(LU:expand(shA))
    local pv = piv:expand(shP):contiguous()
    local Bc = L.colmajor(B:expand(shB))
    if count > 0 and n > 0 and k > 0 then
      local getrs = L.routine(fn, LU.dtype, 'getrs')
      local a, b, pp = L.ptr(lu), L.ptr(Bc), ffi.cast('int*', pv:data_ptr())
      local nn, kk, lda, info = L.int1(n), L.int1(k), L.int1(n), L.int1()
      for i = 0, count - 1 do
        getrs(adjoint and 'T' or 'N', nn, kk, a + i * n * n, lda, pp + i * n, b + i * n * k, lda, info, 1)
        if info[0] ~= 0 then raise(('%s: LAPACK getrs failed (info %d)'):format(fn, info[0])) end
      end
    end
    return mT(Bc)
  end

  local function solve_bw(nd, g)
    local LU, piv, X = nd.LU, nd.piv, nd.X
    local gB = solve_left('linalg.lu_solve', LU, piv, g, not nd.adjoint)
    local gLU, gb
    if nd[1] then
      local gA = nd.adjoint and -(X:matmul(mT(gB))) or -(gB:matmul(mT(X)))
      local P, Lm, U = unpack_raw('linalg.lu_solve', LU, piv)
      local PtgA = mT(P):matmul(gA)
      gLU = L.sum_to(PtgA:matmul(mT(U)):tril(-1) + mT(Lm):matmul(PtgA):triu(), nd.sa)
    end
    if nd[2] then gb = L.sum_to(gB, nd.sb) end
    return gLU, gb
  end

  function linalg.lu_solve(LU, pivots, B, opts)
    local fn = 'linalg.lu_solve'
    L.check(fn, LU, 'LU', true)
    L.check(fn, B, 'B')
    opts = options.check(fn, opts, SOLVE) or {}
    if LU.dtype ~= B.dtype then raise(('%s: LU and B must have the same dtype, got %s and %s'):format(fn, LU.dtype, B.dtype)) end
    if not require('lunet.tensor').is_tensor(pivots) or pivots.dtype ~= 'int32' then
      raise(fn .. ': pivots must be an int32 tensor (as lu_factor gives)')
    end
    local want = LU:size()
    want[#want] = nil
    if table.concat(pivots:size(), ',') ~= table.concat(want, ',') then
      raise(('%s: pivots must have shape {%s} for LU of shape {%s}, got {%s}'):format(fn, table.concat(want, ','),
        table.concat(LU:size(), ','), table.concat(pivots:size(), ',')))
    end
    local adjoint = opts.adjoint == true
    if opts.left == false then
      -- X A = B is A^T X^T = B^T
      local n = LU:size(-1)
      if B:size(-1) ~= n then
        raise(('%s: Incompatible shapes of A and B for the equation XA = B (%dx%d and %dx%d)'):format(fn, n, n,
          B:size(-2), B:size(-1)))
      end
      return mT(linalg.lu_solve(LU, pivots, mT(B), { adjoint = not adjoint }))
    end
    local X = solve_left(fn, LU:detach(), pivots, B:detach(), adjoint)
    return L.record(X, solve_bw, fn, { LU = LU:detach(), piv = pivots, X = X, adjoint = adjoint, sa = LU:size(),
      sb = B:size() }, LU, B)
  end
end
