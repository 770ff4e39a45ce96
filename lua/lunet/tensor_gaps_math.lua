-- lunet.tensor_gaps_math: torch 1.13's remaining math methods (also lunet.*),
-- composed of existing ops, so the differentiable ones differentiate through
-- them. Dims are 1-based; slice bounds are 1-based and inclusive (Torch7's {first, last}):
--   kron(u)                       Kronecker product (dims aligned from the right)
--   cov([{correction = 1, fweights =, aweights =}]), corrcoef()   rows: variables
--   diag_embed([offset[, dim1 = -2[, dim2 = -1]]]), diagflat([offset])
--   diagonal_scatter(src[, offset[, dim1 = 1[, dim2 = 2]]]), select_scatter(src, dim, index),
--   slice_scatter(src[, dim = 1[, first = 1[, last = size[, step = 1]]]]),
--   as_strided_scatter(src, size, stride[, offset])   a copy of t with src written there
--   frexp() -> mantissa, exponent (int32); ldexp(e); nextafter(u)
--   i0(), mvlgamma(p) (+ in place), histogram(bins[, {range =, weight =, density =}])
--   -> hist, bin_edges; mode([dim = -1[, keepdim]]) -> values, 1-based indices
-- (scatter_reduce and index_reduce: lunet.tensor_scatter_reduce, a C kernel.)
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local Tensor, is_tensor = T.Tensor, T.is_tensor
local raise = options.raise

local function L() return require 'lunet' end

local named = options.named   -- (an error inside names the method called)
local function def(name, f) Tensor[name] = named(name, f) end
local need = options.need_tensor
local function int(fn, v, what, lo)
  if type(v) ~= 'number' or v % 1 ~= 0 or (lo and v < lo) then
    raise(('%s: %s must be an integer%s, got %s'):format(fn, what, lo and (' >= ' .. lo) or '', tostring(v)))
  end
  return v
end
local function dim_of(fn, t, d)
  int(fn, d, 'dim')
  local n = math.max(t:dim(), 1)
  local c = d < 0 and n + d + 1 or d
  if c < 1 or c > n then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, d, t:dim())) end
  return c
end
local function like(t, dtype) return { dtype = dtype or t.dtype, device = t.device } end

