-- lunet.tensor_reduce: reductions as Tensor methods, with PyTorch's names and
-- 1-based dims: t:sum(), t:sum(2), t:sum(2, true) (keepdim), t:mean(dim),
-- t:max() (0-d), t:max(dim) -> values, indices (1-based int64), t:max(u)
-- (elementwise maximum), t:argmax([dim]), t:var(dim, {correction = 0}),
-- t:std(), t:norm([p[, dim[, keepdim]]]), t:any(), t:all().
local ffi = require 'ffi'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local C = core.C
local Tensor, wrap, is_tensor, cdim = T.Tensor, T.wrap, T.is_tensor, T.cdim

local idx_box = ffi.new('ln_tensor*[1]')

local function need(fn, x)
  if not is_tensor(x) then error(('%s: input must be a tensor, got %s'):format(fn, type(x)), 3) end
  return x.p
end

local function keepdim_flag(fn, k)
  if k == nil or k == false then return 0 end
  if k == true then return 1 end
  error(('%s: keepdim must be a boolean, got %s'):format(fn, type(k)), 3)
end

-- dim (1-based, negative from the end, nil = all elements) -> C dim
local function rdim(fn, t, dim)
  if dim == nil then return -1 end
  return cdim(fn, t, dim)
end

local function reducer(name, op)
  return function(self, dim, keepdim)
    local p = need(name, self)
    return wrap(C.ln_reduce(op, p, rdim(name, self, dim), keepdim_flag(name, keepdim), 0, nil))
  end
end

Tensor.sum = reducer('sum', C.LN_RSUM)
Tensor.mean = reducer('mean', C.LN_RMEAN)
Tensor.prod = reducer('prod', C.LN_RPROD)
Tensor.any = reducer('any', C.LN_RANY)
Tensor.all = reducer('all', C.LN_RALL)
Tensor.amax = reducer('amax', C.LN_RMAX)
Tensor.amin = reducer('amin', C.LN_RMIN)

-- max/min: no dim -> 0-d tensor; dim -> values, indices (1-based); tensor -> elementwise
local function extreme(name, op, elementwise)
  return function(self, dim, keepdim)
    local p = need(name, self)
    if is_tensor(dim) or type(dim) == 'number' and dim % 1 ~= 0 then return elementwise(self, dim) end
    if dim == nil then return wrap(C.ln_reduce(op, p, -1, 0, 0, nil)) end
    local values = C.ln_reduce(op, p, rdim(name, self, dim), keepdim_flag(name, keepdim), 0, idx_box)
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
    local r = wrap(C.ln_reduce(op, p, rdim(name, self, dim), keepdim_flag(name, keepdim), 0, nil))
    return r:add_(1)
  end
end
Tensor.argmax = arg('argmax', C.LN_RARGMAX)
Tensor.argmin = arg('argmin', C.LN_RARGMIN)

-- var/std: t:var(), t:var(dim), t:var(dim, unbiased[, keepdim]),
-- t:var(dim, {correction = c, keepdim = k}), t:var({correction = 0}), t:var(false)
local function spread(name, op)
  return function(self, dim, opt, keepdim)
    local p = need(name, self)
    if type(dim) == 'table' or type(dim) == 'boolean' then dim, opt, keepdim = nil, dim, opt end
    local corr = 1
    if type(opt) == 'table' then
      if opt.correction ~= nil then corr = opt.correction
      elseif opt.unbiased == false then corr = 0 end
      if keepdim == nil then keepdim = opt.keepdim end
    elseif type(opt) == 'boolean' then corr = opt and 1 or 0
    elseif type(opt) == 'number' then corr = opt
    elseif opt ~= nil then
      error(('%s: expected a boolean (unbiased) or an options table, got %s'):format(name, type(opt)), 2)
    end
    if type(corr) ~= 'number' then error(name .. ': correction must be a number', 2) end
    return wrap(C.ln_reduce(op, p, rdim(name, self, dim), keepdim_flag(name, keepdim), corr, nil))
  end
end
Tensor.var = spread('var', C.LN_RVAR)
Tensor.std = spread('std', C.LN_RSTD)

-- norm(p = 2, dim = all, keepdim = false); p may be a number, math.huge, -math.huge or 'fro'
function Tensor.norm(self, p, dim, keepdim)
  local tp = need('norm', self)
  if p == nil or p == 'fro' then p = 2 end
  if type(p) ~= 'number' then error('norm: p must be a number or "fro", got ' .. tostring(p), 2) end
  return wrap(C.ln_reduce(C.LN_RNORM, tp, rdim('norm', self, dim), keepdim_flag('norm', keepdim), p, nil))
end

return Tensor
