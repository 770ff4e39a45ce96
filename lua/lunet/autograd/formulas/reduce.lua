-- lunet.autograd.formulas.reduce: reductions: sum, mean, prod, max/min/amax/amin, var/std/norm.
local T = require 'lunet.tensor'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local is_tensor = T.is_tensor
local zeros_as = G.zeros_as

return function(def, unary)
  -- ---- reductions ----------------------------------------------------------------------------

  local function reduction(name, scale_by_count)
    def(name, 'reduce', { backward = function(n, g)
      local shape = n.shape
      local r, dim = nil, n.dim
      -- a list of dims (t:sum({3, 4})): sorted 1-based; the empty list is every dim
      if is_table(dim) then
        local ds = {}
        for i = 1, #dim do local d = dim[i]; ds[i] = d < 0 and #shape + d + 1 or d end
        table.sort(ds)
        dim = #ds > 0 and ds or nil
      end
      if dim == nil then
        local ones = {}
        for i = 1, #shape do ones[i] = 1 end
        r = (#shape == 0) and g or g:reshape(ones):expand(shape)
      elseif is_table(dim) then
        if not n.keepdim then for i = 1, #dim do g = g:unsqueeze(dim[i]) end end
        r = g:expand(shape)
      else
        if not n.keepdim then g = g:unsqueeze(dim) end
        r = g:expand(shape)
      end
      if scale_by_count then
        local cnt = 1
        if dim == nil then for i = 1, #shape do cnt = cnt * shape[i] end
        elseif is_table(dim) then for i = 1, #dim do cnt = cnt * shape[dim[i]] end
        else local d = dim; if d < 0 then d = #shape + d + 1 end; cnt = shape[d] end
        r = r / cnt
      end
      -- (sum: the expanded view, as torch's; a kernel that wants it dense
      -- copies it, and interpolate's backward reads it as it is)
      return r
    end })
  end
  reduction('sum', false)
  reduction('mean', true)

  -- prod: d out / d x_i = the product of the other elements of x_i's slice. With
  -- no zero in the slice that is out / x_i; with one zero, the product of the
  -- rest at the zero's position and 0 elsewhere; with two or more, 0.
  def('prod', 'reduce', { save_in = true,
    check = function(a, dim)
      if dim ~= nil and type(dim) ~= 'number' then
        error('prod: the gradient over several dims at once is not supported; reduce one dim at a time', 3)
      end
    end,
    backward = function(n, g)
      local x, dim = n.x, n.dim
      local zero = x:eq(0)
      local rest = x:where(zero:logical_not(), 1)   -- the zeros as ones
      local nz, p
      if dim == nil then
        nz, p = zero:sum(), rest:prod()
        local ones = {}
        for i = 1, x:dim() do ones[i] = 1 end
        if x:dim() > 0 then nz, p, g = nz:reshape(ones), p:reshape(ones), g:reshape(ones) end
      else
        nz, p = zero:sum(dim, true), rest:prod(dim, true)
        if not n.keepdim then g = g:unsqueeze(dim) end
      end
      local others = (p / x):where(nz:eq(0), p:where(zero, 0):where(nz:eq(1), 0))
      return g * others
    end })

  -- max/min/amax/amin: over all elements the gradient is shared evenly among
  -- the tied maxima (as PyTorch's amax); over a dim it goes to the returned index
  local function extreme_bw(n, g)
    local a, r = n.a, n.r
    if n.idx then
      local idx, gg = n.idx, g
      if not n.keepdim then idx = idx:unsqueeze(n.dim); gg = g:unsqueeze(n.dim) end
      return zeros_as(n.shape, g):scatter_add_(n.dim, idx, gg)
    end
    local rr, gg = r, g
    if is_table(n.dim) and not n.keepdim then   -- (amax/amin over a list of dims: each put back, ascending)
      local nd, ds = #n.shape, {}
      for i = 1, #n.dim do local d = n.dim[i]; ds[i] = d < 0 and nd + d + 1 or d end
      table.sort(ds)
      for i = 1, #ds do rr = rr:unsqueeze(ds[i]); gg = gg:unsqueeze(ds[i]) end
    elseif n.dim ~= nil and not n.keepdim then rr = r:unsqueeze(n.dim); gg = g:unsqueeze(n.dim) end
    local mask = a:eq(rr):to(g.dtype)
    local count = n.dim == nil and S.raw.sum(mask) or S.raw.sum(mask, n.dim, true)
    return mask * gg / count
  end
  for _, name in ipairs({ 'max', 'min', 'amax', 'amin' }) do def(name, 'extreme', { backward = extreme_bw }) end

  -- var/std/norm while recording: computed from differentiable ops (the
  -- plain kernels run otherwise), so they need no formula of their own.
  -- Arguments parsed as lunet.tensor_reduce does.
  local function spread_args(dim, opt, keepdim)
    -- (a list of dims is dims, an options table is options: the list {2, 3} was read as options)
    if type(dim) == 'boolean' or is_table(dim) and (dim[1] == nil and next(dim) ~= nil) then
      dim, opt, keepdim = nil, dim, opt
    end
    local corr = 1
    if is_table(opt) then
      if opt.correction ~= nil then corr = opt.correction elseif opt.unbiased == false then corr = 0 end
      if keepdim == nil then keepdim = opt.keepdim end
    elseif type(opt) == 'boolean' then corr = opt and 1 or 0
    elseif type(opt) == 'number' then corr = opt end
    return dim, corr, keepdim
  end

  local function var_graph(a, dim, corr, keepdim)
    local d
    if dim == nil then d = a - a:mean() else d = a - a:mean(dim, true) end
    local n = dim == nil and a:numel() or not is_table(dim) and a:size(dim) or 1
    if is_table(dim) then for i = 1, #dim do n = n * a:size(dim[i]) end end
    if is_table(dim) and #dim == 0 then n = a:numel() end
    local s = dim == nil and (d * d):sum() or (d * d):sum(dim, keepdim)
    return s / math.max(n - corr, 0)
  end

  def('var', 'custom', { make = function(orig)
    return function(a, dim, opt, keepdim)
      if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim, opt, keepdim) end
      return var_graph(a, spread_args(dim, opt, keepdim))
    end
  end })
  def('std', 'custom', { make = function(orig)
    return function(a, dim, opt, keepdim)
      if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim, opt, keepdim) end
      return var_graph(a, spread_args(dim, opt, keepdim)):sqrt()
    end
  end })
  def('norm', 'custom', { make = function(orig)
    return function(a, p, dim, keepdim)
      if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, p, dim, keepdim) end
      if p == nil or p == 'fro' then p = 2 end
      if type(p) ~= 'number' or p <= 0 or p == math.huge then
        if p == math.huge then return a:abs():amax(dim, keepdim) end
        return orig(a, p, dim, keepdim)
      end
      -- (the root's derivative is infinite at a zero sum, and |a|^p's at a
      -- zero entry when p < 1: both kept out of the root and the power by
      -- masked fills, so a zero norm has the zero gradient torch gives)
      local x
      if p == 2 then x = a * a
      elseif p >= 1 then x = a:abs():pow(p)
      else
        local absa = a:abs()
        local z = absa:eq(0)
        x = absa:masked_fill(z, 1):pow(p):masked_fill(z, 0)
      end
      local s = dim == nil and x:sum() or x:sum(dim, keepdim)
      local z = s:eq(0)
      s = s:masked_fill(z, 1)
      return (p == 2 and s:sqrt() or s:pow(1 / p)):masked_fill(z, 0)
    end
  end })
end
