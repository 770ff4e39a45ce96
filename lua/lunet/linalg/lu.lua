-- lunet.linalg.lu: what LAPACK's LU (getrf, getrs) gives: det, slogdet,
-- inv, solve, with torch's gradients:
--   det      gA = g det A^-T (the cofactors through the SVD when A is singular)
--   slogdet  gA = g A^-T (logabsdet; sign has none)
--   inv      gA = -X^T g X^T
--   solve    gB = A^-T g, gA = -gB X^T (summed over broadcast batch dims)
local ffi = require 'ffi'
local L = require 'lunet.linalg.lapack'
local raise = require('lunet.options').raise

return function(linalg)
  -- LU of each matrix of the col-major copy lu (count n x n matrices), in
  -- place; pivots (count * n ints); on_zero(i, k) for a zero U[k][k]
  local function factor(fn, lu, count, n, on_zero)
    local getrf = L.routine(fn, lu.dtype, 'getrf')
    local a = L.ptr(lu)
    local piv = ffi.new('int[?]', math.max(1, count * n))
    local nn, lda, info = L.int1(n), L.int1(math.max(1, n)), L.int1()
    for i = 0, count - 1 do
      getrf(nn, nn, a + i * n * n, lda, piv + i * n, info)
      if info[0] < 0 then raise(('%s: LAPACK getrf failed (info %d)'):format(fn, info[0])) end
      if info[0] > 0 and on_zero then on_zero(i, info[0]) end
    end
    return a, piv
  end

  -- det and log|det| (Lua numbers) of each LU'd matrix i
  local function logdet_of(a, piv, i, n)
    local sign, logabs = 1, 0
    local base = a + i * n * n
    for k = 0, n - 1 do
      local d = tonumber(base[k * n + k])
      if piv[i * n + k] ~= k + 1 then sign = -sign end
      if d < 0 then sign, d = -sign, -d end
      if d == 0 then return 0, -math.huge end
      logabs = logabs + math.log(d)
    end
    return sign, logabs
  end

  local function dets(fn, A, want_log)
    L.check(fn, A, 'A', true)
    local n = A:size(-1)
    local bshape, count = L.batch(A)
    local lu = L.colmajor(A)
    local a, piv = factor(fn, lu, count, n)
    local s, la = L.empty(bshape, A.dtype), L.empty(bshape, A.dtype)
    local ps, pl = L.ptr(s), L.ptr(la)
    for i = 0, count - 1 do
      local sg, lg = logdet_of(a, piv, i, n)
      if want_log then ps[i], pl[i] = sg, lg
      else
        -- (the product of the diagonal itself: exp(log) would round it)
        local d = sg == 0 and 0 or 1
        if sg ~= 0 then
          local base = a + i * n * n
          for k = 0, n - 1 do d = d * tonumber(base[k * n + k]) end
          d = math.abs(d) * sg
        end
        ps[i] = d
      end
    end
    return s, la
  end

  local function det_bw(nd, g)
    local A, d = nd.A, nd.r
    local gd = (g * d):unsqueeze(-1):unsqueeze(-1)
    if d:eq(0):any():item() then
      -- cofactors: d det / dA = det(U) det(Vh) U diag(prod_{j ~= i} S_j) Vh
      local U, S, Vh = linalg.svd(A, { full_matrices = false })
      local n = S:size(-1)
      local eye = L.eye(n, S.dtype)
      -- Sc[..., i, j]: S_j off the diagonal, 1 on it (row i's product leaves S_i out)
      local Sc = S:unsqueeze(-2) * (1 - eye) + eye
      local cof = Sc:prod(-1)
      local sg = linalg.det(U) * linalg.det(Vh)
      local M = (U * cof:unsqueeze(-2)):matmul(Vh)
      return M * (g * sg):unsqueeze(-1):unsqueeze(-1)
    end
    return gd * L.mT(linalg.inv(A))
  end

  -- (the saved tensors' sources, for create_graph: lunet.autograd.double)
  local LIVE_A_R, LIVE_A, LIVE_R = { A = 1, r = 0 }, { A = 1 }, { r = 0 }

  function linalg.det(A)
    local d = dets('linalg.det', A, false)
    return L.record(d, det_bw, 'linalg.det', { A = A:detach(), r = d }, A, nil, LIVE_A_R)
  end

  local function slogdet_bw(nd, g)
    return g:unsqueeze(-1):unsqueeze(-1) * L.mT(linalg.inv(nd.A))
  end

  -- slogdet(A) -> sign, logabsdet (torch's named tuple, in its order)
  function linalg.slogdet(A)
    local s, la = dets('linalg.slogdet', A, true)
    return s, L.record(la, slogdet_bw, 'linalg.slogdet', { A = A:detach() }, A, nil, LIVE_A)
  end

  -- solve the col-major batch b (count x (n, k)) in place with the LU of a
  local function lu_solve(fn, A, Bc, count, n, k)
    local lu = L.colmajor(A)
    local a, piv = factor(fn, lu, count, n, function(i, j)
      raise(('%s: the input is singular (U\'s diagonal element %d is zero)%s'):format(fn, j, L.where(count, i)))
    end)
    local getrs = L.routine(fn, A.dtype, 'getrs')
    local b = L.ptr(Bc)
    local nn, kk, lda, info = L.int1(n), L.int1(k), L.int1(math.max(1, n)), L.int1()
    for i = 0, count - 1 do
      getrs('N', nn, kk, a + i * n * n, lda, piv + i * n, b + i * n * k, lda, info, 1)
      if info[0] ~= 0 then raise(('%s: LAPACK getrs failed (info %d)'):format(fn, info[0])) end
    end
    return Bc
  end

  local function inv_bw(nd, g)
    local Xt = L.mT(nd.r)
    return -(Xt:matmul(g):matmul(Xt))
  end

  function linalg.inv(A)
    local fn = 'linalg.inv'
    L.check(fn, A, 'A', true)
    local n = A:size(-1)
    local _, count = L.batch(A)
    -- (I is its own col-major copy; the solution comes back transposed)
    local I = L.eye(n, A.dtype):expand(A:size()):clone()
    local X = L.mT(lu_solve(fn, A, I, count, n, n))
    return L.record(X, inv_bw, fn, { r = X }, A, nil, LIVE_R)
  end

  -- the batch shape both broadcast to (tables, without the matrix dims)
  local function broadcast(fn, sa, sb)
    local nd, out = math.max(#sa, #sb), {}
    for i = 1, nd do
      local x, y = sa[#sa - nd + i] or 1, sb[#sb - nd + i] or 1
      if x ~= y and x ~= 1 and y ~= 1 then
        raise(('%s: the batch dims of A {%s} and B {%s} do not broadcast'):format(fn, table.concat(sa, ','),
          table.concat(sb, ',')))
      end
      out[i] = x == 1 and y or x
    end
    return out
  end

  -- (A saved as given, expanded here: a live A then sums its gradient back)
  local function solve_bw(nd, g)
    local A, X, vec = nd.A:expand(nd.shA), nd.r, nd.vec
    if vec then g, X = g:unsqueeze(-1), X:unsqueeze(-1) end
    local gB = linalg.solve(L.mT(A), g)
    local gA, gb
    if nd[1] then gA = L.sum_to(-(gB:matmul(L.mT(X))), nd.sa) end
    if nd[2] then gb = L.sum_to(vec and gB:squeeze(-1) or gB, nd.sb) end
    return gA, gb
  end

  local SOLVE_OPTS = { left = 'boolean' }
  -- solve(A, B[, {left = true}]): X with A X = B (X A = B with left = false);
  -- B a batch of vectors when it is 1-d or A's shape less the last dim
  function linalg.solve(A, B, opts)
    local fn = 'linalg.solve'
    L.check(fn, A, 'A', true)
    L.check(fn, B, 'B', false, 1)
    opts = require('lunet.options').check(fn, opts, SOLVE_OPTS)
    if opts and opts.left == false then
      if B:dim() < 2 then raise(fn .. ': B must be a matrix with left = false') end
      return L.mT(linalg.solve(L.mT(A), L.mT(B)))
    end
    if A.dtype ~= B.dtype then raise(('%s: A and B must have the same dtype, got %s and %s'):format(fn, A.dtype, B.dtype)) end
    local n, sa, sb = A:size(-1), A:size(), B:size()
    local vec = B:dim() == 1
    if B:dim() == A:dim() - 1 then
      vec = true
      for i = 1, #sb do if sb[i] ~= sa[i] then vec = false end end
    end
    local B2 = vec and B:unsqueeze(-1) or B
    if B2:size(-2) ~= n then
      raise(('%s: A is %d by %d but B has %d rows'):format(fn, n, n, B2:size(-2)))
    end
    local k = B2:size(-1)
    local ba, bb = L.batch(A), L.batch(B2)
    local bs = broadcast(fn, ba, bb)
    local shA, shB = {}, {}
    for i, v in ipairs(bs) do shA[i], shB[i] = v, v end
    shA[#bs + 1], shA[#bs + 2], shB[#bs + 1], shB[#bs + 2] = n, n, n, k
    local count = 1
    for _, v in ipairs(bs) do count = count * v end
    local Ae = A:detach():expand(shA)
    local Bc = L.colmajor(B2:expand(shB))
    local X = L.mT(lu_solve(fn, Ae, Bc, count, n, k))
    local out = vec and X:squeeze(-1) or X
    return L.record(out, solve_bw, fn, { A = A:detach(), shA = shA, r = out, vec = vec, sa = A:size(), sb = B:size() },
      A, B, LIVE_A_R)
  end
end
