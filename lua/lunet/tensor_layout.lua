-- lunet.tensor_layout: PyTorch 1.13's diagonals, dim moves and small
-- geometric ops, as Tensor methods (and lunet.* functions) with 1-based dims:
--   t:diagonal([offset[, dim1[, dim2]]])  the diagonal of dims dim1, dim2 (default
--                                         1, 2) as the last dim: a view; offset > 0
--                                         above the main diagonal, < 0 below
--   lunet.diag(t[, k])                    1-d -> the square matrix with t on diagonal k;
--                                         2-d -> diagonal k (a copy)
--   t:trace()                             the sum of a 2-d t's main diagonal
--   t:movedim(src, dst)                   dims src (a dim or a list) moved to dst, the
--                                         others keeping their order
--   t:swapaxes(d1, d2), t:swapdims(d1, d2)   = t:transpose(d1, d2)
--   t:repeat_interleave(repeats[, dim])   each element (slice along dim) repeated:
--                                         repeats a number or a 1-d int tensor (one
--                                         count per slice, or one for all); without
--                                         dim, of the flattened t
--   lunet.meshgrid(t1, t2, ...[, {indexing = 'ij'|'xy'}])   (or a list of tensors)
--   lunet.cross(a, b[, dim])              the cross product along dim (default: the
--                                         first of size 3, as torch.cross), broadcasting;
--                                         lunet.linalg.cross(a, b[, dim]) defaults to -1
--   lunet.cdist(x1, x2[, p])              p-norm distances of the rows: {.., P, M} and
--                                         {.., R, M} -> {.., P, R}
-- All are composed of recorded ops (diagonal has its own formula), so they are
-- differentiable and run wherever those ops have kernels.
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local dims = require 'lunet.tensor_dim'
local Tensor, is_tensor = T.Tensor, T.is_tensor
local need, to_cdim = dims.need, dims.to_cdim

local M = {}

local function integer(fn, what, v)
  if type(v) ~= 'number' or v % 1 ~= 0 or v ~= v or math.abs(v) > 2 ^ 53 then
    raise(('%s: %s must be an integer, got %s'):format(fn, what, type(v) == 'number' and tostring(v) or typename(v)))
  end
  return v
end

-- 1-based dim of an n-d tensor -> C dim (0-based)
local function cdim_of(fn, d, n)
  integer(fn, 'dim', d)
  local c = d < 0 and n + d or d - 1
  if c < 0 or c >= n then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, d, n)) end
  return c
end

-- ---- diagonal, diag, trace ------------------------------------------------------------

