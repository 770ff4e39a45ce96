-- lunet.tensor_reduce: reductions as Tensor methods, with PyTorch's names and
-- 1-based dims: t:sum(), t:sum(2), t:sum(2, true) (keepdim), t:mean(dim),
-- t:max() (0-d), t:max(dim) -> values, indices (1-based int64), t:max(u)
-- (elementwise maximum), t:argmax([dim]), t:var(dim, {correction = 0}),
-- t:std(), t:norm([p[, dim[, keepdim]]]), t:any(), t:all().
-- sum, mean, prod, any, all, amax, amin, var, std and norm also take a list
-- of dims: t:mean({3, 4}).
local ffi = require 'ffi'
local core = require 'lunet.core'
local raise = require('lunet.options').raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local C = core.C
local Tensor, wrap, is_tensor = T.Tensor, T.wrap, T.is_tensor

local idx_box = ffi.new('ln_tensor*[1]')

local need_tensor = require('lunet.options').need_tensor
-- (the C tensor of the input x)
local function need(fn, x) return need_tensor(fn, x).p end

local function keepdim_flag(fn, k)
  if k == nil or k == false then return 0 end
  if k == true then return 1 end
  raise(('%s: keepdim must be a boolean, got %s'):format(fn, typename(k)))
end

-- 1-based (or negative) dim -> C dim
local function to_cdim(fn, t, d)
  if type(d) ~= 'number' or d % 1 ~= 0 then
    raise(('%s: dim must be an integer or a list of dims, got %s'):format(fn, tostring(d)))
  end
  local n = t.p.ndim
  local c = d < 0 and n + d or d - 1
  if c < 0 or c >= n then
    raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, d, n))
  end
  return c
end

