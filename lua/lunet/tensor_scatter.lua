-- lunet.tensor_scatter: PyTorch 1.13's indexed writes and reads as Tensor
-- methods, with 1-based dims and indices (int64 or int32 tensors, or Lua
-- tables), as gather and scatter_add take theirs:
--   t:index_add(dim, index, source[, {alpha =}])  source's slices added at the
--                                       slices index names along dim (+ index_add_)
--   t:index_copy(dim, index, source)    those slices replaced by source's (+ _)
--   t:index_fill(dim, index, value)     those slices filled with value, a number
--                                       or a 0-d tensor (+ _)
--   t:scatter(dim, index, src[, {reduce = 'add'}]) or t:scatter(dim, index, value)
--                                       out[.. index[i..] ..] = src[i..] along dim (+ _)
--   t:take_along_dim(indices[, dim])    gather with t and indices broadcast but
--                                       along dim; without dim, of the flattened t
--   t:take(index)                       the flattened t's elements at index, in
--                                       index's shape
-- index is 1-d (0-d) for the index_* ops. A slice (element) named twice:
-- index_add adds both, index_fill and scatter of a number fill it once;
-- index_copy and scatter of a tensor raise an error (PyTorch leaves which
-- source wins undefined; what these compose to would add them). scatter's reduce =
-- 'multiply' is not supported. All are composed of scatter_add (recorded: its
-- formula is in lunet.autograd.formulas.index), masked_fill and gather, so they
-- are differentiable in self and source (and a 0-d tensor value), in place too.
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local Tensor, is_tensor = T.Tensor, T.is_tensor

local ADD_OPTS = { alpha = 'number' }
local SCATTER_OPTS = { reduce = 'string' }

local function shape_str(s) return '{' .. table.concat(s, ',') .. '}' end

local named = options.named   -- (an error inside names the method called)

local need = options.need_tensor

-- 1-based dim of an n-d tensor (a 0-d one takes 1 or -1) -> 1-based positive dim
local function dim_of(fn, d, nd)
  if type(d) ~= 'number' or d % 1 ~= 0 then
    raise(('%s: dim must be an integer, got %s'):format(fn, type(d) == 'number' and tostring(d) or typename(d)))
  end
  local n = math.max(nd, 1)
  local c = d < 0 and n + d + 1 or d
  if c < 1 or c > n then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, d, nd)) end
  return c
end

-- index (a table or an int tensor) -> int64 tensor on self's device, detached
local function index_of(fn, self, index)
  if is_table(index) and not is_tensor(index) then
    local ok, t = pcall(factory.tensor, index, { dtype = 'int64', device = self.device })
    if not ok then raise(fn .. ': index ' .. tostring(t):gsub('^.-tensor: ', '', 1)) end
    return t
  end
  need(fn, index, 'index')
  if index.dtype ~= 'int64' and index.dtype ~= 'int32' then
    raise(('%s: index must be an int64 (or int32) tensor, got %s'):format(fn, index.dtype))
  end
  if index.device ~= self.device then raise(('%s: index is on %s but the input is on %s'):format(fn, index.device, self.device)) end
  return index:detach():long()
end

-- (self, dim, index) of the index_* ops -> self with at least 1 dim, dim, the
-- 1-d index, and the bool mask of the slices it names (1s but along dim)
local function slices(fn, self, dim, index)
  need(fn, self, 'input')
  local d = dim_of(fn, dim, self:dim())
  local idx = index_of(fn, self, index)
  if idx:dim() > 1 then raise(('%s: index must be 0-d or 1-d, got %d-d'):format(fn, idx:dim())) end
  idx = idx:reshape({ idx:numel() })
  local x = self:dim() == 0 and self:reshape({ 1 }) or self
  local n, shape = x:size(d), {}
  for i = 1, x:dim() do shape[i] = i == d and n or 1 end
  local hit = factory.zeros({ n }, { dtype = 'int64', device = self.device })
  hit:scatter_add_(1, idx, factory.ones({ idx:numel() }, { dtype = 'int64', device = self.device }))
  return x, d, idx, hit:gt(0):reshape(shape), hit
