-- lunet.tensor_api: the rest of torch.Tensor 1.13's commonly used methods,
-- each a few existing ops put together, so they differentiate through those
-- ops (loaded after autograd: the in-place forms here copy the result in
-- with copy_, which autograd records, and refuse a leaf that requires grad).
--   aliases        clip(_), absolute(_), negative(_), multiply(_), divide(_),
--                  subtract(_), true_divide(_), arctan2(_), greater(_),
--                  greater_equal(_), less(_), less_equal(_), not_equal(_),
--                  ndimension, ravel, positive, msort, reshape_as, broadcast_to
--   in place       eq_ ne_ lt_ le_ gt_ ge_ (1/0 in self's dtype), tril_ triu_
--                  cumsum_ cumprod_ remainder_ clamp_min_ clamp_max_ tan_
--                  logical_and_ logical_or_ logical_not_ logical_xor_
--                  unsqueeze_ squeeze_ t_ transpose_ swapaxes_ swapdims_ (views in place)
--   clamp(min, max), clamp_min, clamp_max with tensor bounds too
--   type_as(u), new_tensor(data[, opts]), fill_diagonal_(v[, wrap]), narrow_copy,
--   sum_to_size(size), masked_scatter(mask, src), index_put(_)(indices, values[, accumulate]),
--   put(_)(index, src[, accumulate]), diff([n[, dim[, prepend[, append]]]]),
--   renorm(p, dim, maxnorm), aminmax([dim[, keepdim]]) -> min, max,
--   nansum, nanmean, std_mean, var_mean (-> std|var, mean), cummax, cummin
--   (-> values, 1-based indices), logcumsumexp(dim), flipud, fliplr, rot90,
--   tensor_split, hsplit, vsplit, dsplit, logical_xor, tan, deg2rad, rad2deg, isposinf, isneginf, fmax, fmin,
--   heaviside, inner, floor_divide(_), sinc(_), float_power, vdot, unflatten,
--   split_with_sizes, is_nonzero, isreal, is_signed, is_complex, is_same_size;
--   fields t.nbytes, t.itemsize, t.mT, t.mH, t.H; functions lunet.hstack, vstack, row_stack,
--   dstack, column_stack, atleast_1d, atleast_2d, atleast_3d.
-- Split points (tensor_split, hsplit, ...) are cut positions, the count of
-- elements before each cut: the same numbers as PyTorch's (they name no element).
local core = require 'lunet.core'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
require 'lunet.tensor_reduce'
local Tensor, is_tensor, getters = T.Tensor, T.is_tensor, T.getters
local is_table, typename = core.is_table, core.typename
local raise = options.raise

local function L() return require('lunet') end

local M = {}   -- the lunet.* functions

local named = options.named   -- (an error inside names the method called)
local function def(name, f) Tensor[name] = named(name, f) end

local need = options.need_tensor
local function int(fn, v, what, lo)
  if type(v) ~= 'number' or v % 1 ~= 0 or v ~= v or (lo and v < lo) or math.abs(v) > 2 ^ 53 then
    raise(('%s: %s must be an integer%s, got %s'):format(fn, what, lo and (' >= ' .. lo) or '',
      type(v) == 'number' and tostring(v) or typename(v)))
  end
  return v
end
local function bool_arg(fn, v, what)
  if v ~= nil and type(v) ~= 'boolean' then raise(('%s: %s must be a boolean, got %s'):format(fn, what, typename(v))) end
  return v or false
end
-- a 1-based (or negative) dim of t -> positive 1-based dim
local function dim_of(fn, t, d)
  if t:dim() == 0 and (d == 1 or d == -1) then return 1 end
  return T.to_cdim(fn, t, d) + 1
end
-- other dims than d of t
local function others(t, d)
  local o = {}
  for i = 1, t:dim() do if i ~= d then o[#o + 1] = i end end
  return o
end

-- ---- aliases --------------------------------------------------------------------------
for alias, target in pairs({ absolute = 'abs', absolute_ = 'abs_',
  negative = 'neg', negative_ = 'neg_', multiply = 'mul', multiply_ = 'mul_', divide = 'div', divide_ = 'div_',
  subtract = 'sub', subtract_ = 'sub_', true_divide = 'div', true_divide_ = 'div_', arctan2 = 'atan2',
  arctan2_ = 'atan2_', greater = 'gt', greater_equal = 'ge', less = 'lt', less_equal = 'le', not_equal = 'ne' }) do
  def(alias, function(self, ...)
    need(alias, self, 'self')
    return Tensor[target](self, ...)
  end)
end
def('ndimension', function(self) return self:dim() end)
def('ravel', function(self) return self:reshape(-1) end)
def('positive', function(self)
  if self.dtype == 'bool' then raise('positive: not supported for bool tensors') end
  return self
end)
def('msort', function(self) return (self:sort(1)) end)
def('reshape_as', function(self, other) return self:reshape(need('reshape_as', other, 'other'):size()) end)
def('broadcast_to', function(self, ...) return self:expand(...) end)

-- ---- fields -----------------------------------------------------------------------------
getters.itemsize = function(self) return self:element_size() end
getters.nbytes = function(self) return self:element_size() * self:numel() end

-- ---- predicates ---------------------------------------------------------------------------
def('is_nonzero', function(self)
  if self:numel() ~= 1 then
    raise(('is_nonzero: a tensor with %d elements is ambiguous (needs exactly one)'):format(self:numel()))
  end
  return self:reshape(-1):ne(0):item() == true
end)
def('isreal', function(self) return L().ones_like(self, { dtype = 'bool' }) end)   -- (no complex dtypes)
local UNSIGNED = { bool = true, uint8 = true }
def('is_signed', function(self) return not UNSIGNED[self.dtype] end)
def('is_complex', function(self) return false end)
def('is_same_size', function(self, other)
  need('is_same_size', other, 'other')
  local a, b = self:size(), other:size()
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end)
def('isposinf', function(self) return self:eq(math.huge) end)
def('isneginf', function(self) return self:eq(-math.huge) end)

-- ---- elementwise ---------------------------------------------------------------------------
def('tan', function(self) return self:sin() / self:cos() end)
def('deg2rad', function(self) return self * (math.pi / 180) end)
def('rad2deg', function(self) return self * (180 / math.pi) end)
-- fmax/fmin: NaN only where both are NaN (maximum's NaN replaced by the other)
local function nan_ignoring(name, op)
  def(name, function(self, other)
    need(name, other, 'other')
    local r = other:where(self:isnan(), self[op](self, other))   -- (self NaN: other)
    return self:where(other:isnan(), r)
  end)
end
nan_ignoring('fmax', 'maximum')
nan_ignoring('fmin', 'minimum')
def('heaviside', function(self, values)
  need('heaviside', values, 'values')
  return values:where(self:eq(0), self:gt(0):to(self.dtype))   -- (NaN: 0, as torch)
end)
def('inner', function(self, other)
  need('inner', other, 'other')
  if self:dim() == 0 or other:dim() == 0 then return self * other end
  return L().tensordot(self, other, { { self:dim() }, { other:dim() } })
end)

-- floor_divide: floor(a / b) (PyTorch 1.13 floors; integers stay integers)
def('floor_divide', function(self, other)
  if type(other) ~= 'number' then need('floor_divide', other, 'other') end
  local q = (self / other):floor()
  if not self:is_floating_point() and (type(other) == 'number' and other % 1 == 0 or is_tensor(other) and not other:is_floating_point()) then
    q = q:to(self.dtype)
  end
  return q
end)
-- sinc: sin(pi x) / (pi x), 1 at 0 (x kept off 0 there so the gradient stays finite)
def('sinc', function(self)
  local zero = self:eq(0)
  local px = self:where(zero:logical_not(), 1) * math.pi
  return (px:sin() / px):where(zero:logical_not(), 1)
end)
def('float_power', function(self, e)
  if is_tensor(e) then return self:double():pow(e:double()) end
  if type(e) ~= 'number' then raise('float_power: exponent must be a number or a tensor, got ' .. typename(e)) end
  return self:double():pow(e)
end)
def('vdot', function(self, other)
  need('vdot', other, 'other')
  if self:dim() ~= 1 or other:dim() ~= 1 then raise(('vdot: needs two 1-d tensors, got %d-d and %d-d'):format(self:dim(), other:dim())) end
  return self:dot(other)
end)
-- unflatten(dim, sizes): dim split into sizes (one may be -1)
def('unflatten', function(self, dim, sizes)
  local fn = 'unflatten'
  if not is_table(sizes) or is_tensor(sizes) or #sizes == 0 then raise(fn .. ': sizes must be a non-empty list, got ' .. typename(sizes)) end
  local d = dim_of(fn, self, int(fn, dim, 'dim'))
  local s, shape = self:size(), {}
  for i = 1, d - 1 do shape[#shape + 1] = s[i] end
  for i = 1, #sizes do shape[#shape + 1] = int(fn, sizes[i], 'each size', -1) end
  for i = d + 1, #s do shape[#shape + 1] = s[i] end
  return self:view(shape)
end)
def('split_with_sizes', function(self, sizes, dim)
  if not is_table(sizes) then raise('split_with_sizes: sizes must be a list, got ' .. typename(sizes)) end
  return self:split(sizes, dim)
end)
getters.mT = function(self) return self:transpose(-2, -1) end
getters.mH = getters.mT   -- (no complex dtypes: the conjugate is the tensor)
getters.H = function(self) return self:t() end

-- logical_xor (the bitwise ops are C kernels: lunet.tensor_math)
def('logical_xor', function(self, other)
  need('logical_xor', other, 'other')
  return self:ne(0):ne(other:ne(0))
end)

-- ---- clamp with tensor bounds ----------------------------------------------------------------
do
  local clamp, clamp_min, clamp_max = Tensor.clamp, Tensor.clamp_min, Tensor.clamp_max
  local function bound(fn, v, what)
    if v ~= nil and type(v) ~= 'number' and not is_tensor(v) then
      raise(('%s: %s must be a number, a tensor or nil, got %s'):format(fn, what, typename(v)))
    end
  end
  -- min(max(t, lo), hi), as torch.clamp with tensors
  local function tclamp(fn, self, lo, hi)
    bound(fn, lo, 'min'); bound(fn, hi, 'max')
    if not is_tensor(lo) and not is_tensor(hi) then return clamp(self, lo, hi) end
    local r = self
    if lo ~= nil then r = is_tensor(lo) and r:maximum(lo) or r:clamp(lo, nil) end
    if hi ~= nil then r = is_tensor(hi) and r:minimum(hi) or r:clamp(nil, hi) end
    return r
  end
  -- (number bounds go straight to the kernels' clamp: the renaming wrapper,
  -- a pcall, only where a bound is a tensor)
  local tensor_clamp = named('clamp', function(self, lo, hi) return tclamp('clamp', self, lo, hi) end)
  local tensor_clamp_ = named('clamp_', function(self, lo, hi) return self:copy_(tclamp('clamp_', self, lo, hi)) end)
  local tensor_min = named('clamp_min', function(self, v) bound('clamp_min', v, 'min'); return self:maximum(v) end)
  local tensor_max = named('clamp_max', function(self, v) bound('clamp_max', v, 'max'); return self:minimum(v) end)
  local clamp_ = Tensor.clamp_
  -- (a bound neither a number nor nil: the tensor path, whose error names both kinds)
  local function plain(lo, hi) return (lo == nil or type(lo) == 'number') and (hi == nil or type(hi) == 'number') end
  function Tensor.clamp(self, lo, hi)
    if not plain(lo, hi) then return tensor_clamp(self, lo, hi) end
    return clamp(self, lo, hi)
  end
  function Tensor.clamp_(self, lo, hi)
    if not plain(lo, hi) then return tensor_clamp_(self, lo, hi) end
    return clamp_(self, lo, hi)
  end
  function Tensor.clamp_min(self, v)
    if not plain(v) then return tensor_min(self, v) end
    return clamp_min(self, v)
  end
  function Tensor.clamp_max(self, v)
    if not plain(v) then return tensor_max(self, v) end
    return clamp_max(self, v)
  end
  def('clip', function(self, lo, hi) return Tensor.clamp(self, lo, hi) end)
  def('clip_', function(self, lo, hi) return Tensor.clamp_(self, lo, hi) end)
end

-- ---- in-place forms of out-of-place ops: the result copied in ----------------------------------
for _, name in ipairs({ 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'greater', 'greater_equal', 'less', 'less_equal',
  'not_equal', 'tril', 'triu', 'cumsum', 'cumprod', 'remainder', 'clamp_min', 'clamp_max', 'tan', 'deg2rad',
  'rad2deg', 'logical_and', 'logical_or', 'logical_not', 'logical_xor', 'fmax', 'fmin', 'heaviside', 'floor_divide',
  'sinc', 'bitwise_and', 'bitwise_or', 'bitwise_xor', 'bitwise_not' }) do
  if not rawget(Tensor, name .. '_') then
    local f = Tensor[name]
    def(name .. '_', function(self, ...)
      need(name .. '_', self, 'self')
      return self:copy_(f(self, ...))
    end)
  end
end

-- views in place: self takes the view's C tensor (same storage). Under
-- recording, a tensor that requires grad is refused (use the out-of-place view).
local function view_in_place(name, view)
  def(name, function(self, ...)
    need(name, self, 'self')
    if self.requires_grad and L().is_grad_enabled() then
      raise(name .. ': not supported on a tensor that requires grad while recording; use the out-of-place view')
    end
    local v = view(self, ...)
    self.p = v.p
    return self
  end)
end
view_in_place('unsqueeze_', function(t, d) return t:unsqueeze(d) end)
view_in_place('squeeze_', function(t, d) return t:squeeze(d) end)
view_in_place('t_', function(t) return t:t() end)
view_in_place('transpose_', function(t, a, b) return t:transpose(a, b) end)
view_in_place('swapaxes_', function(t, a, b) return t:transpose(a, b) end)
view_in_place('swapdims_', function(t, a, b) return t:transpose(a, b) end)

-- ---- construction, types ---------------------------------------------------------------------
def('type_as', function(self, other) return self:to(need('type_as', other, 'other')) end)
local NEW_OPTS = { dtype = 'string', device = 'string', requires_grad = 'boolean' }
def('new_tensor', function(self, data, opts)
  local o = options.check('new_tensor', opts or {}, NEW_OPTS)
  local dtype, device = o.dtype or self.dtype, o.device or self.device
  local r
  if is_tensor(data) then r = data:detach():to({ dtype = dtype, device = device }):clone()
  else r = L().tensor(data, { dtype = dtype, device = device }) end
  if o.requires_grad then r.requires_grad = true end
  return r
end)

def('narrow_copy', function(self, d, start, len) return self:narrow(d, start, len):clone() end)

-- fill_diagonal_(v[, wrap]): the main diagonal (all dims equal beyond 2-d);
-- wrap: a tall matrix's diagonal starts again every width + 1 rows
def('fill_diagonal_', function(self, v, wrap)
  local fn = 'fill_diagonal_'
  if type(v) ~= 'number' then raise(fn .. ': value must be a number, got ' .. typename(v)) end
  wrap = bool_arg(fn, wrap, 'wrap')
  local nd, size = self:dim(), self:size()
  if nd < 2 then raise(('%s: needs at least 2 dims, got %d'):format(fn, nd)) end
  if nd > 2 then
    for i = 2, nd do
      if size[i] ~= size[1] then raise(fn .. ': all dims must have the same size beyond 2-d, got {' .. table.concat(size, ',') .. '}') end
    end
  end
  local n, step, stride = math.huge, 0, 1
  for i = nd, 1, -1 do n = math.min(n, size[i]); step = step + stride; stride = stride * size[i] end
  local numel = self:numel()
  if numel == 0 then return self end
  local count = n
  if wrap and nd == 2 and size[1] > size[2] + 1 then count = math.floor((numel + step - 1) / step) end
  local idx = L().arange(0, count, { dtype = 'int64', device = self.device }) * step + 1
  return self:copy_(self:reshape(-1):index_fill(1, idx, v):view(size))
end)

-- sum_to_size(size): summed over the leading dims and those size has as 1
def('sum_to_size', function(self, ...)
  local fn = 'sum_to_size'
  local size = select('#', ...) == 1 and is_table((...)) and (...) or { ... }
  local s, nd = self:size(), self:dim()
  if #size > nd then raise(('%s: size {%s} has more dims than the tensor (%d)'):format(fn, table.concat(size, ','), nd)) end
  for i = 1, #size do int(fn, size[i], 'each size', 0) end
  local lead = nd - #size
  local r = self
  if lead > 0 then
    local ds = {}
    for i = 1, lead do ds[i] = i end
    r = r:sum(ds)
  end
  local ds = {}
  for i = 1, #size do
    if size[i] == 1 and s[lead + i] ~= 1 then ds[#ds + 1] = i
    elseif size[i] ~= s[lead + i] then
      raise(('%s: size {%s} is not expandable to the tensor\'s {%s}'):format(fn, table.concat(size, ','), table.concat(s, ',')))
    end
  end
  if #ds > 0 then r = r:sum(ds, true) end
  return r
end)

-- masked_scatter(mask, source): source's elements, in order, where mask is true
def('masked_scatter', function(self, mask, source)
  local fn = 'masked_scatter'
  need(fn, mask, 'mask'); need(fn, source, 'source')
  if mask.dtype ~= 'bool' then raise(fn .. ': mask must be a bool tensor, got ' .. mask.dtype) end
  local m = mask:expand(self:size())
  local pos = m:reshape(-1):long():cumsum(1)   -- (1-based position in source of each true)
  local count = self:numel() > 0 and pos[pos:numel()]:item() or 0
  if count > source:numel() then
    raise(('%s: mask has %d true elements but source only %d'):format(fn, count, source:numel()))
  end
  if source:numel() == 0 then return self:clone() end
  local picked = source:reshape(-1):index_select(1, pos:clamp(1, nil)):view(self:size())
  return picked:where(m, self)
end)
def('masked_scatter_', function(self, mask, source) return self:copy_(self:masked_scatter(mask, source)) end)

-- index_put(indices, values[, accumulate]): indices a list of index tensors
-- (1-based int64/int32, broadcast together; or one bool mask) for the first dims
local function linear(fn, self, indices)
  if not is_table(indices) or is_tensor(indices) or #indices == 0 then
    raise(fn .. ': indices must be a non-empty list of index tensors, got ' .. typename(indices))
  end
  local lunet = L()
  local idx = {}
  for i = 1, #indices do
    local t = indices[i]
    if not is_tensor(t) then raise(('%s: index %d must be a tensor, got %s'):format(fn, i, typename(t))) end
    if t.dtype == 'bool' or t.dtype == 'uint8' then
      for _, c in ipairs(t:nonzero({ as_tuple = true })) do idx[#idx + 1] = c end
    elseif t.dtype == 'int64' or t.dtype == 'int32' then idx[#idx + 1] = t:long()
    else raise(('%s: index %d must be an int64, int32 or bool tensor, got %s'):format(fn, i, t.dtype)) end
  end
  local nd, size = self:dim(), self:size()
  if #idx > nd then raise(('%s: %d indices for a %d-d tensor'):format(fn, #idx, nd)) end
  -- broadcast the index tensors together
  local sum = idx[1] * 0
  for i = 2, #idx do sum = sum + idx[i] * 0 end
  local lin, stride = sum + 1, 1   -- (1-based row of the flattened leading dims)
  for i = #idx, 1, -1 do
    local t = idx[i]
    if t:numel() > 0 and (t:min():item() < 1 or t:max():item() > size[i]) then
      raise(('%s: index %d out of range 1..%d for dim %d'):format(fn, i, size[i], i))
    end
    lin = lin + (t - 1) * stride
    stride = stride * size[i]
  end
  local rest = {}
  for i = #idx + 1, nd do rest[#rest + 1] = size[i] end
  return lin, stride, rest
end
local function index_put(self, indices, values, accumulate)
  local fn = 'index_put'
  accumulate = bool_arg(fn, accumulate, 'accumulate')
  if type(values) == 'number' then values = L().tensor(values, { dtype = self.dtype, device = self.device }) end
  need(fn, values, 'values')
  local lin, lead, rest = linear(fn, self, indices)
  local flat_shape = { lead }
  for i = 1, #rest do flat_shape[i + 1] = rest[i] end
  local n = lin:numel()
  local vshape = lin:size()
  for i = 1, #rest do vshape[#vshape + 1] = rest[i] end
  local src_shape = { n }
  for i = 1, #rest do src_shape[i + 1] = rest[i] end
  local src = values:to(self.dtype):expand(vshape):reshape(src_shape)
  local flat = self:reshape(flat_shape)
  local r = accumulate and flat:index_add(1, lin:reshape(-1), src) or flat:index_copy(1, lin:reshape(-1), src)
  return r:view(self:size())
end
def('index_put', index_put)
def('index_put_', function(self, indices, values, accumulate)
  return self:copy_(index_put(self, indices, values, accumulate))
end)

-- put(index, source[, accumulate]): into the flattened tensor, 1-based
local function put(self, index, source, accumulate)
  local fn = 'put'
  need(fn, index, 'index'); need(fn, source, 'source')
  if index:numel() ~= source:numel() then
    raise(('%s: index has %d elements but source %d'):format(fn, index:numel(), source:numel()))
  end
  local r = index_put(self:reshape(-1), { index:reshape(-1) }, source:reshape(-1), accumulate)
  return r:view(self:size())
end
def('put', put)
def('put_', function(self, index, source, accumulate) return self:copy_(put(self, index, source, accumulate)) end)

-- ---- differences, norms, reductions --------------------------------------------------------------
local DIFF_OPTS = { n = 'number', dim = 'number', prepend = true, append = true }
def('diff', function(self, n, dim, prepend, append)
  local fn = 'diff'
  if is_table(n) and not is_tensor(n) then
    local o = options.check(fn, n, DIFF_OPTS)
    n, dim, prepend, append = o.n, o.dim, o.prepend, o.append
  end
  n = int(fn, n == nil and 1 or n, 'n', 0)
  if self:dim() == 0 then raise(fn .. ': needs at least 1 dim, got a 0-d tensor') end
  local d = dim_of(fn, self, dim == nil and -1 or dim)
  local parts = {}
  if prepend ~= nil then parts[#parts + 1] = need(fn, prepend, 'prepend') end
  parts[#parts + 1] = self
  if append ~= nil then parts[#parts + 1] = need(fn, append, 'append') end
  local x = #parts > 1 and L().cat(parts, d) or self
  for _ = 1, n do
    local len = x:size(d)
    if len == 0 then break end
    local hi, lo = x:narrow(d, 2, len - 1), x:narrow(d, 1, len - 1)
    x = x.dtype == 'bool' and hi:ne(lo) or hi - lo
  end
  return x
end)

-- renorm(p, dim, maxnorm): each slice along dim with p-norm over maxnorm
-- scaled to maxnorm (as torch: by maxnorm / (norm + 1e-7))
def('renorm', function(self, p, dim, maxnorm)
  local fn = 'renorm'
  if type(p) ~= 'number' or p ~= p or p <= 0 then raise(fn .. ': p must be a positive number, got ' .. tostring(p)) end
  if type(maxnorm) ~= 'number' or maxnorm ~= maxnorm or maxnorm < 0 then
    raise(fn .. ': maxnorm must be a number >= 0, got ' .. tostring(maxnorm))
  end
  if self:dim() == 0 then raise(fn .. ': needs at least 1 dim, got a 0-d tensor') end
  local d = dim_of(fn, self, int(fn, dim, 'dim'))
  local o = others(self, d)
  local norm = #o == 0 and self:abs() or self:norm(p, o, true)
  local factor = (norm + 1e-7):reciprocal():mul(maxnorm):where(norm:gt(maxnorm), 1)
  return self * factor
end)
def('renorm_', function(self, p, dim, maxnorm) return self:copy_(self:renorm(p, dim, maxnorm)) end)

local function dim_keep(fn, dim, keepdim)
  if is_table(dim) and not is_tensor(dim) and dim[1] == nil then
    local o = options.check(fn, dim, { dim = true, keepdim = 'boolean' })
    dim, keepdim = o.dim, o.keepdim
  end
  return dim, bool_arg(fn, keepdim, 'keepdim')
end
def('aminmax', function(self, dim, keepdim)
  dim, keepdim = dim_keep('aminmax', dim, keepdim)
  if dim == nil then
    if keepdim then
      local all = {}
      for i = 1, self:dim() do all[i] = i end
      if #all == 0 then return self:clone(), self:clone() end
      return self:amin(all, true), self:amax(all, true)
    end
    return self:amin(), self:amax()
  end
  return self:amin(dim, keepdim), self:amax(dim, keepdim)
end)

local function nan_zeroed(self)
  if not self:is_floating_point() then return self end
  return self:where(self:isnan():logical_not(), 0)
end
def('nansum', function(self, dim, keepdim)
  dim, keepdim = dim_keep('nansum', dim, keepdim)
  return nan_zeroed(self):sum(dim, keepdim)
end)
def('nanmean', function(self, dim, keepdim)
  dim, keepdim = dim_keep('nanmean', dim, keepdim)
  if not self:is_floating_point() then raise('nanmean: needs a float tensor, got ' .. self.dtype) end
  local count = self:isnan():logical_not():to(self.dtype):sum(dim, keepdim)
  return nan_zeroed(self):sum(dim, keepdim) / count
end)

-- std_mean / var_mean: the arguments of t:std / t:var; -> spread, mean
local function spread_mean(name, spread)
  def(name, function(self, dim, opt, keepdim)
    if type(dim) == 'boolean' or is_table(dim) and not is_tensor(dim) and (dim[1] == nil and next(dim) ~= nil) then
      dim, opt, keepdim = nil, dim, opt
    end
    local s = self[spread](self, dim, opt, keepdim)
    local k = keepdim
    if k == nil and is_table(opt) then k = opt.keepdim end
    local m
    if dim == nil then
      m = self:mean()
      if k then m = m:reshape(s:size()) end
    else m = self:mean(dim, k) end
    return s, m
  end)
end
spread_mean('std_mean', 'std')
spread_mean('var_mean', 'var')

-- ---- scans -------------------------------------------------------------------------------------
-- (Hillis-Steele: log2(n) steps, each element combined with the one s before
-- it; the ops are associative so the scan is exact)
local function doubling(x, d, combine)
  local n, s = x:size(d), 1
  while s < n do
    local lo = x:narrow(d, 1, n - s)
    local hi = x:narrow(d, s + 1, n - s)
    x = L().cat({ x:narrow(d, 1, s), combine(lo, hi) }, d)
    s = s * 2
  end
  return x
end

-- cummax/cummin(dim) -> values, 1-based int64 indices (of the last extreme,
-- as torch; NaN propagates and wins); values differentiable (a gather)
local function cumext(name, cmp)
  def(name, function(self, dim)
    local fn = name
    if dim == nil then raise(fn .. ': dim is required') end
    local d = dim_of(fn, self, int(fn, dim, 'dim'))
    if self:dim() == 0 then return self:clone(), L().tensor(1, { dtype = 'int64', device = self.device }) end
    local n = self:size(d)
    local shape = {}
    for i = 1, self:dim() do shape[i] = i == d and n or 1 end
    local pos = L().arange(1, n + 1, { dtype = 'int64', device = self.device }):view(shape):expand(self:size()):contiguous()
    local v = self:detach()
    local float = v:is_floating_point()
    local packed = L().stack({ v:to('float64'), pos:to('float64') }, 1)   -- (value, index) pairs together
    local dd = d + 1
    packed = doubling(packed, dd, function(lo, hi)
      local va, vb = lo:select(1, 1), hi:select(1, 1)
      local take = vb[cmp](vb, va)
      if float then take = take:logical_or(vb:isnan()):logical_and(va:isnan():logical_not():logical_or(vb:isnan())) end
      return hi:where(take:unsqueeze(1), lo)
    end)
    local idx = packed:select(1, 2):long()
    return self:gather(d, idx), idx
  end)
end
cumext('cummax', 'ge')
cumext('cummin', 'le')

def('logcumsumexp', function(self, dim)
  local fn = 'logcumsumexp'
  if dim == nil then raise(fn .. ': dim is required') end
  if not self:is_floating_point() then raise(fn .. ': needs a float tensor, got ' .. self.dtype) end
  local d = dim_of(fn, self, int(fn, dim, 'dim'))
  if self:dim() == 0 then return self:clone() end
  return doubling(self, d, function(lo, hi) return lo:logaddexp(hi) end)
end)

-- ---- flips, rotations ---------------------------------------------------------------------------
def('flipud', function(self)
  if self:dim() < 1 then raise('flipud: needs at least 1 dim, got a 0-d tensor') end
  return self:flip(1)
end)
def('fliplr', function(self)
  if self:dim() < 2 then raise(('fliplr: needs at least 2 dims, got %d'):format(self:dim())) end
  return self:flip(2)
end)
def('rot90', function(self, k, dims)
  local fn = 'rot90'
  k = int(fn, k == nil and 1 or k, 'k')
  dims = dims or { 1, 2 }
  if not is_table(dims) or #dims ~= 2 then raise(fn .. ': dims must be a list of 2 dims, got ' .. typename(dims)) end
  if self:dim() < 2 then raise(('%s: needs at least 2 dims, got %d'):format(fn, self:dim())) end
  local a, b = dim_of(fn, self, int(fn, dims[1], 'dim')), dim_of(fn, self, int(fn, dims[2], 'dim'))
  if a == b then raise(('%s: the two dims must differ, got %d and %d'):format(fn, dims[1], dims[2])) end
  k = k % 4
  if k == 1 then return self:flip(b):transpose(a, b)
  elseif k == 2 then return self:flip({ a, b })
  elseif k == 3 then return self:flip(a):transpose(a, b) end
  return self:clone()
end)

-- ---- splits ------------------------------------------------------------------------------------
local function cuts_of(fn, v)
  if is_tensor(v) then
    if v.dtype ~= 'int64' and v.dtype ~= 'int32' then raise(fn .. ': indices_or_sections tensor must be int64, got ' .. v.dtype) end
    if v:dim() > 1 then raise(fn .. ': indices_or_sections tensor must be 0-d or 1-d') end
    v = v:dim() == 0 and v:item() or v:tolist()
  end
  return v
end
local function tensor_split(fn, self, what, dim)
  what = cuts_of(fn, what)
  if self:dim() == 0 then raise(fn .. ': needs at least 1 dim, got a 0-d tensor') end
  local d = dim_of(fn, self, dim == nil and 1 or int(fn, dim, 'dim'))
  local len, parts = self:size(d), {}
  if type(what) == 'number' then
    local n = int(fn, what, 'sections', 1)
    local q, r = math.floor(len / n), len % n
    local start = 1
    for i = 1, n do
      local l = q + (i <= r and 1 or 0)
      parts[i] = self:narrow(d, start, l)
      start = start + l
    end
  elseif is_table(what) then
    -- (as Python slices: part i is [cut i-1, cut i), negative from the end, empty when reversed)
    local function pos(c) if c < 0 then c = len + c end return math.min(math.max(c, 0), len) end
    local start = 0
    for i = 1, #what + 1 do
      local stop = what[i] and pos(int(fn, what[i], 'each index')) or len
      parts[i] = self:narrow(d, start + 1, math.max(0, stop - start))
      start = stop
    end
  else
    raise(fn .. ': indices_or_sections must be a number, a list of cut positions or an int tensor, got ' .. typename(what))
  end
  return parts
end
def('tensor_split', function(self, what, dim) return tensor_split('tensor_split', self, what, dim) end)
local function dir_split(name, d, min_dims)
  def(name, function(self, what)
    what = cuts_of(name, what)
    if self:dim() < min_dims then raise(('%s: needs at least %d dims, got %d'):format(name, min_dims, self:dim())) end
    local dd = (name == 'hsplit' and self:dim() == 1) and 1 or d
    if type(what) == 'number' then
      int(name, what, 'sections', 1)
      if self:size(dd) % what ~= 0 then
        raise(('%s: dim %d has size %d, not divisible by %d sections'):format(name, dd, self:size(dd), what))
      end
    end
    return tensor_split(name, self, what, dd)
  end)
end
dir_split('hsplit', 2, 1)
dir_split('vsplit', 1, 2)
dir_split('dsplit', 3, 3)

-- ---- lunet.* functions: stacking, at least n dims -------------------------------------------------
local function list_of(fn, ...)
  local n = select('#', ...)
  local first = ...
  if n == 1 and is_table(first) and not is_tensor(first) then
    if #first == 0 then raise(fn .. ': expected a non-empty list of tensors') end
    for i = 1, #first do need(fn, first[i], 'element ' .. i) end
    return first, true
  end
  if n == 0 then raise(fn .. ': expected tensors, got nothing') end
  local list = { ... }
  for i = 1, n do need(fn, list[i], 'argument ' .. i) end
  return list, n > 1
end
local function atleast(fn, k)
  local function one(t)
    local nd, s = t:dim(), t:size()
    if nd >= k then return t end
    if nd == 0 then
      local shape = {}
      for i = 1, k do shape[i] = 1 end
      return t:reshape(shape)
    end
    if k == 2 then return t:unsqueeze(1) end
    if nd == 1 then return t:reshape({ 1, s[1], 1 }) end
    return t:unsqueeze(3)
  end
  return named(fn, function(...)
    local list, many = list_of(fn, ...)
    if not many then return one(list[1]) end
    local out = {}
    for i = 1, #list do out[i] = one(list[i]) end
    return out
  end), one
end
local one1, one2, one3
M.atleast_1d, one1 = atleast('atleast_1d', 1)
M.atleast_2d, one2 = atleast('atleast_2d', 2)
M.atleast_3d, one3 = atleast('atleast_3d', 3)
local function stacker(fn, body)
  return named(fn, function(tensors)
    if not is_table(tensors) or is_tensor(tensors) or #tensors == 0 then
      raise(fn .. ': expected a non-empty list of tensors, got ' .. typename(tensors))
    end
    for i = 1, #tensors do need(fn, tensors[i], 'element ' .. i) end
    return body(tensors)
  end)
end
local function map(list, f)
  local out = {}
  for i = 1, #list do out[i] = f(list[i]) end
  return out
end
M.hstack = stacker('hstack', function(ts)
  local a = map(ts, one1)
  return L().cat(a, a[1]:dim() == 1 and 1 or 2)
end)
M.vstack = stacker('vstack', function(ts) return L().cat(map(ts, one2), 1) end)
M.row_stack = stacker('row_stack', function(ts) return L().cat(map(ts, one2), 1) end)
M.dstack = stacker('dstack', function(ts) return L().cat(map(ts, one3), 3) end)
M.column_stack = stacker('column_stack', function(ts)
  return L().cat(map(ts, function(t) return t:dim() <= 1 and t:reshape({ t:numel(), 1 }) or t end), 2)
end)

return M