T.to_cdim = to_cdim   -- (lunet.tensor_compose's dims too)

local perm_buf, shape_buf = ffi.new('int[8]'), ffi.new('int64_t[8]')

-- Reduce over several dims {d1, d2, ...}: move them last, merge them into one
-- (a view when the layout allows, else a copy), reduce that one.
local function over_dims(fn, op, self, dims, keepdim, p)
  local t = self.p
  local nd, red, k = t.ndim, {}, 0
  if #dims == 0 then return wrap(C.ln_reduce(op, t, -1, keepdim, p, nil)) end
  for i = 1, #dims do
    local d = to_cdim(fn, self, dims[i])
    if red[d] then raise(('%s: dim %d appears twice'):format(fn, d + 1)) end
    red[d] = true
  end
  local n = 1
  for d = 0, nd - 1 do
    if not red[d] then perm_buf[k] = d; shape_buf[k] = t.shape[d]; k = k + 1 end
  end
  local kept = k
  for d = 0, nd - 1 do
    if red[d] then perm_buf[k] = d; k = k + 1; n = n * tonumber(t.shape[d]) end
  end
  shape_buf[kept] = n
  local x = wrap(C.ln_permute(t, nd, perm_buf))
  x = wrap(C.ln_reshape(x.p, kept + 1, shape_buf))
  local r = wrap(C.ln_reduce(op, x.p, kept, 0, p, nil))
  if keepdim == 1 then
    for d = 0, nd - 1 do shape_buf[d] = red[d] and 1 or t.shape[d] end
    r = wrap(C.ln_view(r.p, nd, shape_buf))
  end
  return r
end

-- the common path of every entry point: called (not tail-called) by it
local function reduce(fn, op, self, dim, keepdim, p)
  local kd
  if keepdim == nil or keepdim == false then kd = 0
  elseif keepdim == true then kd = 1
  else raise(('%s: keepdim must be a boolean, got %s'):format(fn, typename(keepdim))) end
  if is_table(dim) then return over_dims(fn, op, self, dim, kd, p) end
  local cd = dim == nil and -1 or to_cdim(fn, self, dim)
  return wrap(C.ln_reduce(op, self.p, cd, kd, p, nil))
end

-- t:sum([dim[, keepdim]]); dim may be a list of dims: t:sum({3, 4})
local function reducer(name, op)
  return function(self, dim, keepdim)
    need(name, self)
    local r = reduce(name, op, self, dim, keepdim, 0)
    return r
  end
end

Tensor.sum = reducer('sum', C.LN_RSUM)
Tensor.mean = reducer('mean', C.LN_RMEAN)
Tensor.prod = reducer('prod', C.LN_RPROD)
Tensor.any = reducer('any', C.LN_RANY)
Tensor.all = reducer('all', C.LN_RALL)
-- amax/amin: max/min values only; the C message names max/min, so rename it
local function renamed(name, inner)
  local f = reducer(inner, name == 'amax' and C.LN_RMAX or C.LN_RMIN)
  return function(self, dim, keepdim)
    local ok, r = pcall(f, self, dim, keepdim)
    if ok then return r end
    raise((tostring(r):gsub('^.-' .. inner .. ':', name .. ':', 1)))
  end
end
Tensor.amax = renamed('amax', 'max')
Tensor.amin = renamed('amin', 'min')

-- max/min: no dim -> 0-d tensor; dim -> values, indices (1-based); tensor -> elementwise
local function extreme(name, op, elementwise)
  return function(self, dim, keepdim)
    local p = need(name, self)
    if is_tensor(dim) then return elementwise(self, dim) end
    if dim == nil then return wrap(C.ln_reduce(op, p, -1, 0, 0, nil)) end
    local values = C.ln_reduce(op, p, to_cdim(name, self, dim), keepdim_flag(name, keepdim), 0, idx_box)
    local v = wrap(values)
    local idx = wrap(idx_box[0])
    return v, idx:add_(1)
  end
end
Tensor.max = extreme('max', C.LN_RMAX, function(a, b) return Tensor.maximum(a, b) end)
Tensor.min = extreme('min', C.LN_RMIN, function(a, b) return Tensor.minimum(a, b) end)

local function arg(name, op)
  return function(self, dim, keepdim)
    local p = need(name, self)
    local cd = dim == nil and -1 or to_cdim(name, self, dim)
    local r = wrap(C.ln_reduce(op, p, cd, keepdim_flag(name, keepdim), 0, nil))
    return r:add_(1)
  end
end
Tensor.argmax = arg('argmax', C.LN_RARGMAX)
Tensor.argmin = arg('argmin', C.LN_RARGMIN)

-- var/std: t:var(), t:var(dim), t:var(dim, unbiased[, keepdim]),
-- t:var(dim, {correction = c, keepdim = k}), t:var({correction = 0}), t:var(false)
local SPREAD_OPTS = { correction = 'number', unbiased = 'boolean', keepdim = 'boolean' }
local function spread(name, op)
  return function(self, dim, opt, keepdim)
    local p = need(name, self)
    if type(dim) == 'boolean' or is_table(dim) and (dim[1] == nil and next(dim) ~= nil) then
      dim, opt, keepdim = nil, dim, opt
    end
    local corr = 1
    if is_table(opt) then
      require('lunet.options').check(name, opt, SPREAD_OPTS)
      if opt.correction ~= nil then corr = opt.correction
      elseif opt.unbiased == false then corr = 0 end
      if keepdim == nil then keepdim = opt.keepdim end
    elseif type(opt) == 'boolean' then corr = opt and 1 or 0
    elseif type(opt) == 'number' then corr = opt
    elseif opt ~= nil then
      raise(('%s: expected a boolean (unbiased) or an options table, got %s'):format(name, typename(opt)))
    end
    if type(corr) ~= 'number' then raise(name .. ': correction must be a number') end
    local r = reduce(name, op, self, dim, keepdim, corr)
    return r
  end
end
Tensor.var = spread('var', C.LN_RVAR)
Tensor.std = spread('std', C.LN_RSTD)

-- norm(p = 2, dim = all, keepdim = false); p may be a number, math.huge, -math.huge or 'fro'
function Tensor.norm(self, p, dim, keepdim)
  local tp = need('norm', self)
  if p == nil or p == 'fro' then p = 2 end
  if type(p) ~= 'number' then raise('norm: p must be a number or "fro", got ' .. tostring(p)) end
  local r = reduce('norm', C.LN_RNORM, self, dim, keepdim, p)
  return r
end

return Tensor
