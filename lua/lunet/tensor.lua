-- lunet.tensor: the Tensor type. A tensor is a Lua table with the metatable
-- `mt` and two fields: .p, the C tensor (an ln_tensor pointer whose
-- finalizer frees it), and ._record, its autograd record (grad, grad_fn,
-- hooks; false until it has one). A table rather than a cdata so that the
-- collector traces a tensor's record: a hook or a .grad that refers back to
-- its own tensor (or a module holding it) is an ordinary cycle that Lua
-- frees, where a cdata's record had to live in a global table that rooted
-- it. Methods live in the plain table `Tensor`, which other modules extend
-- (math, printing, autograd). Dims and indices are 1-based; negative dims
-- count from the end (-1 is the last).
local ffi = require 'ffi'
local core = require 'lunet.core'
local raise = require('lunet.options').raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local C = core.C

local Tensor = {}          -- methods
local getters = {}         -- computed fields: t.dtype, t.device, t.shape, ...
local setters = {}
-- The process's Tensor metatable (lunet.core keeps one). The first load
-- fills it; a second load of this module (busted reloads modules per spec
-- file) fills a table no tensor uses, so every tensor keeps the first load's
-- methods, recording and collection triggers.
local live_mt = core.tensor_mt
local mt = live_mt.__index == nil and live_mt or {}

local NULL = ffi.cast('ln_tensor *', nil)
local table_new = require 'table.new'
local shape_buf = ffi.new('int64_t[8]')
local stride_buf = ffi.new('int64_t[8]')
local perm_buf = ffi.new('int[8]')

