-- lunet.tensor_index: picking, joining and splitting tensors. Indices are
-- 1-based (Lua tables or int64/int32 tensors): t:index_select(dim, idx),
-- t:gather(dim, idx), t:scatter_add_(dim, idx, src), lunet.cat(list, dim),
-- lunet.stack(list, dim), t:split(size_or_sizes, dim), t:chunk(n, dim),
-- t:unbind(dim) (the last three return views).
local ffi = require 'ffi'
local core = require 'lunet.core'
local raise = require('lunet.options').raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local C = core.C
local Tensor, wrap, check, is_tensor, cdim = T.Tensor, T.wrap, T.check, T.is_tensor, T.cdim

-- every number of a (nested) table of indices is an integer (the int64
-- conversion would truncate 1.5 to 1)
local function check_integers(fn, idx, depth)
  for i = 1, #idx do
    local v = idx[i]
    if is_table(v) and depth < 8 then check_integers(fn, v, depth + 1)
    elseif type(v) == 'number' and (v % 1 ~= 0 or v < -2 ^ 63 or v >= 2 ^ 63) then
      error(('%s: index %s is not an integer'):format(fn, tostring(v)), 4 + depth)
    end
  end
end

-- 1-based Lua index (table or tensor) -> 0-based index tensor on self's device
local function to_index(fn, self, idx)
  if is_table(idx) then
    check_integers(fn, idx, 0)
    local ok, t = pcall(factory.tensor, idx, { dtype = 'int64' })
    if not ok then raise(fn .. ': index ' .. tostring(t):gsub('^.-tensor: ', '', 1)) end
    if self.p.device_id ~= 0 then t = t:to(self.device) end
    return t:sub_(1)
  end
  if not is_tensor(idx) then
    raise(('%s: index must be a tensor or a table of 1-based indices, got %s'):format(fn, typename(idx)))
  end
  local dt = idx.p.dtype_id
  if dt ~= 3 and dt ~= 2 then
    raise(('%s: index must be an int64 (or int32) tensor, got %s'):format(fn, idx.dtype))
  end
  return idx - 1
end

local need_tensor = require('lunet.options').need_tensor
-- (the C tensor of x)
local function need(fn, x, what) return need_tensor(fn, x, what).p end

function Tensor.index_select(self, dim, idx)
  local p = need('index_select', self, 'input')
  local d = cdim('index_select', self, dim)
  return wrap(C.ln_index_select(p, d, to_index('index_select', self, idx).p))
end

function Tensor.gather(self, dim, idx)
  local p = need('gather', self, 'input')
  local d = cdim('gather', self, dim)
  return wrap(C.ln_gather(p, d, to_index('gather', self, idx).p))
end

function Tensor.scatter_add_(self, dim, idx, src)
  local p = need('scatter_add_', self, 'input')
  local d = cdim('scatter_add_', self, dim)
  local i = to_index('scatter_add_', self, idx)
  check(C.ln_scatter_add_(p, d, i.p, need('scatter_add_', src, 'src')))
  return self
end

function Tensor.scatter_add(self, dim, idx, src)
  need('scatter_add', self, 'input')
  return Tensor.scatter_add_(self:clone(), dim, idx, src)
end

-- ---- Torch7's table index -----------------------------------------------------------------
-- t[{i, j}] with a number for every dim is that element, a Lua number (as in
-- Torch7); {a, b} keeps the range a..b of a dim (inclusive, negatives count
-- from the end), {a} is a..a, {} the whole dim; a number selects (drops) its
-- dim. Anything but an element is a view. t[{...}] = v fills or copies into it.
local function table_view(self, idx)
  local nd, n = self.p.ndim, #idx
  for k in pairs(idx) do
    if type(k) ~= 'number' or k % 1 ~= 0 or k < 1 or k > n then
      raise(('index: a table index is a list of numbers and {first, last} ranges, got key %s'):format(tostring(k)))
    end
  end
  if n > nd then raise(('index: %d indices for a %d-d tensor'):format(n, nd)) end
  local v, d, element = self, 1, n == nd
  for i = 1, n do
    local k, size = idx[i], tonumber(v.p.shape[d - 1])
    if type(k) == 'number' then
      local j = k < 0 and size + k + 1 or k
      if k % 1 ~= 0 or j < 1 or j > size then
        raise(('index: index %s is out of range for dim %d of size %d'):format(tostring(k), i, size))
      end
      v = v:select(d, j)
    elseif is_table(k) then
      element = false
      local a, b = k[1] or 1, k[2] or k[1] or size
      if type(a) ~= 'number' or type(b) ~= 'number' or #k > 2 then
        raise(('index: the range for dim %d must be {first, last}, {i} or {}'):format(i))
      end
      local a1, b1 = a < 0 and size + a + 1 or a, b < 0 and size + b + 1 or b
      if a % 1 ~= 0 or b % 1 ~= 0 or a1 < 1 or b1 > size or a1 > b1 then
        raise(('index: range {%s, %s} is out of range for dim %d of size %d'):format(
          tostring(a), tostring(b), i, size))
      end
      v = v:narrow(d, a1, b1 - a1 + 1)
      d = d + 1
    else
      raise(('index: index %d must be a number or a {first, last} range, got %s'):format(i, typename(k)))
    end
  end
  return v, element
