-- lunet.linalg.norms: vector_norm, matrix_norm, norm (torch 1.13). The
-- p-norms record torch's norm_backward, g x |x|^(p-2) / norm^(p-1), zero
-- where the norm is 0 (sqrt's chain rule would give NaN there); inf, -inf
-- and 0 are amax/amin/counts of |x|; the matrix norms are reductions of
-- |A| or of the singular values.
local L = require 'lunet.linalg.lapack'
local options = require 'lunet.options'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local raise, typename, is_tensor = options.raise, core.typename, T.is_tensor

return function(linalg)
  local INF = math.huge
  local LIVE_A_R = { a = 1, r = 0 }   -- (the saved tensors' sources, for create_graph: lunet.autograd.double)

  local function float_input(fn, x)
    if not is_tensor(x) then raise(('%s: input must be a tensor, got %s'):format(fn, typename(x))) end
    if not x:is_floating_point() then raise(('%s: input must be a floating-point tensor, got %s'):format(fn, x.dtype)) end
  end

  -- dim: nil (all), a 1-based dim or a list of them
  local function dims_of(fn, x, dim)
    if dim == nil then return nil end
    if type(dim) ~= 'number' and (type(dim) ~= 'table' or is_tensor(dim)) then
      raise(('%s: dim must be an integer or a list of them, got %s'):format(fn, typename(dim)))
    end
    local list = type(dim) == 'number' and { dim } or { unpack(dim) }
    local nd, seen = math.max(x:dim(), 1), {}
    for i, d in ipairs(list) do
      if type(d) ~= 'number' or d % 1 ~= 0 then raise(('%s: dim must be an integer, got %s'):format(fn, tostring(d))) end
      local c = d < 0 and nd + d + 1 or d
      if c < 1 or c > nd then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, d, x:dim())) end
      if seen[c] then raise(('%s: dim %d appears twice'):format(fn, d)) end
      seen[c], list[i] = true, c
    end
    return list
  end

  local function reduce(x, m, dims, keepdim)
    if dims == nil then
      local r = x[m](x)
      if keepdim then for _ = 1, x:dim() do r = r:unsqueeze(1) end end
      return r
    end
    return x[m](x, dims, keepdim)
  end

  local function pnorm_bw(nd, g)
    local x, r, p = nd.a, nd.r, nd.p
    if not nd.keepdim and nd.dims then
      table.sort(nd.dims)
      for _, d in ipairs(nd.dims) do g, r = g:unsqueeze(d), r:unsqueeze(d) end
    end
    local zero = r:eq(0)
    if p == 1 then return x:sign() * g end
    local scale = g / r:masked_fill(zero, 1):pow(p - 1)
    scale = scale:masked_fill(zero, 0)
    if p == 2 then return x * scale end
    return x * x:abs():pow(p - 2) * scale
  end

  -- vector_norm(x[, ord = 2[, dim[, keepdim = false]]])
  function linalg.vector_norm(x, ord, dim, keepdim)
    local fn = 'linalg.vector_norm'
    float_input(fn, x)
    if ord == nil then ord = 2 end
    if type(ord) ~= 'number' then raise(('%s: ord must be a number, got %s'):format(fn, typename(ord))) end
    if keepdim ~= nil and type(keepdim) ~= 'boolean' then raise(fn .. ': keepdim must be a boolean') end
    local dims = dims_of(fn, x, dim)
    if x:dim() == 0 then x = x:reshape(1); if dims then dims = { 1 } end end
    if x:numel() == 0 and (ord == INF or ord < 0) then
      raise(('%s: the norm of order %s of an empty tensor is undefined'):format(fn, tostring(ord)))
    end
    local a = x:abs()
    if ord == INF then return reduce(a, 'amax', dims, keepdim) end
    if ord == -INF then return reduce(a, 'amin', dims, keepdim) end
    if ord == 0 then return reduce(x:detach():ne(0):to(x.dtype), 'sum', dims, keepdim) end
    local d = x:detach()
    local s = ord == 2 and reduce(d * d, 'sum', dims, keepdim):sqrt()
      or reduce(d:abs():pow(ord), 'sum', dims, keepdim):pow(1 / ord)
    local keep = {}
    for i, v in ipairs(dims or {}) do keep[i] = v end
    return L.record(s, pnorm_bw, fn, { a = d, r = s, p = ord, dims = dims and keep or nil,
      keepdim = keepdim or dims == nil }, x, nil, LIVE_A_R)
  end

  -- matrix_norm(A[, ord = 'fro'[, dim = {-2, -1}[, keepdim = false]]])
  function linalg.matrix_norm(A, ord, dim, keepdim)
    local fn = 'linalg.matrix_norm'
    float_input(fn, A)
    if ord == nil then ord = 'fro' end
    if A:dim() < 2 then raise(('%s: A must have at least 2 dimensions, got %d'):format(fn, A:dim())) end
    dim = dims_of(fn, A, dim or { -2, -1 })
    if #dim ~= 2 then raise(fn .. ': dim must be a list of 2 dims') end
    if keepdim ~= nil and type(keepdim) ~= 'boolean' then raise(fn .. ': keepdim must be a boolean') end
    local r, c = dim[1], dim[2]
    if ord == 'fro' then return linalg.vector_norm(A, 2, dim, keepdim) end
    local function rekeep(x)   -- (..., r, c) reduced to (...): put r, c back as size 1
      if keepdim then
        local lo, hi = math.min(r, c), math.max(r, c)
        x = x:unsqueeze(lo):unsqueeze(hi)
      end
      return x
    end
    -- the matrices moved last, as the SVD wants them
    local function last2()
      local nd = A:dim()
      local perm = {}
      for i = 1, nd do if i ~= r and i ~= c then perm[#perm + 1] = i end end
      perm[#perm + 1], perm[#perm + 2] = r, c
      return A:permute(perm)
    end
    if ord == 'nuc' or ord == 2 or ord == -2 then
      local S = linalg.svdvals(last2())
      if ord == 'nuc' then return rekeep(S:sum(-1)) end
      return rekeep(ord == 2 and S:amax(-1) or S:amin(-1))
    end
    if ord == 1 or ord == -1 or ord == INF or ord == -INF then
      local sumdim, maxdim = r, c   -- (1: the largest column sum)
      if ord == INF or ord == -INF then sumdim, maxdim = c, r end
      local s = A:abs():sum(sumdim, true)
      s = ord > 0 and s:amax(maxdim, true) or s:amin(maxdim, true)
      if keepdim then return s end
      local lo, hi = math.min(r, c), math.max(r, c)
      return s:squeeze(hi):squeeze(lo)
    end
    raise(('%s: ord must be \'fro\', \'nuc\', 1, -1, 2, -2, inf or -inf, got %s'):format(fn, tostring(ord)))
  end

  -- norm(A[, ord[, dim[, keepdim]]]): matrix_norm for a string ord or two
  -- dims (ord required then to be a matrix one), else vector_norm; with
  -- ord nil and no dim, the 2-norm of the flattened input
  function linalg.norm(A, ord, dim, keepdim)
    local fn = 'linalg.norm'
    float_input(fn, A)
    if type(ord) == 'string' or (type(dim) == 'table' and #dim == 2) or (ord ~= nil and dim == nil and A:dim() == 2) then
      if ord == nil then ord = 'fro' end
      return linalg.matrix_norm(A, ord, dim, keepdim)
    end
    if ord ~= nil and dim == nil and A:dim() ~= 1 then
      raise(('%s: ord %s needs a 1-d or 2-d input or dim, got a %d-d input'):format(fn, tostring(ord), A:dim()))
    end
    return linalg.vector_norm(A, ord, dim, keepdim)
  end
end
