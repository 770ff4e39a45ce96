-- lunet.tensor_scatter_reduce: torch 1.13's scatter_reduce and index_reduce
-- over the C kernel ln_scatter_reduce_ (sum, prod, amax, amin; mean is its
-- sum over the count), dims and indices 1-based:
--   t:scatter_reduce(dim, index, src, reduce[, {include_self = true}])
--       out[.. index[i..] ..] = reduce(t's there (when include_self), src[i..] ...)
--   t:index_reduce(dim, index, source, reduce[, {include_self = true}])
--       source's slices reduced into the slices index (1-d) names along dim
-- reduce: 'sum', 'prod', 'mean', 'amax', 'amin' (index_reduce: not 'sum').
-- amax/amin propagate NaN; integer 'mean' rounds down, as torch. Both are
-- differentiable in t and src with torch's formulas (prod: zeros counted;
-- amax/amin: the gradient split evenly among the elements equal to the result).
local core = require 'lunet.core'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local AG = require 'lunet.autograd'
local Tensor, wrap, check, is_tensor, cdim = T.Tensor, T.wrap, T.check, T.is_tensor, T.cdim
local raise, typename, C = options.raise, core.typename, core.C

local OPS = { sum = C.LN_SCATTER_SUM, prod = C.LN_SCATTER_PROD, amax = C.LN_SCATTER_AMAX,
  amin = C.LN_SCATTER_AMIN, mean = C.LN_SCATTER_SUM }
local OPTS = { include_self = 'boolean' }

local named = options.named   -- (an error inside names the method called)

local need = options.need_tensor

-- index: an int64/int32 tensor, or a (nested) Lua table of 1-based indices
local function index_of(fn, self, index)
  if type(index) == 'table' and not is_tensor(index) then
    return factory.tensor(index, { dtype = 'int64', device = self.device })
  end
  return need(fn, index, 'index')
end

-- self reduced with src at index (1-based, long), no autograd: a new tensor
local function raw(self, d, index, src, op, incl)
  local out = self:detach():clone()
  check(C.ln_scatter_reduce_(out.p, d - 1, (index - 1).p, src:detach().p, op, incl and 1 or 0))
  return out
end

local function forward(self, d, index, src, reduce, incl)
  local out = raw(self, d, index, src, OPS[reduce], incl)
  if reduce ~= 'mean' then return out end
  local count = (incl and factory.ones_like or factory.zeros_like)(self)
  count = raw(count, d, index, factory.ones_like(src), C.LN_SCATTER_SUM, true)
  count = count:masked_fill(count:eq(0), 1)
  if self:is_floating_point() then return out / count end
  return out:floor_divide(count)
end