end

-- (index_copy and scatter of a tensor) an error where hits (per slot, how
-- many sources name it) has a slot named twice
local function once(fn, hits)
  if hits:numel() > 0 and hits:max():item() > 1 then
    raise(('%s: index names the same position more than once (which source would win is undefined; '
      .. 'name each once, or use %s for a sum)'):format(fn, fn == 'index_copy' and 'index_add' or 'scatter_add'))
  end
end

-- source for the slices of x named by idx: checked, and idx expanded to its shape
local function source_of(fn, x, d, idx, source)
  need(fn, source, 'source')
  if source.dtype ~= x.dtype then raise(('%s: source must have the input\'s dtype %s, got %s'):format(fn, x.dtype, source.dtype)) end
  local want = x:size()
  want[d] = idx:numel()
  local s = source
  if s:dim() <= 1 and #want == 1 then s = s:reshape({ s:numel() }) end
  local got = s:size()
  local ok = #got == #want
  for i = 1, #want do ok = ok and got[i] == want[i] end
  if not ok then
    raise(('%s: source must have shape %s (the input\'s, with the index\'s length along dim %d), got %s')
      :format(fn, shape_str(want), d, shape_str(source:size())))
  end
  local ishape = {}
  for i = 1, #want do ishape[i] = i == d and want[i] or 1 end
  return s, idx:reshape(ishape):expand(want)
end

local function back(self, r) if self:dim() == 0 then return r:reshape({}) end return r end

local function index_add(self, dim, index, source, opts)
  local fn = 'index_add'
  local x, d, idx = slices(fn, self, dim, index)
  local alpha = 1
  if opts ~= nil then alpha = options.check(fn, opts, ADD_OPTS).alpha or 1 end
  local s, eidx = source_of(fn, x, d, idx, source)
  if alpha ~= 1 then s = s * alpha end
  return back(self, x:scatter_add(d, eidx, s))
end
Tensor.index_add = named('index_add', index_add)

local function index_copy(self, dim, index, source)
  local fn = 'index_copy'
  local x, d, idx, hit, hits = slices(fn, self, dim, index)
  local s, eidx = source_of(fn, x, d, idx, source)
  once(fn, hits)
  return back(self, x:masked_fill(hit, 0):scatter_add(d, eidx, s))
end
Tensor.index_copy = named('index_copy', index_copy)

local function index_fill(self, dim, index, value)
  local fn = 'index_fill'
  local x, _, _, hit = slices(fn, self, dim, index)
  if type(value) ~= 'number' and type(value) ~= 'boolean' and not (is_tensor(value) and value:dim() == 0) then
    raise(('%s: value must be a number or a 0-d tensor, got %s'):format(fn,
      is_tensor(value) and (value:dim() .. '-d tensor') or typename(value)))
  end
  return back(self, x:masked_fill(hit, value))
end
Tensor.index_fill = named('index_fill', index_fill)