end

function T.table_index.get(self, idx)
  local v, element = table_view(self, idx)
  if element then return v:item() end
  return v
end

function T.table_index.set(self, idx, value) T.write_into(table_view(self, idx), value) end

-- ---- cat, stack -------------------------------------------------------------------------

local ptrs, nptrs = nil, 0

-- list of tensors -> ln_tensor*[n] (a buffer reused across calls)
local function tensor_array(fn, list)
  if not is_table(list) then raise(fn .. ': expected a list of tensors, got ' .. typename(list)) end
  local n = #list
  if n == 0 then raise(fn .. ': expected a non-empty list of tensors') end
  if n > nptrs then nptrs = math.max(n, 16); ptrs = ffi.new('ln_tensor*[?]', nptrs) end
  for i = 1, n do
    local t = list[i]
    if not is_tensor(t) then
      raise(('%s: element %d of the list must be a tensor, got %s'):format(fn, i, typename(t)))
    end
    ptrs[i - 1] = t.p
  end
  return n, ptrs
end

-- lunet.cat({a, b, ...}[, dim]) or a:cat(b[, dim]) / lunet.cat(a, b[, dim])
local function list_args(list, dim, more)
  if is_tensor(list) then
    if is_tensor(dim) then return { list, dim }, more end
    if is_table(dim) then
      local l = { list }
      for i = 1, #dim do l[i + 1] = dim[i] end
      return l, more
    end
  end
  return list, dim
end

local function int_dim(fn, dim)
  if type(dim) ~= 'number' or dim % 1 ~= 0 then
    raise(('%s: dim must be an integer, got %s'):format(fn, tostring(dim)))
  end
  -- (the C side takes an int: a dim far out of range must not wrap to a valid one)
  if dim < -9 or dim > 9 then raise(('%s: dim %s out of range (tensors have at most 8 dims)'):format(fn, tostring(dim))) end
  return dim
end

function Tensor.cat(list, dim, more)
  list, dim = list_args(list, dim, more)
  local n, arr = tensor_array('cat', list)
  dim = int_dim('cat', dim or 1)
  if dim < 0 then dim = list[1].p.ndim + dim + 1 end
  return wrap(C.ln_cat(n, arr, dim - 1))
end
Tensor.concat = Tensor.cat

function Tensor.stack(list, dim, more)
  list, dim = list_args(list, dim, more)
  local n, arr = tensor_array('stack', list)
  dim = int_dim('stack', dim or 1)
  if dim < 0 then dim = list[1].p.ndim + 1 + dim + 1 end
  return wrap(C.ln_stack(n, arr, dim - 1))
end

-- ---- split, chunk, unbind (views) --------------------------------------------------------

function Tensor.split(self, size, dim)
  need('split', self, 'input')
  local d = cdim('split', self, dim or 1)
  local total = tonumber(self.p.shape[d])
  local parts, start = {}, 0
  if type(size) == 'number' then
    if size % 1 ~= 0 or size < 1 then raise('split: size must be a positive integer, got ' .. size) end
    repeat
      local len = math.min(size, total - start)
      parts[#parts + 1] = wrap(C.ln_narrow(self.p, d, start, len))
      start = start + len
    until start >= total
  elseif is_table(size) then
    local sum = 0
    for i = 1, #size do
      local s = size[i]
      if type(s) ~= 'number' or s % 1 ~= 0 or s < 0 then
        raise(('split: size %d must be a non-negative integer, got %s'):format(i, tostring(s)))
      end
      sum = sum + s
    end
    if sum ~= total then
      raise(('split: sizes add up to %d but dim %d has size %d'):format(sum, d + 1, total))
    end
    for i = 1, #size do
      parts[i] = wrap(C.ln_narrow(self.p, d, start, size[i]))
      start = start + size[i]
    end
  else
    raise('split: size must be a number or a table of sizes, got ' .. typename(size))
  end
  return parts
end

function Tensor.chunk(self, n, dim)
  need('chunk', self, 'input')
  if type(n) ~= 'number' or n % 1 ~= 0 or n < 1 then
    raise('chunk: number of chunks must be a positive integer, got ' .. tostring(n))
  end
  local d = cdim('chunk', self, dim or 1)
  local total = tonumber(self.p.shape[d])
  return Tensor.split(self, math.max(1, math.ceil(total / n)), d + 1)
end

function Tensor.unbind(self, dim)
  need('unbind', self, 'input')
  local d = cdim('unbind', self, dim or 1)
  local parts = {}
  for i = 1, tonumber(self.p.shape[d]) do parts[i] = wrap(C.ln_select(self.p, d, i - 1)) end
  return parts
end

return Tensor