-- ---- products and statistics ----------------------------------------------------------------------
def('kron', function(self, other)
  need('kron', other, 'other')
  local n = math.max(self:dim(), other:dim())
  local sa, sb = self:size(), other:size()
  local va, vb, out = {}, {}, {}
  for i = 1, n do
    local a, b = sa[i - (n - #sa)] or 1, sb[i - (n - #sb)] or 1
    va[2 * i - 1], va[2 * i], vb[2 * i - 1], vb[2 * i], out[i] = a, 1, 1, b, a * b
  end
  return (self:reshape(va) * other:reshape(vb)):reshape(out)
end)

local COV_OPTS = { correction = 'number', fweights = 'tensor', aweights = 'tensor' }
def('cov', function(self, opts)
  local fn = 'cov'
  opts = options.check(fn, opts, COV_OPTS) or {}
  if self:dim() > 2 then raise(('cov: input must have at most 2 dims, got %d'):format(self:dim())) end
  local x = self:dim() < 2 and self:reshape(1, -1) or self
  if not x:is_floating_point() then x = x:double() end
  local N, corr = x:size(2), int(fn, opts.correction or 1, 'correction')
  local w, fw, aw = nil, opts.fweights, opts.aweights
  for _, v in ipairs({ { fw, 'fweights' }, { aw, 'aweights' } }) do
    if v[1] then
      if v[1]:dim() > 1 or v[1]:numel() ~= N then raise(('cov: %s must be 1-d with %d elements, got %s'):format(v[2], N, tostring(v[1]:size()))) end
      if v[1]:lt(0):any():item() then raise(('cov: %s must be non-negative'):format(v[2])) end
    end
  end
  if fw and fw:is_floating_point() then raise('cov: fweights must be integers, got ' .. fw.dtype) end
  if fw then w = fw:to(x.dtype) end
  if aw then w = w and w * aw:to(x.dtype) or aw:to(x.dtype) end
  local wsum = w and w:sum() or N
  local avg = w and (x * w):sum(2, true) / wsum or x:mean(2, true)
  local norm
  if not w then norm = N - corr
  elseif corr == 0 then norm = wsum
  elseif not aw then norm = wsum - corr
  else norm = wsum - (w * aw:to(x.dtype)):sum() / wsum * corr end
  if is_tensor(norm) then norm = norm:clamp(0, nil) else norm = math.max(norm, 0) end
  local xm = x - avg
  local c = (w and xm * w or xm):matmul(xm.mT) / norm
  return self:dim() < 2 and c:reshape({}) or c
end)
def('corrcoef', function(self)
  local c = self:cov()
  if c:dim() == 0 then return c / c end
  local sd = c:diagonal():sqrt()
  return (c / sd:unsqueeze(2) / sd:unsqueeze(1)):clamp(-1, 1)
end)

-- ---- diagonals and scatters into copies -------------------------------------------------------------
-- (the diagonal writes below are index_add / index_copy into the flattened
-- (dim1, dim2) plane: recorded for self and src alike, on every backend)
-- 1-based flat positions of the offset diagonal of an r x c plane (its length)
local function diag_pos(t, r, c, offset)
  local len = math.max(0, offset >= 0 and math.min(r, c - offset) or math.min(r + offset, c))
  local i = L().arange(0, len, like(t, 'int64'))
  local pos = offset >= 0 and i * (c + 1) + offset + 1 or (i - offset) * c + i + 1
  return pos, len
end
-- t with dims d1, d2 moved last and flattened into one: the plane view and its shape
local function plane(t, d1, d2)
  local m = t:movedim({ d1, d2 }, { -2, -1 })
  local s = m:size()
  local flat = {}
  for i = 1, #s - 2 do flat[i] = s[i] end
  flat[#flat + 1] = s[#s - 1] * s[#s]
  return m:reshape(flat), s
end
def('diag_embed', function(self, offset, d1, d2)
  offset = int('diag_embed', offset or 0, 'offset')
  local nd = self:dim() + 1
  local function pos(d) d = int('diag_embed', d, 'dim'); return d < 0 and nd + d + 1 or d end
  d1, d2 = pos(d1 or -2), pos(d2 or -1)
  if d1 < 1 or d1 > nd or d2 < 1 or d2 > nd then raise(('diag_embed: dims must lie in [-%d, %d]'):format(nd, nd)) end
  if d1 == d2 then raise('diag_embed: dim1 and dim2 cannot be the same dim') end
  local x = self:dim() == 0 and self:reshape(1) or self
  local n = x:size(-1) + math.abs(offset)
  local shape = x:size()
  shape[#shape] = n * n
  local idx = diag_pos(x, n, n, offset)
  local flat = L().zeros(shape, like(x)):index_add(-1, idx, x)
  shape[#shape], shape[#shape + 1] = n, n
  return flat:reshape(shape):movedim({ nd - 1, nd }, { d1, d2 })
end)
def('diagflat', function(self, offset) return self:reshape(-1):diag_embed(offset or 0) end)
local function check_src(fn, view, src)
  need(fn, src, 'src')
  if not view:is_same_size(src) then
    raise(('%s: src must have the shape %s of the part it replaces, got %s'):format(fn, tostring(view:size()), tostring(src:size())))
  end
end
def('diagonal_scatter', function(self, src, offset, d1, d2)
  offset = int('diagonal_scatter', offset or 0, 'offset')
  d1, d2 = dim_of('diagonal_scatter', self, d1 or 1), dim_of('diagonal_scatter', self, d2 or 2)
  check_src('diagonal_scatter', self:diagonal(offset, d1, d2), src)
  local flat, s = plane(self, d1, d2)
  local idx, len = diag_pos(self, s[#s - 1], s[#s], offset)
  if len == 0 then return self:clone() end
  return flat:index_copy(-1, idx, src):reshape(s):movedim({ -2, -1 }, { d1, d2 })
end)
def('select_scatter', function(self, src, dim, index)
  local d = dim_of('select_scatter', self, dim)
  local v = self:select(d, index)
  check_src('select_scatter', v, src)
  local i = index < 0 and self:size(d) + index + 1 or index
  return self:index_copy(d, L().tensor({ i }, { dtype = 'int64', device = self.device }), src:unsqueeze(d))
end)
def('slice_scatter', function(self, src, dim, first, last, step)
  local fn = 'slice_scatter'
  need(fn, src, 'src')
  local d = dim_of(fn, self, dim or 1)
  local n = self:size(d)
  first, last, step = int(fn, first or 1, 'first'), int(fn, last or n, 'last'), int(fn, step or 1, 'step', 1)
  if first < 0 then first = n + first + 1 end
  if last < 0 then last = n + last + 1 end
  first, last = math.max(first, 1), math.min(last, n)
  local idx = L().arange(first, math.max(first, last + 1), step, like(self, 'int64'))
  local shape = self:size()
  shape[d] = idx:numel()
  if not src:is_same_size(L().empty(shape)) then
    raise(('%s: src must have the shape %s of the slice, got %s'):format(fn, tostring(shape), tostring(src:size())))
  end
  if idx:numel() == 0 then return self:clone() end
  return self:index_copy(d, idx, src)
end)
-- (positions: an arange of self's elements read through the same strides)
def('as_strided_scatter', function(self, src, size, stride, offset)
  local pos = L().arange(1, self:numel() + 1, like(self, 'int64')):as_strided(size, stride, offset or 0)
  check_src('as_strided_scatter', pos, src)
  return self:reshape(-1):index_copy(1, pos:reshape(-1), src:reshape(-1)):view(self:size())
end)

-- ---- floating-point pieces ---------------------------------------------------------------------------
-- frexp: |m| in [1/2, 1) and t = m 2^e; 0, inf and NaN: m = t, e = 0. The
-- exponent from log2 in float64, corrected by one where it rounded
local function pow2(e)   -- 2^e for e in [-1100, 1100], as a product of two halves (no overflow)
  local h = (e / 2):floor()
  return L().full_like(e, 2):pow(h) * L().full_like(e, 2):pow(e - h)
end
def('frexp', function(self)
  if not self:is_floating_point() then raise('frexp: needs a float tensor, got ' .. self.dtype) end
  local x = self:detach():double()
  local finite = x:isfinite():logical_and(x:ne(0))
  local a = x:abs():where(finite, 1)
  local e = a:log2():floor() + 1
  local m = a / pow2(e)
  e = e + m:ge(1):double() - m:lt(0.5):double()
  local mant = (x / pow2(e)):where(finite, x)
  return mant:to(self.dtype), e:where(finite, 0):to('int32')
end)
def('ldexp', function(self, other)
  need('ldexp', other, 'other')
  local x = self:is_floating_point() and self or self:float()
  return x * pow2(other:double()):to(x.dtype)
end)
local TINY = { float32 = 2 ^ -149, float64 = 2 ^ -1074 }
local BITS = { float32 = 24, float64 = 53 }
def('nextafter', function(self, other)
  need('nextafter', other, 'other')
  if not TINY[self.dtype] or self.dtype ~= other.dtype then
    raise(('nextafter: needs two float32 or two float64 tensors, got %s and %s'):format(self.dtype, other.dtype))
  end
  local x, y = self:detach(), other:detach()
  local m, e = x:frexp()
  local e64 = e:double()
  local ulp = pow2(e64 - BITS[self.dtype]):clamp(TINY[self.dtype], nil)
  local toward = (y - x):sign()
  -- at a power of two, a step toward zero is half as long
  local down = m:abs():eq(0.5):logical_and(toward:ne(x:sign())):logical_and(ulp:gt(TINY[self.dtype]))
  ulp = (ulp / 2):where(down, ulp):to(self.dtype)
  local r = x + toward * ulp
  r = (y:sign() * TINY[self.dtype]):to(self.dtype):where(x:eq(0), r)
  r = y:where(x:eq(y), r)
  return r:where(x:isnan():logical_not(), x):where(y:isnan():logical_not(), y)
end)

-- ---- special functions ------------------------------------------------------------------------------
-- i0: the power series sum ((x/2)^2)^k / k!^2 for |x| <= 25 (70 terms), the
-- asymptotic series e^|x| / sqrt(2 pi |x|) (1 + 1/(8|x|) + 9/(2 (8|x|)^2) + ...) past it
def('i0', function(self)
  local x = self:is_floating_point() and self or self:float()
  local ax = x:double():abs()
  local big = ax:gt(25)
  local xs = ax:where(big:logical_not(), 0)
  local q, term, s = xs * xs / 4, nil, nil
  term = L().ones_like(q)
  s = term
  for k = 1, 70 do
    term = term * q / (k * k)
    s = s + term
  end
  local xa = ax:where(big, 30)
  local t, a = L().ones_like(xa), L().ones_like(xa)
  for k = 1, 20 do
    t = t * ((2 * k - 1) ^ 2 / (8 * k)) / xa
    a = a + t
  end
  local asym = xa:exp() / (xa * 2 * math.pi):sqrt() * a
  return asym:where(big, s):to(x.dtype)
end)
def('mvlgamma', function(self, p)
  int('mvlgamma', p, 'p', 1)
  if not self:is_floating_point() then raise('mvlgamma: needs a float tensor, got ' .. self.dtype) end
  if self:numel() > 0 and self:detach():min():item() <= (p - 1) / 2 then
    raise(('mvlgamma: all elements must be greater than (p - 1) / 2 = %g'):format((p - 1) / 2))
  end
  local r = self:lgamma()
  for i = 1, p - 1 do r = r + (self - i / 2):lgamma() end
  return r + p * (p - 1) / 4 * math.log(math.pi)
end)
for _, name in ipairs({ 'i0', 'mvlgamma', 'ldexp', 'nextafter' }) do
  local f = Tensor[name]
  def(name .. '_', function(self, ...) return self:copy_(f(self, ...)) end)
end

-- ---- histogram and mode -----------------------------------------------------------------------------
local HIST_OPTS = { range = 'table', weight = 'tensor', density = 'boolean' }
def('histogram', function(self, bins, opts)
  local fn = 'histogram'
  opts = options.check(fn, opts, HIST_OPTS) or {}
  if not self:is_floating_point() then raise('histogram: needs a float tensor, got ' .. self.dtype) end
  local x = self:detach():reshape(-1)
  local edges
  if is_tensor(bins) then
    if bins:dim() ~= 1 or bins:numel() < 2 then raise('histogram: bins as a tensor must be 1-d with at least 2 edges') end
    edges = bins:detach():to(self.dtype)
  else
    int(fn, bins, 'bins', 1)
    local lo, hi
    if opts.range then
      lo, hi = opts.range[1], opts.range[2]
      if type(lo) ~= 'number' or type(hi) ~= 'number' or lo > hi then raise('histogram: range must be {min, max} with min <= max') end
    elseif x:numel() > 0 then lo, hi = x:min():item(), x:max():item()
    else lo, hi = 0, 1 end
    if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
    edges = L().linspace(lo, hi, bins + 1, like(self))
  end
  local nb = edges:numel() - 1
  local w = opts.weight
  if w and not w:is_same_size(self) then raise('histogram: weight must have the shape of the input') end
  w = w and w:detach():reshape(-1):to(self.dtype) or L().ones_like(x)
  -- bin p - 1 for the first edge p past x; x at the last edge goes in the last bin
  local pos = L().searchsorted(edges, x, { right = true }) - 1
  pos = L().full_like(pos, nb):where(x:eq(edges:narrow(1, nb + 1, 1)), pos)
  local inside = pos:ge(1):logical_and(pos:le(nb))
  local hist = L().zeros({ nb }, like(self)):scatter_add(1, pos:clamp(1, nb), w:where(inside, 0))
  if opts.density then
    local widths = edges:narrow(1, 2, nb) - edges:narrow(1, 1, nb)
    hist = hist / (hist:sum() * widths)
  end
  return hist, edges
end)
-- mode: the most frequent value along dim (the smallest of several), and the
-- last position where it occurs: runs counted in the sorted values
def('mode', function(self, dim, keepdim)
  local d = dim_of('mode', self, dim or -1)
  local x = self:dim() == 0 and self:reshape(1) or self:detach()
  if x:size(d) == 0 then raise('mode: cannot take the mode of an empty dim') end
  local s = x:sort(d)
  local n = x:size(d)
  local start = L().ones_like(s, { dtype = 'int64' })
  if n > 1 then
    start:narrow(d, 2, n - 1):copy_(s:narrow(d, 2, n - 1):ne(s:narrow(d, 1, n - 1)))
  end
  local group = start:cumsum(d)
  local count = L().zeros_like(group):scatter_add(d, group, L().ones_like(group)):gather(d, group)
  local best = count:argmax(d, true)    -- (the first: the smallest value)
  local values = s:gather(d, best)
  local at = L().arange(1, n + 1, like(x, 'int64'))
  local shape = {}
  for i = 1, x:dim() do shape[i] = i == d and n or 1 end
  local idx = (x:eq(values):long() * at:reshape(shape)):amax(d, true)
  if not keepdim then values, idx = values:squeeze(d), idx:squeeze(d) end
  if self:dim() == 0 then return values:reshape({}), idx:reshape({}) end
  return values, idx
end)

return Tensor