local function scatter(self, dim, index, src, opts)
  local fn = 'scatter'
  need(fn, self, 'input')
  local nd = self:dim()
  local d = dim_of(fn, dim, nd)
  local idx = index_of(fn, self, index)
  local reduce
  if opts ~= nil then reduce = options.check(fn, opts, SCATTER_OPTS).reduce end
  if reduce ~= nil and reduce ~= 'add' then
    raise(("%s: reduce = '%s' is not supported (only 'add'; or use scatter_add)"):format(fn, reduce))
  end
  local x = nd == 0 and self:reshape({ 1 }) or self
  if idx:dim() == 0 then idx = idx:reshape({ 1 }) end
  local xs, is = x:size(), idx:size()
  if #is ~= #xs then raise(('%s: index must have as many dims as the input (%d), got %d'):format(fn, #xs, #is)) end
  for i = 1, #xs do
    if i ~= d and is[i] > xs[i] then
      raise(('%s: index\'s shape %s exceeds the input\'s %s at dim %d'):format(fn, shape_str(is), shape_str(xs), i))
    end
  end
  local value = src
  if is_tensor(src) then
    if src.dtype ~= x.dtype then raise(('%s: src must have the input\'s dtype %s, got %s'):format(fn, x.dtype, src.dtype)) end
    local s = src:dim() == 0 and src:reshape({ 1 }) or src
    local ss = s:size()
    if #ss ~= #is then raise(('%s: src must have as many dims as index (%d), got %d'):format(fn, #is, #ss)) end
    for i = 1, #is do
      if is[i] > ss[i] then raise(('%s: index\'s shape %s exceeds src\'s %s at dim %d'):format(fn, shape_str(is), shape_str(ss), i)) end
      if ss[i] ~= is[i] then s = s:narrow(i, 1, is[i]) end
    end
    value = s
  elseif type(src) ~= 'number' and type(src) ~= 'boolean' then
    raise(('%s: src must be a tensor or a number, got %s'):format(fn, typename(src)))
  end
  if reduce == 'add' then
    if not is_tensor(value) then value = factory.full(is, value, { dtype = x.dtype, device = x.device }) end
    return back(self, x:scatter_add(d, idx, value))
  end
  local hit = factory.zeros(xs, { dtype = 'int64', device = x.device })
  hit:scatter_add_(d, idx, factory.ones(is, { dtype = 'int64', device = x.device }))
  if not is_tensor(value) then return back(self, x:masked_fill(hit:gt(0), value)) end
  once(fn, hit)
  return back(self, x:masked_fill(hit:gt(0), 0):scatter_add(d, idx, value))
end
Tensor.scatter = named('scatter', scatter)

-- the in-place forms: the result copied in (autograd.inplace records them
-- through the out-of-place op's entry)
for _, name in ipairs({ 'index_add', 'index_copy', 'index_fill', 'scatter' }) do
  local f = Tensor[name]
  Tensor[name .. '_'] = function(self, ...)
    need(name .. '_', self, 'input')
    local r = f(self, ...)
    return self:copy_(r)
  end
end

local function take_along_dim(self, indices, dim)
  local fn = 'take_along_dim'
  need(fn, self, 'input')
  local idx = index_of(fn, self, indices)
  if dim == nil then
    return self:reshape({ self:numel() }):gather(1, idx:reshape({ idx:numel() }))
  end
  local nd = self:dim()
  local d = dim_of(fn, dim, nd)
  if idx:dim() ~= nd then raise(('%s: indices must have as many dims as the input (%d), got %d'):format(fn, nd, idx:dim())) end
  if nd == 0 then return self:reshape({ 1 }):gather(1, idx:reshape({ 1 })):reshape({}) end
  local xs, is = self:size(), idx:size()
  local sx, si = {}, {}
  for i = 1, nd do
    if i == d then sx[i], si[i] = xs[i], is[i]
    else
      if xs[i] ~= is[i] and xs[i] ~= 1 and is[i] ~= 1 then
        raise(('%s: the input\'s shape %s and the indices\' %s cannot broadcast (dim %d)'):format(fn, shape_str(xs), shape_str(is), i))
      end
      local b = xs[i] == 1 and is[i] or xs[i]
      sx[i], si[i] = b, b
    end
  end
  return self:expand(sx):gather(d, idx:expand(si))
end
Tensor.take_along_dim = named('take_along_dim', take_along_dim)

local function take(self, index)
  local fn = 'take'
  need(fn, self, 'input')
  local idx = index_of(fn, self, index)
  local shape = idx:size()
  return self:reshape({ self:numel() }):index_select(1, idx:reshape({ idx:numel() })):reshape(shape)
end
Tensor.take = named('take', take)

return Tensor