-- LuaJIT's collector sees only the small handles, not the tensor memory behind
-- them, so dropped temporaries piled up (800 MB after 200 adds of 4 MB each).
-- wrap collects when a device's live tensor bytes have doubled since the last
-- collection (and are over LUNET_GC_MIN_MB, 32 MB by default: a full collection
-- of a small Lua heap costs well under a millisecond, and a lower floor keeps
-- a small model's training loop to a small resident set); freed blocks return
-- to the device cache. Under a device memory limit (LUNET_CPU_MEMORY,
-- ln_memory_set_limit) it collects before the limit instead, so that garbage
-- alone does not run a device out of memory: once the room left is down to
-- twice the largest block the device has handed out since the limit was set
-- (what the next op may ask for), held between a quarter and half of the
-- room the last collection left, and never under one largest block.
-- (Halfway alone left a training step's garbage half the room, less what
-- the step itself holds at its peak.)
local gc_next, gc_live, GC_MIN = {}, {}, (tonumber(os.getenv('LUNET_GC_MIN_MB')) or 32) * 2 ^ 20
-- under a limit: the device's handed-out count (ln_memory_handed_out) below
-- which no collection can be due
local gc_look = {}

-- Under dev's limit lim, the bytes allocated past which a collection is due
-- (from what the last collection left live, or what is allocated now, used,
-- if less; always leaving room for the largest block)
local function due_at(dev, lim, used)
  local live = math.min(gc_live[dev] or 0, used)
  if live >= lim then live = 0 end   -- (a limit set below what is live: unknown)
  local largest = tonumber(C.ln_memory_largest_block(dev))
  return math.min(math.max(live + (lim - live) / 2, lim - math.max(2 * largest, (lim - live) / 4)), lim - largest)
end

-- The full collections lunet runs by itself (the triggers here and a
-- pipeline stage's), counted with their seconds: in training they are the
-- host's time that freeing tensors costs (lunet.collection_stats)
local clock = require('lunet.util').clock
local collections = { count = 0, seconds = 0 }
local function collect()
  local t0 = clock()
  collectgarbage()
  collections.count, collections.seconds = collections.count + 1, collections.seconds + clock() - t0
end

-- A full collection, and dev's triggers re-armed from what is live after it
local function collect_device(dev)
  collect()
  local lim = tonumber(C.ln_memory_limit(dev))
  local live = tonumber(lim > 0 and C.ln_memory_settle(dev, 0) or C.ln_memory_allocated(dev))
  gc_next[dev], gc_live[dev] = math.max(GC_MIN, 2 * live), live
  if lim > 0 then gc_look[dev] = tonumber(C.ln_memory_handed_out(dev)) + math.max(0, due_at(dev, lim, live) - live) end
end

-- Under dev's limit lim, with used bytes allocated: whether to collect now.
-- Blocks that queued work holds count as allocated, and no collection frees
-- them (the host ran ahead of the device): so it lets the device catch up
-- (ln_memory_settle) and collects if what is left is still past the mark;
-- and it does not look again before as many bytes were handed out since as
-- there was room left (garbage grows no faster), so that a host running
-- ahead of several devices is not held back at every op.
local function due_under_limit(dev, used, lim)
  local handed = tonumber(C.ln_memory_handed_out(dev))
  if handed < (gc_look[dev] or 0) then return false end
  local mark = due_at(dev, lim, used)
  if used <= mark then return false end
  local settled = tonumber(C.ln_memory_settle(dev, mark))
  if settled > mark then return true end
  gc_look[dev] = handed + (mark - settled)
  return false
end

-- Collects when dev is under a limit and near it (as wrap does); whether it did
local function collect_if_tight(dev)
  local lim = tonumber(C.ln_memory_limit(dev))
  if lim > 0 and due_under_limit(dev, tonumber(C.ln_memory_allocated(dev)), lim) then
    collect_device(dev)
    return true
  end
  return false
end

-- Wrap a C tensor pointer (NULL means the C call failed: raise its message
-- at the user's line, core.raise).
local function wrap(p)
  if p == nil then core.raise() end
  local dev = p.device_id
  local used = C.ln_memory_allocated(dev)
  local due = used > (gc_next[dev] or GC_MIN)
  if not due then
    local lim = C.ln_memory_limit(dev)   -- (read each time: it may be set at any moment)
    due = lim > 0 and due_under_limit(dev, tonumber(used), tonumber(lim))
  end
  if due then collect_device(dev) end
  return setmetatable({ p = ffi.gc(p, C.ln_tensor_free), _record = false }, live_mt)
end

-- A header on t's storage that autograd saves for a backward: no autograd
-- record (saved tensors never chain graphs together), and the storage's
-- version now (_version; an in-place write since makes the backward an
-- error: autograd.engine). An alias holds no new bytes: no collection due.
local function saved_alias(t)
  local p = C.ln_alias(t.p)
  if p == nil then core.raise() end
  return setmetatable({ p = ffi.gc(p, C.ln_tensor_free), _record = false, _version = C.ln_storage_version(t.p) }, live_mt)
end

-- Frees t's C tensor now rather than when the collector finds it (the
-- autograd engine's gradients): t is left a NULL handle, which every method
-- refuses.
local function free_now(t)
  local p = t.p
  ffi.gc(p, nil)
  C.ln_tensor_free(p)
  t.p = NULL
end

-- t handed to an autograd node as its own: a saved alias of it (freed with
-- the node by the engine, lunet.nn.eager), t itself freed now
local function node_owned(t)
  local own = saved_alias(t)
  free_now(t)
  return own
end

-- A full collection that re-arms every device's trigger from what is live
-- now: after a passing workload (the planner's profile at its largest
-- batch) the next collection would otherwise wait for twice that peak.
local function collect_rearm()
  collect()
  for dev in pairs(gc_next) do
    local live = tonumber(C.ln_memory_allocated(dev))   -- (-1: a device gone since)
    if live >= 0 then gc_next[dev], gc_live[dev], gc_look[dev] = math.max(GC_MIN, 2 * live), live, nil end
  end
end

local function check(rc)
  if rc ~= 0 then core.raise() end
end

-- A tensor holds a C tensor (not one whose handle was freed or taken: .p
-- NULL or nil, which equals nil).
local is_tensor = core.is_tensor

local need_tensor = require('lunet.options').need_tensor

-- An integer argument that fits int64 (a fraction, NaN, inf or 2^63 is an
-- error naming fn, never truncated on its way to C).
local function int_arg(fn, what, v)
  if type(v) ~= 'number' or v % 1 ~= 0 or v < -2 ^ 63 or v >= 2 ^ 63 then
    raise(('%s: %s must be an integer, got %s'):format(fn, what, tostring(v)))
  end
  return v
end

-- 1-based (or negative) Lua dim -> 0-based C dim
local function cdim(fn, t, d, extra)
  if type(d) ~= 'number' or d % 1 ~= 0 then
    raise(('%s: dim must be an integer, got %s'):format(fn, tostring(d)))
  end
  local n = t.p.ndim + (extra or 0)
  if d < 0 then d = n + d + 1 end
  if d < 1 or d > n then
    raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, d, t.p.ndim))
  end
  return d - 1
end

-- Read a shape from varargs (2, 3) or a table {2, 3} into shape_buf.
local function read_shape(fn, first, ...)
  local n
  if is_table(first) then
    n = #first
    if n > 8 then raise(fn .. ': at most 8 dims, got ' .. n) end
    for i = 1, n do
      local v = first[i]
      if type(v) ~= 'number' or v % 1 ~= 0 or v < -2 ^ 63 or v >= 2 ^ 63 then
        raise(('%s: size %d must be an integer, got %s'):format(fn, i, tostring(v)))
      end
      shape_buf[i - 1] = v
    end
  else
    n = select('#', ...) + (first ~= nil and 1 or 0)
    if first == nil and n > 0 then raise(fn .. ': size 1 must be an integer, got nil') end
    if n > 8 then raise(fn .. ': at most 8 dims, got ' .. n) end
    for i = 1, n do
      local v = first   -- (not `i == 1 and first or ...`: first may be false)
      if i > 1 then v = select(i - 1, ...) end
      if type(v) ~= 'number' or v % 1 ~= 0 or v < -2 ^ 63 or v >= 2 ^ 63 then
        raise(('%s: size %d must be an integer, got %s'):format(fn, i, tostring(v)))
      end
      shape_buf[i - 1] = v
    end
  end
  return n, shape_buf
end

-- ---- metatable ----------------------------------------------------------------

-- Torch7's t[{i, {a, b}}] (get, set: lunet/tensor_index.lua)
local table_index = {}

local function invalid_handle(self)
  return rawget(self, 'p') == nil   -- (a NULL pointer equals nil too)
end
local INVALID = 'tensor: a NULL tensor handle (freed, or its .p taken) is not a tensor'

mt.__index = function(self, k)
  if invalid_handle(self) then raise(INVALID) end
  local m = Tensor[k]
  if m ~= nil then return m end
  local g = getters[k]
  if g then return g(self) end
  if type(k) == 'number' then return Tensor.get_index(self, k) end
  if is_table(k) then return table_index.get(self, k) end   -- Torch7's t[{i, {a, b}}]
  if type(k) ~= 'string' then raise(('index: a tensor is indexed by a number or a table, got %s'):format(typename(k))) end
  return nil
end

mt.__newindex = function(self, k, v)
  if invalid_handle(self) then raise(INVALID) end
  local s = setters[k]
  if s then return s(self, v) end
  if type(k) == 'number' then return Tensor.set_index(self, k, v) end
  if is_table(k) then return table_index.set(self, k, v) end
  raise(("tensor: cannot set field '%s'"):format(tostring(k)))
end

-- (No #t: LuaJIT, as Lua 5.1, ignores __len on tables; t:size(1) is the
-- length of the first dim.)

-- ---- autograd fields ----------------------------------------------------------------
-- Lua values attached to a tensor (grad, grad_fn, hooks) live in its
-- record, the table in its ._record field.

-- The record of a tensor (a table), created when `create` is true.
local function record(self, create)
  local r = need_tensor('autograd', self, 'self')._record
  if r or not create then return r or nil end
  r = table_new(0, 4)   -- grad_fn, its storage version, grad: no rehash when they arrive
  self._record = r
  return r
end

getters.requires_grad = function(self) return self.p.grad_flag ~= 0 end
setters.requires_grad = function(self, v)
  if type(v) ~= 'boolean' then raise('requires_grad: must be true or false, got ' .. typename(v)) end
  if v and not Tensor.is_floating_point(self) then
    raise('requires_grad: only float tensors can require gradients, got ' .. core.dtypes[self.p.dtype_id])
  end
  self.p.grad_flag = v and 1 or 0
end
getters.grad = function(self) local r = record(self); return r and r.grad end
setters.grad = function(self, g)
  if g ~= nil then
    if not is_tensor(g) then raise('grad: must be a tensor or nil, got ' .. typename(g)) end
    -- (as PyTorch: an optimizer or a reducer would read it as the parameter's;
    -- another float dtype is allowed: the optimizers convert it)
    local a, b = self.p, g.p
    local same = a.ndim == b.ndim and a.device_id == b.device_id
    for i = 0, a.ndim - 1 do same = same and a.shape[i] == b.shape[i] end
    if not same then
      raise(('grad: a %s tensor on %s cannot be the gradient of a %s tensor on %s'):format(tostring(g:size()), g.device,
        tostring(self:size()), self.device))
    end
  end
  record(self, true).grad = g
end
getters.grad_fn = function(self) local r = record(self); return r and r.grad_fn end
setters.grad_fn = function(self, f) record(self, true).grad_fn = f end

getters.dtype = function(self) return core.dtypes[self.p.dtype_id] end
getters.device = function(self) return core.device_name(self.p.device_id) end
getters.device_id = function(self) return self.p.device_id end
getters.shape = function(self) return self:size() end
getters.ndim = function(self) return self.p.ndim end

-- ---- basic queries ---------------------------------------------------------------

-- A size is a plain list ({2, 3}: #, [i], unpack) that prints as {2, 3} and
-- compares by value (a:size() == b:size()), as PyTorch's torch.Size.
local size_mt = {
  __tostring = function(s) return '{' .. table.concat(s, ', ') .. '}' end,
  __eq = function(a, b)
    if #a ~= #b then return false end
    for i = 1, #a do if a[i] ~= b[i] then return false end end
    return true
  end,
}

function Tensor.size(self, d)
  local t = need_tensor('size', self, 'self').p
  if d ~= nil then return tonumber(t.shape[cdim('size', self, d)]) end
  local s = table_new(t.ndim, 0)
  for i = 0, t.ndim - 1 do s[i + 1] = tonumber(t.shape[i]) end
  return setmetatable(s, size_mt)
end

function Tensor.stride(self, d)
  local t = need_tensor('stride', self, 'self').p
  if d ~= nil then return tonumber(t.stride[cdim('stride', self, d)]) end
  local s = {}
  for i = 0, t.ndim - 1 do s[i + 1] = tonumber(t.stride[i]) end
  return s
end

function Tensor.dim(self) return need_tensor('dim', self, 'self').p.ndim end
function Tensor.numel(self) return tonumber(C.ln_numel(need_tensor('numel', self, 'self').p)) end
Tensor.nelement = Tensor.numel
function Tensor.is_contiguous(self) return C.ln_is_contiguous(need_tensor('is_contiguous', self, 'self').p) == 1 end
function Tensor.storage_offset(self) return tonumber(need_tensor('storage_offset', self, 'self').p.offset) end
function Tensor.is_same_storage(self, other)
  need_tensor('is_same_storage', other, 'other')
  return C.ln_same_storage(need_tensor('is_same_storage', self, 'self').p, other.p) == 1
end
function Tensor.data_ptr(self)
  check(C.ln_tensor_sync(need_tensor('data_ptr', self, 'self').p))
  return C.ln_data_ptr(self.p)
end
function Tensor.element_size(self) return C.ln_dtype_size(need_tensor('element_size', self, 'self').p.dtype_id) end
function Tensor.is_floating_point(self)
  local d = need_tensor('is_floating_point', self, 'self').p.dtype_id
  return d == 0 or d == 1 or d == 6 or d == 7
end

-- ---- views (no copy) ----------------------------------------------------------------

function Tensor.view(self, ...)
  local n, s = read_shape('view', ...)
  return wrap(C.ln_view(self.p, n, s))
end

function Tensor.reshape(self, ...)
  local n, s = read_shape('reshape', ...)
  return wrap(C.ln_reshape(self.p, n, s))
end

function Tensor.view_as(self, other) return self:view(need_tensor('view_as', other, 'other'):size()) end

function Tensor.narrow(self, d, start, length)
  local cd = cdim('narrow', self, d)
  local size = self.p.shape[cd]
  if type(start) ~= 'number' or type(length) ~= 'number' then
    raise('narrow: start and length must be numbers')
  end
  int_arg('narrow', 'start', start)
  int_arg('narrow', 'length', length)
  if start < 0 then start = tonumber(size) + start + 1 end
  return wrap(C.ln_narrow(self.p, cd, start - 1, length))
end

function Tensor.select(self, d, index)
  local cd = cdim('select', self, d)
  if type(index) ~= 'number' then raise('select: index must be a number') end
  int_arg('select', 'index', index)
  if index < 0 then index = tonumber(self.p.shape[cd]) + index + 1 end
  return wrap(C.ln_select(self.p, cd, index - 1))
end

function Tensor.transpose(self, d0, d1)
  return wrap(C.ln_transpose(need_tensor('transpose', self, 'self').p, cdim('transpose', self, d0), cdim('transpose', self, d1)))
end

function Tensor.t(self)  -- 2-d transpose
  need_tensor('t', self, 'self')
  if self.p.ndim ~= 2 then raise('T: needs a 2-d tensor, got ' .. self.p.ndim .. '-d') end
  return wrap(C.ln_transpose(self.p, 0, 1))
end
-- t.T: the dims reversed, as torch's (a 2-d tensor's transpose; self:t() and
-- self:permute resolve when called, so autograd's recording forms run)
getters.T = function(self)
  local n = self.p.ndim
  if n == 2 then return self:t() end
  if n < 2 then return self end
  local perm = {}
  for i = 1, n do perm[i] = n + 1 - i end
  return self:permute(perm)
end

function Tensor.permute(self, ...)
  need_tensor('permute', self, 'self')
  local dims = is_table((...)) and ... or { ... }
  if #dims ~= self.p.ndim then
    raise(('permute: %d dims given for a %d-d tensor'):format(#dims, self.p.ndim))
  end
  for i = 1, #dims do perm_buf[i - 1] = cdim('permute', self, dims[i]) end
  return wrap(C.ln_permute(self.p, #dims, perm_buf))
end

function Tensor.squeeze(self, d)
  return wrap(C.ln_squeeze(need_tensor('squeeze', self, 'self').p, d and cdim('squeeze', self, d) or -1))
end

function Tensor.unsqueeze(self, d)
  return wrap(C.ln_unsqueeze(need_tensor('unsqueeze', self, 'self').p, cdim('unsqueeze', self, d, 1)))
end

function Tensor.expand(self, ...)
  local n, s = read_shape('expand', ...)
  return wrap(C.ln_expand(self.p, n, s))
end

function Tensor.expand_as(self, other) return self:expand(need_tensor('expand_as', other, 'other'):size()) end
function Tensor.contiguous(self) return wrap(C.ln_contiguous(need_tensor('contiguous', self, 'self').p)) end
function Tensor.clone(self) return wrap(C.ln_clone(need_tensor('clone', self, 'self').p)) end

function Tensor.flatten(self, s, e)
  local nd = need_tensor('flatten', self, 'self').p.ndim
  if nd == 0 then return self:reshape(1) end
  s = s and cdim('flatten', self, s) + 1 or 1
  e = e and cdim('flatten', self, e) + 1 or nd
  if s > e then raise(('flatten: start dim %d comes after end dim %d'):format(s, e)) end
  local shape, n = {}, 1
  for i = 1, nd do
    local d = tonumber(self.p.shape[i - 1])
    if i < s or i > e then shape[#shape + 1] = d
    else
      n = n * d
      if i == e then shape[#shape + 1] = n end
    end
  end
  return self:reshape(shape)
end

function Tensor.as_strided(self, size, stride, offset)
  local n = read_shape('as_strided', size)
  if not is_table(stride) or #stride ~= n then
    raise(('as_strided: stride must be a list of %d integers, got %s'):format(n, typename(stride)))
  end
  for i = 1, n do
    local v = stride[i]
    if type(v) ~= 'number' or v % 1 ~= 0 or v < -2 ^ 63 or v >= 2 ^ 63 then
      raise('as_strided: stride ' .. i .. ' must be an integer')
    end
    stride_buf[i - 1] = stride[i]
  end
  if offset ~= nil and (type(offset) ~= 'number' or offset % 1 ~= 0 or offset < 0 or offset >= 2 ^ 63) then
    raise('as_strided: offset must be a non-negative integer, got ' .. tostring(offset))
  end
  return wrap(C.ln_as_strided(self.p, n, shape_buf, stride_buf, offset or tonumber(self.p.offset)))
end

-- t[i] selects along the first dim; t[i] = v fills that slice
function Tensor.get_index(self, i) return self:select(1, i) end
-- t[i] = v and t[{...}] = v write v into the view: a number fills it; a
-- tensor is copied, its leading dims of size 1 beyond the view's dropped
-- first (as PyTorch's setitem: y[1] = torch.tensor([5.]) into a 1-d y)
local function write_into(view, v)
  if type(v) == 'number' or type(v) == 'boolean' then return view:fill_(v) end
  if is_tensor(v) then
    local nd = view.p.ndim
    while v.p.ndim > nd and v.p.shape[0] == 1 do v = v:squeeze(1) end
  end
  return view:copy_(v)
end
function Tensor.set_index(self, i, v) write_into(self:select(1, i), v) end

return {
  Tensor = Tensor, getters = getters, setters = setters, mt = mt,
  wrap = wrap, saved_alias = saved_alias, free_now = free_now, node_owned = node_owned, collect_if_tight = collect_if_tight, collect = collect, collections = collections, check = check, is_tensor = is_tensor, need_tensor = need_tensor, gc_min = GC_MIN,
  collect_rearm = collect_rearm,
  cdim = cdim, read_shape = read_shape, write_into = write_into, int_arg = int_arg, record = record, table_index = table_index,
}
