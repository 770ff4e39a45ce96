-- lunet.tensor_compose: Tensor methods PyTorch users reach for that are a
-- few of lunet's ops put together, so they differentiate through those ops:
--   t:softmax(dim), t:log_softmax(dim)          (nn.functional's)
--   t:lerp(e, w), t:lerp_(e, w)                 t + w * (e - t); w a number or a tensor
--   t:addcmul(a, b[, value]), t:addcdiv(a, b[, value]) and their in-place forms
--                                               t + value * a * b, t + value * a / b
--   t:masked_fill(mask, v), t:masked_fill_(mask, v)   v where mask (bool) is true
--   t:flip(dims), t:roll(shifts[, dims]), t:tril([k]), t:triu([k]), t:tile(reps...)
--                                               (t:tile is PyTorch's t.repeat, a Lua keyword)
--   t:logsumexp(dims[, keepdim]), t:count_nonzero([dims]), t:dist(u[, p]), t:outer(u)
--   t:clamp_min(v), t:clamp_max(v), t:isfinite(), t:nan_to_num([nan[, posinf[, neginf]]])
--   t:new_zeros(size), t:new_ones(size), t:new_full(size, v), t:new_empty(size)
--                                               t's dtype and device unless given
-- Dims are 1-based, negative from the end, as everywhere in lunet.
local core = require 'lunet.core'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local Tensor, is_tensor = T.Tensor, T.is_tensor
local is_table, typename = core.is_table, core.typename
local raise = options.raise

local function F() return require('lunet.nn.functional') end
local function L() return require('lunet') end

local need = options.need_tensor
local function number_or_tensor(fn, v, what)
  if type(v) ~= 'number' and not is_tensor(v) then
    raise(('%s: %s must be a number or a tensor, got %s'):format(fn, what, typename(v)))
  end
  return v
end
-- a 1-based (or negative) dim of t, checked
require 'lunet.tensor_reduce'   -- (T.to_cdim: a dim checked as the reductions check theirs)
local function dim_of(fn, t, d) return T.to_cdim(fn, t, d) + 1 end
-- a dim or a list of dims -> list of distinct 1-based dims
local function dims_of(fn, t, dims)
  local list = is_table(dims) and dims or { dims }
  local out, seen = {}, {}
  for i = 1, #list do
    local d = dim_of(fn, t, list[i])
    if seen[d] then raise(('%s: dim %d appears twice'):format(fn, d)) end
    out[i], seen[d] = d, true
  end
  return out
end

function Tensor.softmax(self, dim) return F().softmax(self, dim) end
function Tensor.log_softmax(self, dim) return F().log_softmax(self, dim) end

function Tensor.lerp(self, e, w)
  need('lerp', e, 'end')
  number_or_tensor('lerp', w, 'weight')
  return self + (e - self) * w
end
function Tensor.lerp_(self, e, w)
  need('lerp_', e, 'end')
  number_or_tensor('lerp_', w, 'weight')
  return self:add_((e - self) * w)
end

local function value_of(fn, value)
  if value == nil then return 1 end
  if is_table(value) then
    options.check(fn, value, { value = 'number' })
    return value.value == nil and 1 or value.value
  end
  if type(value) ~= 'number' then raise(('%s: value must be a number, got %s'):format(fn, typename(value))) end
  return value
end
local function addc(name, combine, inplace)
  return function(self, a, b, value)
    need(name, a, 'tensor1'); need(name, b, 'tensor2')
    local term = combine(a, b) * value_of(name, value)
    if inplace then return self:add_(term) end
    return self + term
  end
end
local function mul(a, b) return a * b end
local function div(a, b) return a / b end
Tensor.addcmul, Tensor.addcmul_ = addc('addcmul', mul), addc('addcmul_', mul, true)
Tensor.addcdiv, Tensor.addcdiv_ = addc('addcdiv', div), addc('addcdiv_', div, true)

local function mask_of(fn, mask)
  need(fn, mask, 'mask')
  if mask.dtype ~= 'bool' then raise(('%s: mask must be a bool tensor, got %s'):format(fn, mask.dtype)) end
  return mask
end
function Tensor.masked_fill(self, mask, v)
  mask_of('masked_fill', mask)
  number_or_tensor('masked_fill', v, 'value')
  return Tensor.where(v, mask, self)
end
function Tensor.masked_fill_(self, mask, v)
  mask_of('masked_fill_', mask)
  number_or_tensor('masked_fill_', v, 'value')
  return self:copy_(Tensor.where(v, mask, self))
end

-- the indices n..1 (1-based), on t's device
local function reversed(t, n)
  return L().arange(n, 0, -1, { device = t.device })
end
function Tensor.flip(self, dims)
  if dims == nil then raise('flip: dims (a dim or a list of dims) is required') end
  local out = self
  for _, d in ipairs(dims_of('flip', self, dims)) do out = out:index_select(d, reversed(self, self:size(d))) end
  return out
end

function Tensor.roll(self, shifts, dims)
  if dims == nil then
    if type(shifts) ~= 'number' then raise('roll: without dims, shifts must be one integer, got ' .. typename(shifts)) end
    local r = self:reshape(-1):roll(shifts, 1):view(self:size())
    return r
  end
  local sh = is_table(shifts) and shifts or { shifts }
  local ds = dims_of('roll', self, dims)
  if #sh ~= #ds then raise(('roll: %d shifts for %d dims'):format(#sh, #ds)) end
  local out = self
  for i, d in ipairs(ds) do
    local s = sh[i]
    if type(s) ~= 'number' or s % 1 ~= 0 then raise('roll: shifts must be integers, got ' .. tostring(s)) end
    local n = out:size(d)
    s = n > 0 and s % n or 0
    if s ~= 0 then out = L().cat({ out:narrow(d, n - s + 1, s), out:narrow(d, 1, n - s) }, d) end
  end
  return out
end

-- the (rows x cols) bool mask of col - row compared with k by cmp
local function band(fn, t, k, cmp)
  if t:dim() < 2 then raise(('%s: needs at least 2 dims, got %d'):format(fn, t:dim())) end
  k = k or 0
  if type(k) ~= 'number' or k % 1 ~= 0 then raise(('%s: diagonal must be an integer, got %s'):format(fn, tostring(k))) end
  local r, c = t:size(-2), t:size(-1)
  local lunet = L()
  local rows = lunet.arange(r, { device = t.device }):view(r, 1)
  local cols = lunet.arange(c, { device = t.device }):view(1, c)
  local d = cols - rows
  return Tensor.where(t, d[cmp](d, k), 0)
end
function Tensor.tril(self, k) return band('tril', self, k, 'le') end
function Tensor.triu(self, k) return band('triu', self, k, 'ge') end

function Tensor.tile(self, ...)
  local reps = select('#', ...) == 1 and is_table((...)) and (...) or { ... }
  if #reps == 0 then raise('tile: expected the repetitions per dim, e.g. t:tile(2, 3)') end
  for i = 1, #reps do
    local r = reps[i]
    if type(r) ~= 'number' or r % 1 ~= 0 or r < 0 or r > 2 ^ 53 then raise(('tile: repetitions must be integers >= 0, got %s'):format(tostring(r))) end
  end
  local n = math.max(#reps, self:dim())
  local size, view, expand, final = self:size(), {}, {}, {}
  for i = 1, n do
    local s = size[i - (n - self:dim())] or 1
    local r = reps[i - (n - #reps)] or 1
    view[2 * i - 1], view[2 * i] = 1, s
    expand[2 * i - 1], expand[2 * i] = r, s
    final[i] = r * s
  end
  return self:reshape(view):expand(expand):reshape(final)
end

function Tensor.logsumexp(self, dims, keepdim)
  if dims == nil then raise('logsumexp: dims (a dim or a list of dims) is required') end
  if keepdim ~= nil and type(keepdim) ~= 'boolean' then raise('logsumexp: keepdim must be a boolean, got ' .. typename(keepdim)) end
  -- (shifted by the maximum, which cancels: no overflow; an all -inf row's maximum taken as 0)
  local m = self:amax(dims, true):detach()
  m = Tensor.where(0, m:isinf(), m)
  local r = (self - m):exp():sum(dims, true):log() + m
  if keepdim then return r end
  local ds = dims_of('logsumexp', self, dims)
  table.sort(ds, function(a, b) return a > b end)
  for _, d in ipairs(ds) do r = r:squeeze(d) end
  return r
end

function Tensor.count_nonzero(self, dims)
  local nz = self:ne(0)
  if dims == nil then return nz:sum() end
  return nz:sum(dims)
end

function Tensor.dist(self, other, p)
  need('dist', other, 'other')
  return (self - other):norm(p or 2)
end

function Tensor.outer(self, other)
  need('outer', other, 'other')
  if self:dim() ~= 1 or other:dim() ~= 1 then
    raise(('outer: needs two 1-d tensors, got %d-d and %d-d'):format(self:dim(), other:dim()))
  end
  return self:view(-1, 1) * other:view(1, -1)
end

function Tensor.clamp_min(self, v)
  if type(v) ~= 'number' then raise('clamp_min: min must be a number, got ' .. typename(v)) end
  return self:clamp(v, nil)
end
function Tensor.clamp_max(self, v)
  if type(v) ~= 'number' then raise('clamp_max: max must be a number, got ' .. typename(v)) end
  return self:clamp(nil, v)
end

local FLOAT_MAX = { float32 = 3.4028234663852886e38, float64 = 1.7976931348623157e308, float16 = 65504,
  bfloat16 = 3.3895313892515355e38 }
function Tensor.isfinite(self)
  if not FLOAT_MAX[self.dtype] then return L().ones_like(self, { dtype = 'bool' }) end
  return self:isnan():logical_or(self:isinf()):logical_not()
end
local function finite(fn, v, what)
  if v ~= nil and (type(v) ~= 'number' or v ~= v) then raise(('%s: %s must be a number, got %s'):format(fn, what, tostring(v))) end
  return v
end
function Tensor.nan_to_num(self, nan, posinf, neginf)
  local big = FLOAT_MAX[self.dtype]
  nan, posinf, neginf = finite('nan_to_num', nan, 'nan'), finite('nan_to_num', posinf, 'posinf'), finite('nan_to_num', neginf, 'neginf')
  if not big then return self:clone() end
  local out = Tensor.where(nan or 0, self:isnan(), self)
  out = Tensor.where(posinf or big, out:eq(math.huge), out)
  return Tensor.where(neginf or -big, out:eq(-math.huge), out)
end
function Tensor.nan_to_num_(self, nan, posinf, neginf) return self:copy_(self:nan_to_num(nan, posinf, neginf)) end

-- t:new_zeros(2, 3), t:new_zeros({2, 3}[, {dtype =, device =, requires_grad =}]): t's
-- dtype and device unless the options say otherwise
local function with_defaults(self, opts)
  local o = {}
  if opts ~= nil then
    if not is_table(opts) then raise('new_*: options must be a table, got ' .. typename(opts)) end
    for k, v in pairs(opts) do o[k] = v end
  end
  if o.dtype == nil then o.dtype = self.dtype end
  if o.device == nil then o.device = self.device end
  return o
end
local function new_of(factory)
  return function(self, ...)
    local n = select('#', ...)
    local args = { ... }
    local last = args[n]
    if n >= 1 and is_table(last) and last[1] == nil and next(last) ~= nil then
      args[n] = with_defaults(self, last)
    else
      n = n + 1
      args[n] = with_defaults(self, nil)
    end
    return L()[factory](unpack(args, 1, n))
  end
end
Tensor.new_zeros, Tensor.new_ones, Tensor.new_empty = new_of('zeros'), new_of('ones'), new_of('empty')
function Tensor.new_full(self, size, value, opts) return L().full(size, value, with_defaults(self, opts)) end

-- An error from an op inside names the method called, at the caller's line
-- ("addcdiv: shapes {3,4} and {3} cannot broadcast", not div's)
local COMPOSED = { 'softmax', 'log_softmax', 'lerp', 'lerp_', 'addcmul', 'addcmul_', 'addcdiv', 'addcdiv_',
  'masked_fill', 'masked_fill_', 'flip', 'roll', 'tril', 'triu', 'tile', 'logsumexp', 'count_nonzero', 'dist',
  'outer', 'clamp_min', 'clamp_max', 'isfinite', 'nan_to_num', 'nan_to_num_', 'new_zeros', 'new_ones',
  'new_empty', 'new_full' }
local named = options.named   -- (an error inside names the method called)
for _, name in ipairs(COMPOSED) do Tensor[name] = named(name, Tensor[name]) end