-- torch 1.13's scatter_reduce_backward
local function backward(n, g)
  local x, s, idx, r, d, reduce = n.x, n.s, n.index, n.r, n.dim, n.reduce
  local gx, gs
  if reduce == 'sum' then gx, gs = g, g:gather(d, idx)
  elseif reduce == 'mean' then
    local N = (n.incl and factory.ones_like or factory.zeros_like)(g):scatter_add(d, idx, factory.ones_like(s))
    N = N:masked_fill(N:eq(0), 1)
    gx, gs = g / N, g:gather(d, idx) / N:gather(d, idx)
  elseif reduce == 'prod' then
    local mx = x:masked_fill(x:eq(0), 1)
    gx = g * mx:scatter_reduce(d, idx, s, 'prod', { include_self = n.incl }) / mx
    local sz = s:eq(0)
    local nz = factory.zeros_like(x):scatter_add(d, idx, sz:to(x.dtype)):gather(d, idx)
    local single = sz:logical_and(nz:eq(1))
    local ms = x:scatter_reduce(d, idx, s:masked_fill(single, 1), 'prod', { include_self = n.incl })
    gs = (g * ms):gather(d, idx):where(single, (g * r):gather(d, idx) / s:masked_fill(sz, 1))
  else
    local value = r:gather(d, idx)
    local xr, sr = x:eq(r):to(x.dtype), s:eq(value):to(x.dtype)
    local dist = g / xr:scatter_add(d, idx, sr)
    gx, gs = xr * dist, sr * dist:gather(d, idx)
  end
  if not n.incl then gx = gx:scatter(d, idx, 0) end
  local full, same = n.src_shape, true
  for i = 1, #full do same = same and full[i] == idx:size(i) end
  if n[2] and not same then
    -- (index smaller than src: src's elements past it get no gradient)
    local z = factory.zeros(full, { dtype = gs.dtype, device = gs.device })
    local v = z
    for i = 1, #full do v = v:narrow(i, 1, idx:size(i)) end
    v:copy_(gs)
    gs = z
  end
  return n[1] and gx or nil, n[2] and gs or nil
end

local function scatter_reduce(fn, self, dim, index, src, reduce, opts)
  need(fn, self, 'input')
  need(fn, src, 'src')
  index = index_of(fn, self, index)
  if type(reduce) ~= 'string' then
    raise(fn .. ": reduce must be one of 'sum', 'prod', 'mean', 'amax', 'amin', got " .. typename(reduce))
  end
  if not OPS[reduce] then raise(("%s: unknown reduce '%s' (one of 'sum', 'prod', 'mean', 'amax', 'amin')"):format(fn, reduce)) end
  local incl = (options.check(fn, opts, OPTS) or {}).include_self ~= false
  if index.dtype ~= 'int64' and index.dtype ~= 'int32' then
    raise(('%s: index must be an int64 (or int32) tensor, got %s'):format(fn, index.dtype))
  end
  if src.dtype ~= self.dtype then raise(('%s: src must have the input\'s dtype %s, got %s'):format(fn, self.dtype, src.dtype)) end
  local zd = self:dim() == 0
  local x = zd and self:reshape({ 1 }) or self
  local d = cdim(fn, x, dim) + 1
  local idx = index:detach():long()
  if idx:dim() == 0 then idx = idx:reshape({ 1 }) end
  local s = src:dim() == 0 and src:reshape({ 1 }) or src
  local out = forward(x, d, idx, s, reduce, incl)
  if zd then out = out:reshape({}) end
  if not (AG.is_grad_enabled() and (AG.needs(self) or AG.needs(src))) then return out end
  if not self:is_floating_point() then return out end
  local node = AG.node(backward, fn, AG.edge(x), AG.edge(s))
  local su = s:detach()   -- (the part of src index reaches: the gradient's formulas read only it)
  for i = 1, su:dim() do if su:size(i) ~= idx:size(i) then su = su:narrow(i, 1, idx:size(i)) end end
  node.src_shape = s:size()
  node.x, node.s, node.index, node.r = AG.saved(x:detach()), AG.saved(su), AG.saved(idx), AG.saved(out:detach())
  node.dim, node.reduce, node.incl = d, reduce, incl
  return AG.attach(out, node)
end

Tensor.scatter_reduce = named('scatter_reduce', function(self, dim, index, src, reduce, opts)
  return scatter_reduce('scatter_reduce', self, dim, index, src, reduce, opts)
end)

-- index_reduce: scatter_reduce with index expanded over source's shape
Tensor.index_reduce = named('index_reduce', function(self, dim, index, source, reduce, opts)
  local fn = 'index_reduce'
  need(fn, self, 'input')
  need(fn, source, 'source')
  index = index_of(fn, self, index)
  if reduce == 'sum' then raise(fn .. ": unknown reduce 'sum' (one of 'prod', 'mean', 'amax', 'amin'; or use index_add)") end
  if index:dim() > 1 then raise(('%s: index must be 0-d or 1-d, got %d-d'):format(fn, index:dim())) end
  local x = self:dim() == 0 and self:reshape({ 1 }) or self
  local s = source:dim() == 0 and source:reshape({ 1 }) or source
  local d = cdim(fn, x, dim) + 1
  local want = x:size()
  want[d] = index:numel()
  local got, ok = s:size(), s:dim() == x:dim()
  for i = 1, #want do ok = ok and got[i] == want[i] end
  if not ok then
    raise(('%s: source must have shape {%s} (the input\'s, with the index\'s length along dim %d), got {%s}')
      :format(fn, table.concat(want, ','), d, table.concat(source:size(), ',')))
  end
  local ishape = {}
  for i = 1, #want do ishape[i] = i == d and want[i] or 1 end
  local idx = index:reshape(ishape):expand(want)
  local out = scatter_reduce(fn, x, d, idx, s, reduce, opts)
  return self:dim() == 0 and out:reshape({}) or out
end)

return Tensor