function Tensor.diagonal(self, offset, dim1, dim2)
  local fn = 'diagonal'
  need(fn, self)
  local nd = self:dim()
  if nd < 2 then raise(('%s: input must have at least 2 dims, got %d'):format(fn, nd)) end
  offset = integer(fn, 'offset', offset or 0)
  local c1, c2 = cdim_of(fn, dim1 or 1, nd), cdim_of(fn, dim2 or 2, nd)
  if c1 == c2 then raise(('%s: dim1 and dim2 must be different dims, both are %d'):format(fn, c1 + 1)) end
  local size, stride = self:size(), self:stride()
  local n1, n2 = size[c1 + 1], size[c2 + 1]
  local len = offset >= 0 and math.min(n1, n2 - offset) or math.min(n1 + offset, n2)
  local off = self:storage_offset()
  if len > 0 then
    off = off + (offset >= 0 and offset * stride[c2 + 1] or -offset * stride[c1 + 1])
  else
    len = 0
  end
  local shape, st = {}, {}
  for i = 1, nd do
    if i ~= c1 + 1 and i ~= c2 + 1 then shape[#shape + 1], st[#st + 1] = size[i], stride[i] end
  end
  shape[#shape + 1], st[#st + 1] = len, stride[c1 + 1] + stride[c2 + 1]
  return self:as_strided(shape, st, off)
end

function M.diag(t, k)
  local fn = 'diag'
  need(fn, t)
  k = integer(fn, 'k', k or 0)
  local nd = t:dim()
  if nd == 2 then return t:diagonal(k, 1, 2):clone() end
  if nd ~= 1 then raise(('%s: input must be 1-d or 2-d, got %d-d'):format(fn, nd)) end
  local n = t:numel()
  local m = n + math.abs(k)
  -- t added at the diagonal's positions of the flattened m x m zeros
  local pos = factory.arange(n, { dtype = 'int64', device = t.device }):mul_(m + 1):add_((k >= 0 and k or -k * m) + 1)
  return factory.zeros({ m * m }, { dtype = t.dtype, device = t.device }):index_add(1, pos, t):reshape({ m, m })
end

function Tensor.trace(self)
  need('trace', self)
  if self:dim() ~= 2 then raise(('trace: input must be 2-d, got %d-d'):format(self:dim())) end
  return self:diagonal():sum()
end

-- ---- movedim, swapaxes ----------------------------------------------------------------

local function movedim(fn, self, src, dst)
  need(fn, self)
  local nd = self:dim()
  local n = math.max(nd, 1)
  if not is_table(src) then src = { src } end
  if not is_table(dst) then dst = { dst } end
  if #src ~= #dst then
    raise(('%s: source and destination must have the same number of dims, got %d and %d'):format(fn, #src, #dst))
  end
  local perm, used, taken = {}, {}, {}
  for i = 1, #src do
    local s, d = cdim_of(fn, src[i], n) + 1, cdim_of(fn, dst[i], n) + 1
    if used[s] then raise(('%s: repeated dim %d in source'):format(fn, s)) end
    if taken[d] then raise(('%s: repeated dim %d in destination'):format(fn, d)) end
    used[s], taken[d], perm[d] = true, true, s
  end
  if nd == 0 then return self:view({}) end
  local rest = 1
  for d = 1, nd do
    if not perm[d] then
      while used[rest] do rest = rest + 1 end
      perm[d], rest = rest, rest + 1
    end
  end
  return self:permute(perm)
end
function Tensor.movedim(self, src, dst) return movedim('movedim', self, src, dst) end
function Tensor.moveaxis(self, src, dst) return movedim('moveaxis', self, src, dst) end

function Tensor.swapaxes(self, d1, d2)
  need('swapaxes', self)
  return self:transpose(d1, d2)
end
function Tensor.swapdims(self, d1, d2)
  need('swapdims', self)
  return self:transpose(d1, d2)
end

-- ---- repeat_interleave ----------------------------------------------------------------

function Tensor.repeat_interleave(self, repeats, dim)
  local fn = 'repeat_interleave'
  need(fn, self)
  local x = self
  if dim == nil then x = self:reshape({ self:numel() }); dim = 1 end
  local d = cdim_of(fn, dim, math.max(x:dim(), 1)) + 1
  if x:dim() == 0 then x = x:reshape({ 1 }) end
  local size = x:size()
  if type(repeats) == 'number' then
    integer(fn, 'repeats', repeats)
    if repeats < 0 then raise(('%s: repeats must be non-negative, got %d'):format(fn, repeats)) end
    local ex, out = {}, {}
    for i = 1, #size do ex[#ex + 1] = size[i]; if i == d then ex[#ex + 1] = repeats end end
    for i = 1, #size do out[i] = i == d and size[i] * repeats or size[i] end
    return x:unsqueeze(d + 1):expand(ex):reshape(out)
  end
  if not is_tensor(repeats) then
    raise(('%s: repeats must be a number or an integer tensor, got %s'):format(fn, typename(repeats)))
  end
  if repeats.dtype ~= 'int64' and repeats.dtype ~= 'int32' then
    raise(('%s: repeats must be an int64 (or int32) tensor, got %s'):format(fn, repeats.dtype))
  end
  local n = size[d]
  if repeats:dim() > 1 then raise(('%s: repeats must be 0-d or 1-d, got %d-d'):format(fn, repeats:dim())) end
  local r = repeats:detach():long():reshape({ repeats:numel() })
  if r:numel() == 1 and n ~= 1 then r = r:expand({ n }) end
  if r:numel() ~= n then
    raise(('%s: repeats must have %d elements (the size of dim %d), got %d'):format(fn, n, d, r:numel()))
  end
  local total, low = 0, 0
  if n > 0 then
    local s = Tensor.stack({ r:sum(), r:min() }):totable()   -- (one read-back)
    total, low = s[1], s[2]
  end
  if low < 0 then raise(('%s: repeats must be non-negative, got %d'):format(fn, low)) end
  -- slice i's copies start at the exclusive running sum of the counts: a 1
  -- there (0-based) and a running count give each output position its slice
  local starts = r:cumsum(1):sub(r)
  local marks = factory.zeros({ total + 1 }, { dtype = 'int64', device = self.device })
  marks:scatter_add_(1, starts + 1, factory.ones({ n }, { dtype = 'int64', device = self.device }))
  return x:index_select(d, marks:cumsum(1):narrow(1, 1, total))
end

-- ---- meshgrid -------------------------------------------------------------------------

local MESH_OPTS = { indexing = 'string' }

function M.meshgrid(...)
  local fn = 'meshgrid'
  local list, n = { ... }, select('#', ...)
  local opts
  if n > 0 and is_table(list[n]) and not is_tensor(list[n]) and (n > 1 or is_tensor(list[n][1]) == false) then
    opts, n = list[n], n - 1
  end
  if n == 1 and is_table(list[1]) and not is_tensor(list[1]) then list, n = list[1], #list[1] end
  local indexing = 'ij'
  if opts then indexing = options.check(fn, opts, MESH_OPTS).indexing or 'ij' end
  if indexing ~= 'ij' and indexing ~= 'xy' then
    raise(("%s: indexing must be 'ij' or 'xy', got '%s'"):format(fn, indexing))
  end
  if n == 0 then raise(fn .. ': expected at least one tensor') end
  local shape = {}
  for i = 1, n do
    local t = list[i]
    if not is_tensor(t) then raise(('%s: argument %d must be a tensor, got %s'):format(fn, i, typename(t))) end
    if t:dim() > 1 then raise(('%s: tensors must be 0-d or 1-d, argument %d is %d-d'):format(fn, i, t:dim())) end
    if t.dtype ~= list[1].dtype or t.device ~= list[1].device then
      raise(('%s: tensors must have the same dtype and device, argument %d is %s on %s, argument 1 %s on %s')
        :format(fn, i, t.dtype, t.device, list[1].dtype, list[1].device))
    end
    shape[i] = t:numel()
  end
  local swap = indexing == 'xy' and n >= 2
  if swap then shape[1], shape[2] = shape[2], shape[1] end
  local out = {}
  for i = 1, n do
    local at = i
    if swap and i <= 2 then at = 3 - i end
    local v = {}
    for j = 1, n do v[j] = j == at and shape[j] or 1 end
    out[i] = list[i]:reshape(v):expand(shape)
  end
  return out
end

-- ---- cross, cdist ---------------------------------------------------------------------

local function bshape(fn, a, b)
  local sa, sb = a:size(), b:size()
  local n, out = math.max(#sa, #sb), {}
  for i = 1, n do
    local x, y = sa[i - n + #sa] or 1, sb[i - n + #sb] or 1
    if x ~= y and x ~= 1 and y ~= 1 then
      raise(('%s: shapes {%s} and {%s} cannot broadcast'):format(fn, table.concat(sa, ','), table.concat(sb, ',')))
    end
    out[i] = x == 1 and y or x
  end
  return out
end

local function cross(fn, a, b, dim, default_last)
  need(fn, a)
  if not is_tensor(b) then raise(('%s: other must be a tensor, got %s'):format(fn, typename(b))) end
  local shape = bshape(fn, a, b)
  local d
  if dim == nil and not default_last then
    for i = 1, #shape do if shape[i] == 3 then d = i; break end end
    if not d then raise(('%s: no dim of size 3 in the inputs\' shape {%s}'):format(fn, table.concat(shape, ','))) end
  else
    d = cdim_of(fn, dim or -1, #shape) + 1
  end
  if shape[d] ~= 3 then raise(('%s: dim %d must have size 3, got %d'):format(fn, d, shape[d])) end
  a, b = a:expand(shape), b:expand(shape)
  local a1, a2, a3 = a:narrow(d, 1, 1), a:narrow(d, 2, 1), a:narrow(d, 3, 1)
  local b1, b2, b3 = b:narrow(d, 1, 1), b:narrow(d, 2, 1), b:narrow(d, 3, 1)
  return Tensor.cat({ a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1 }, d)
end
function Tensor.cross(a, b, dim) return cross('cross', a, b, dim, false) end
-- (lunet.linalg.cross: the last dim by default)
function M._linalg_cross(a, b, dim) return cross('linalg.cross', a, b, dim, true) end

-- the p-th root of s where s > 0, 0 (and a 0 gradient) where s is 0
local function root(s, p)
  local pos = s:gt(0)
  local safe = s:where(pos, 1)
  local r = p == 2 and safe:sqrt() or safe:pow(1 / p)
  return r:where(pos, 0)
end

function M.cdist(x1, x2, p)
  local fn = 'cdist'
  need(fn, x1)
  if not is_tensor(x2) then raise(('%s: x2 must be a tensor, got %s'):format(fn, typename(x2))) end
  p = p == nil and 2 or p
  if type(p) ~= 'number' or p ~= p or p < 0 then
    raise(('%s: p must be a non-negative number, got %s'):format(fn, type(p) == 'number' and tostring(p) or typename(p)))
  end
  if x1:dim() < 2 or x2:dim() < 2 then
    raise(('%s: x1 and x2 must have at least 2 dims, got %d-d and %d-d'):format(fn, x1:dim(), x2:dim()))
  end
  local m1, m2 = x1:size(-1), x2:size(-1)
  if m1 ~= m2 then raise(('%s: x1 and x2 must have the same number of columns, got %d and %d'):format(fn, m1, m2)) end
  if not x1:is_floating_point() or x1.dtype ~= x2.dtype then
    raise(('%s: x1 and x2 must be float tensors of one dtype, got %s and %s'):format(fn, x1.dtype, x2.dtype))
  end
  local P, R = x1:size(-2), x2:size(-2)
  local a, b = x1:unsqueeze(-2), x2:unsqueeze(-3)   -- {.., P, 1, M}, {.., 1, R, M}
  if p == 2 and (P > 25 or R > 25) then
    -- (PyTorch's default for large inputs: |a|^2 + |b|^2 - 2 a.b through a matmul)
    local n1, n2 = (x1 * x1):sum(-1, true), (x2 * x2):sum(-1, true)
    local d2 = n1 + n2:transpose(-1, -2) - x1:matmul(x2:transpose(-1, -2)) * 2
    return root(d2:clamp_min(0), 2)
  end
  local diff = (a - b):abs()
  if p == 0 then return diff:ne(0):to(x1.dtype):sum(-1) end
  if p == math.huge then return diff:amax(-1) end
  if p == 1 then return diff:sum(-1) end
  return root(p == 2 and (diff * diff):sum(-1) or diff:pow(p):sum(-1), p)
end

return M
