-- lunet.tensor_order_stats: order statistics as Tensor methods, with
-- PyTorch 1.13's names and rules, and 1-based dims, k and indices (int64):
--   t:median(), t:nanmedian()                                  -> 0-d tensor
--   t:median(dim[, keepdim]) or t:median({dim =, keepdim =})   -> values, indices (nanmedian too)
--   t:kthvalue(k[, dim[, keepdim]]) or t:kthvalue(k, {dim =, keepdim =}) -> values, indices
--   t:quantile(q[, dim[, keepdim]][, {interpolation =}]), t:nanquantile(...) -> values
-- dim defaults to the last for median's and kthvalue's options table and
-- for kthvalue; quantile's nil dim means over all elements. The median is
-- the lower of the two middle values for an even count. median and quantile
-- give NaN where a NaN is reduced (median's index: the first NaN);
-- nanmedian and nanquantile leave NaNs out (NaN for an all-NaN row).
-- kthvalue orders NaN above every number. quantile's q is a number in
-- [0, 1] or a 0-d or 1-d tensor of the input's dtype (a 1-d q gives the
-- output a leading dim of #q); interpolation is 'linear' (the default),
-- 'lower', 'higher', 'nearest' (ties to even) or 'midpoint'.
-- Everything is composed from the sort kernel (ln_argsort) and tensor ops:
-- the values are gathers of the input, so gradients go to the selected
-- element (quantile's linear interpolation blends its two neighbours', and
-- gives a tensor q a gradient, as PyTorch's),
-- except median() and nanmedian() over all elements, whose gradient is
-- shared evenly among the elements equal to the result, as PyTorch's.
-- Also lunet.median(t, ...), lunet.kthvalue, ... (the functional forms).
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local Tensor, is_tensor = T.Tensor, T.is_tensor

local unpack = table.unpack or unpack
local DIM_OPTS = { dim = 'number', keepdim = 'boolean' }
local QUANTILE_OPTS = { dim = 'number', keepdim = 'boolean', interpolation = 'string' }
local INTERPOLATIONS = { linear = true, lower = true, higher = true, nearest = true, midpoint = true }

local dims = require 'lunet.tensor_dim'
local need, flag, to_cdim = dims.need, dims.flag, dims.to_cdim
-- (ascending, all of them; x at least 1-d)
local function positions(fn, x, cd) return dims.positions(fn, x, cd, false, -1) end

local function size_at(x, cd) return x.p.ndim == 0 and 1 or tonumber(x.p.shape[cd]) end


-- (dim, keepdim) or an options table -> C dim, keepdim
local function dim_args(fn, self, dim, keepdim)
  if is_table(dim) then
    if keepdim ~= nil then raise(fn .. ': expected an options table alone, got a second argument') end
    local o = options.check(fn, dim, DIM_OPTS)
    dim, keepdim = o.dim, o.keepdim
  end
  return to_cdim(fn, self, dim), flag(fn, 'keepdim', keepdim, false)
end

local function refuse_empty_dim(fn, self, cd)
  if size_at(self, cd) == 0 then
    raise(('%s: dim %d has size 0: no element to select'):format(fn, cd + 1))
  end
end

-- the element at sorted position pos (a number, or a keepdim-shaped int64
-- tensor of 1-based positions) along C dim cd: values (a gather of self, so
-- differentiable) and their 1-based indices in self
local function select_sorted(fn, self, cd, keepdim, pos)
  local x = self.p.ndim == 0 and self:reshape({ 1 }) or self
  local order = positions(fn, x, cd)
  local idx = type(pos) == 'number' and order:narrow(cd + 1, pos, 1):contiguous() or order:gather(cd + 1, pos)
  local v = x:gather(cd + 1, idx)
  if self.p.ndim == 0 then return v:reshape({}), idx:reshape({}) end
  if not keepdim then return v:squeeze(cd + 1), idx:squeeze(cd + 1) end
  return v, idx
end

-- the sorted position of the median along C dim cd: the lower middle one;
-- for median the first NaN where there is one (NaN sorts last); for
-- nanmedian the lower middle of the numbers (the first NaN when all are)
local function median_pos(self, cd, ignore_nan)
  local n = size_at(self, cd)
  local mid = math.floor((n - 1) / 2) + 1
  if not self:is_floating_point() then return mid end
  local x = self.p.ndim == 0 and self:reshape({ 1 }) or self
  local count = x:isnan():logical_not():sum(cd + 1, true)   -- the numbers per row (int64)
  if ignore_nan then
    return ((count:double() - 1) / 2):floor():clamp_min(0):long() + 1
  end
  return (count + 1):where(count:lt(n), mid)
end

local function median_dim(fn, self, dim, keepdim, ignore_nan)
  local cd, kd = dim_args(fn, self, dim, keepdim)
  refuse_empty_dim(fn, self, cd)
  return select_sorted(fn, self, cd, kd, median_pos(self, cd, ignore_nan))
end

-- PyTorch's evenly_distribute_backward: the gradient shared among the
-- elements equal to the result (the NaNs, when it is NaN)
local function evenly_backward(n, g)
  local m = n.mask:to(g.dtype)
  return m * (g / m:sum())
end

-- median over all elements: a 0-d tensor
local function median_all(fn, self, ignore_nan)
  local n = self:numel()
  if n == 0 then
    if not self:is_floating_point() then
      raise(('%s: the median of an empty %s tensor is undefined'):format(fn, self.dtype))
    end
    return self:new_full({}, 0 / 0)   -- (PyTorch: nan)
  end
  local x = self:detach():reshape({ n })
  local v = select_sorted(fn, x, 0, true, median_pos(x, 0, ignore_nan)):reshape({}):clone()
  local autograd = require 'lunet.autograd'   -- (loaded after the tensor modules)
  if self.p.grad_flag ~= 0 and autograd.is_grad_enabled() then
    local G = require 'lunet.autograd.graph'
    local s = v:item()
    local node = G.node(evenly_backward, fn, G.edge(self))
    node.mask = s ~= s and self:detach():isnan() or self:detach():eq(v)
    G.attach(v, node)
  end
  return v
end

function Tensor.median(self, dim, keepdim)
  need('median', self)
  if dim == nil and keepdim == nil then return median_all('median', self, false) end
  return median_dim('median', self, dim, keepdim, false)
end

function Tensor.nanmedian(self, dim, keepdim)
  need('nanmedian', self)
  if dim == nil and keepdim == nil then return median_all('nanmedian', self, true) end
  return median_dim('nanmedian', self, dim, keepdim, true)
end

-- kthvalue(k[, dim[, keepdim]]) or kthvalue(k, {dim =, keepdim =}): the k-th smallest
function Tensor.kthvalue(self, k, dim, keepdim)
  local fn = 'kthvalue'
  need(fn, self)
  if type(k) ~= 'number' or k % 1 ~= 0 then
    raise(('%s: k must be an integer, got %s'):format(fn, type(k) == 'number' and tostring(k) or typename(k)))
  end
  local cd, kd = dim_args(fn, self, dim, keepdim)
  local n = size_at(self, cd)
  if k < 1 or k > n then
    raise(('%s: k %s out of range for dim %d of size %d (1 to %d)'):format(fn, tostring(k), cd + 1, n, n))
  end
  return select_sorted(fn, self, cd, kd, k)
end

-- quantile's arguments after q: [dim[, keepdim]][, options]
local function quantile_args(fn, a, b, c)
  local dim, keepdim, o
  if is_table(a) then
    if b ~= nil or c ~= nil then raise(fn .. ': expected the options table last') end
    o = a
  elseif is_table(b) then
    if c ~= nil then raise(fn .. ': expected the options table last') end
    dim, o = a, b
  else
    dim, keepdim, o = a, b, c
    if o ~= nil and not is_table(o) then raise(('%s: options must be a table, got %s'):format(fn, typename(o))) end
  end
  local interpolation = 'linear'
  if o ~= nil then
    o = options.check(fn, o, QUANTILE_OPTS)
    if o.dim ~= nil then
      if dim ~= nil then raise(fn .. ': dim given twice (as an argument and as an option)') end
      dim = o.dim
    end
    if o.keepdim ~= nil then
      if keepdim ~= nil then raise(fn .. ': keepdim given twice (as an argument and as an option)') end
      keepdim = o.keepdim
    end
    if o.interpolation ~= nil then interpolation = o.interpolation end
  end
  if not INTERPOLATIONS[interpolation] then
    raise(("%s: interpolation must be one of linear, lower, higher, midpoint or nearest, got '%s'"):format(
      fn, interpolation))
  end
  return dim, flag(fn, 'keepdim', keepdim, false), interpolation
end

-- q -> a 1-d tensor of self's dtype, and whether q was a scalar
local function quantile_q(fn, self, q)
  if type(q) == 'number' then
    if not (q >= 0 and q <= 1) then raise(('%s: q must be in the range [0, 1], got %s'):format(fn, tostring(q))) end
    return self:new_full({ 1 }, q), true
  end
  if not is_tensor(q) then raise(('%s: q must be a number or a tensor, got %s'):format(fn, typename(q))) end
  if q:dim() > 1 then raise(('%s: q must be a number or a 0-d or 1-d tensor, got a %d-d tensor'):format(fn, q:dim())) end
  if q.dtype ~= self.dtype then
    raise(('%s: q tensor must have the input\'s dtype %s, got %s'):format(fn, self.dtype, q.dtype))
  end
  if q.device ~= self.device then
    raise(('%s: q tensor must be on the input\'s device %s, got %s'):format(fn, self.device, q.device))
  end
  local q1 = q:detach():reshape({ q:numel() })
  if q:numel() > 0 and not q1:ge(0):logical_and(q1:le(1)):all():item() then
    raise(fn .. ': q values must be in the range [0, 1]')
  end
  return q:reshape({ q:numel() }), q:dim() == 0
end

-- PyTorch's lerp: a + w (b - a) below w = 0.5, b - (b - a)(1 - w) from it
local function lerp(a, b, w)
  local d = b - a
  if type(w) == 'number' then return w < 0.5 and a + d * w or b - d * (1 - w) end
  return (a + d * w):where(w:lt(0.5), b - d * (1 - w))
end

-- PyTorch 1.13's quantile (aten/src/ATen/native/Sorting.cpp): sort, ranks
-- q * (n - 1) (NaN rows: the last, a NaN; nanquantile: of the numbers only),
-- then the interpolation between the neighbours
local function quantile(fn, self, q, a, b, c, ignore_nan)
  need(fn, self)
  local dim, keepdim, interpolation = quantile_args(fn, a, b, c)
  local dt = self.dtype
  if dt ~= 'float32' and dt ~= 'float64' then
    raise(('%s: input tensor must be either float or double dtype (float32 or float64), got %s'):format(fn, dt))
  end
  local qs, scalar = quantile_q(fn, self, q)
  local nd = self.p.ndim
  local x, cd
  if dim == nil then
    x, cd = self:reshape({ self:numel() }), 0
  else
    cd = to_cdim(fn, self, dim)
    x = nd == 0 and self:reshape({ 1 }) or self
  end
  if self:numel() == 0 then raise(fn .. ': input tensor must be non-empty') end
  local n = size_at(x, cd)
  local sorted = x:gather(cd + 1, positions(fn, x, cd))
  -- ranks: 0-based positions in the sorted rows, of shape {#q, x's shape with 1 at cd}
  local m = qs:numel()
  local shape, qshape = x:size(), { m }
  shape[cd + 1] = 1
  for i = 1, #shape do qshape[i + 1] = 1 end
  local rshape = { m }
  for i = 1, #shape do rshape[i + 1] = shape[i] end
  local qv = qs:reshape(qshape)   -- (linear interpolation: q gets a gradient, as in PyTorch)
  local ranks
  if ignore_nan then
    local count = x:isnan():logical_not():sum(cd + 1, true):to(dt)
    ranks = (qv * (count - 1)):clamp_min(0)   -- (an all-NaN row: 0, a NaN)
  else
    local has_nan = x:isnan():any(cd + 1, true)
    ranks = (qv * (n - 1)):expand(rshape):where(has_nan:logical_not(), n - 1)
  end
  if interpolation == 'lower' then ranks = ranks:floor()
  elseif interpolation == 'higher' then ranks = ranks:ceil()
  elseif interpolation == 'nearest' then ranks = ranks:round() end   -- (half to even, as PyTorch)
  local below = ranks:floor()
  local rows = sorted:unsqueeze(1):expand(m, unpack(sorted:size()))
  local out = rows:gather(cd + 2, (below:long() + 1):expand(rshape):contiguous())
  if interpolation == 'linear' or interpolation == 'midpoint' then
    local above = rows:gather(cd + 2, (ranks:ceil():long() + 1):expand(rshape):contiguous())
    out = lerp(out, above, interpolation == 'midpoint' and 0.5 or (ranks - below):expand(rshape))
  end
  -- the output's shape: {#q (a tensor q only), the reduced shape}
  local final = {}
  if not scalar then final[1] = m end
  if dim == nil then
    if keepdim then for _ = 1, nd do final[#final + 1] = 1 end end
  elseif nd > 0 then
    for i = 1, nd do
      if i ~= cd + 1 then final[#final + 1] = shape[i] elseif keepdim then final[#final + 1] = 1 end
    end
  end
  return out:reshape(final)
end

function Tensor.quantile(self, q, a, b, c) return quantile('quantile', self, q, a, b, c, false) end
function Tensor.nanquantile(self, q, a, b, c) return quantile('nanquantile', self, q, a, b, c, true) end

return Tensor
