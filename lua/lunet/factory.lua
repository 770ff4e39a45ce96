-- lunet.factory: making tensors (zeros, ones, full, arange, rand, from Lua
-- tables or buffers) and reading them back (item, totable).
local ffi = require 'ffi'
local core = require 'lunet.core'
local raise = require('lunet.options').raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local check_options = require('lunet.options').check
local C = core.C
local Tensor, wrap, check, is_tensor = T.Tensor, T.wrap, T.check, T.is_tensor

local M = {}

local ctypes = { [0] = 'float', 'double', 'int32_t', 'int64_t', 'uint8_t', 'uint8_t', 'uint16_t', 'uint16_t' }
local buf_types = {}
for id = 0, 7 do buf_types[id] = ffi.typeof(ctypes[id] .. '[?]') end

-- Split (sizes..., opts) or ({sizes}, opts): returns ndim, shape_buf, opts.
-- The arguments are read once into a list rather than with select(n, ...)
-- and (...): LuaJIT 2.1.0-beta3 recorded a trace of those that returned
-- ndim 0 for {sizes} once the caller's traces had changed shape.
local function shape_and_opts(fn, ...)
  local n = select('#', ...)
  local args = { ... }
  local last = args[n]
  local opts
  if is_table(last) and (next(last) == nil and n > 1 or last[1] == nil and next(last) ~= nil) then
    opts, n = last, n - 1
  end
  if n == 0 then return T.read_shape(fn, {}), nil, opts end
  local nd, s
  if n == 1 then nd, s = T.read_shape(fn, args[1])
  else
    args[n + 1] = nil   -- (opts out of the sizes)
    nd, s = T.read_shape(fn, args)
  end
  return nd, s, opts
end

-- every factory's options (an unknown one is an error naming the factory)
local OPTS = { dtype = true, device = true, requires_grad = 'boolean' }

local function make(fn, nd, shape, opts)
  if opts ~= nil then check_options(fn, opts, OPTS) end
  local dt = core.dtype_id(fn, opts and opts.dtype)
  local dev = core.device_id(fn, opts and opts.device)
  local p = C.ln_empty(nd, shape, dt, dev)
  -- the C error names ln_empty ("empty: negative size -1"): name the caller
  if p == nil then require('lunet.options').raise((core.last_error():gsub('^empty: ', fn .. ': ', 1))) end
  local t = wrap(p)
  if opts and opts.requires_grad then t.requires_grad = true end
  return t
end

function M.empty(...)
  local nd, s, opts = shape_and_opts('empty', ...)
  return make('empty', nd, s, opts)
end

function M.zeros(...)
  local nd, s, opts = shape_and_opts('zeros', ...)
  local t = make('zeros', nd, s, opts)
  check(C.ln_fill_(t.p, 0))
  return t
end

function M.ones(...)
  local nd, s, opts = shape_and_opts('ones', ...)
  local t = make('ones', nd, s, opts)
  check(C.ln_fill_(t.p, 1))
  return t
end

function M.full(size, value, opts)
  if type(value) ~= 'number' and type(value) ~= 'boolean' then
    raise('full: value must be a number, got ' .. typename(value))
  end
  local nd, s = T.read_shape('full', size)
  local t = make('full', nd, s, opts)
  check(C.ln_fill_(t.p, value == true and 1 or value == false and 0 or value))
  return t
end

local function like(fn, x, opts)
  if not is_tensor(x) then raise(('%s: input must be a tensor, got %s'):format(fn, typename(x))) end
  check_options(fn, opts, OPTS)
  return x:size(), { dtype = opts and opts.dtype or x.dtype, device = opts and opts.device or x.device,
    requires_grad = opts and opts.requires_grad }
end
function M.zeros_like(x, opts)
  local s, o = like('zeros_like', x, opts)
  local nd, buf = T.read_shape('zeros_like', s)
  local t = make('zeros_like', nd, buf, o)
  check(C.ln_fill_(t.p, 0))
  return t
end
function M.ones_like(x, opts)
  local s, o = like('ones_like', x, opts)
  local nd, buf = T.read_shape('ones_like', s)
  local t = make('ones_like', nd, buf, o)
  check(C.ln_fill_(t.p, 1))
  return t
end
function M.empty_like(x, opts)
  local s, o = like('empty_like', x, opts)
  local nd, buf = T.read_shape('empty_like', s)
  return make('empty_like', nd, buf, o)
end
function M.full_like(x, v, opts)
  local s, o = like('full_like', x, opts)
  if type(v) ~= 'number' and type(v) ~= 'boolean' then
    raise('full_like: value must be a number, got ' .. typename(v))
  end
  local nd, buf = T.read_shape('full_like', s)
  local t = make('full_like', nd, buf, o)
  check(C.ln_fill_(t.p, v == true and 1 or v == false and 0 or v))
  return t
end

-- arange(stop), arange(start, stop[, step][, opts]): stop excluded, as in
-- PyTorch; int64 when all arguments are integers, else float32.
function M.arange(a, b, c, d)
  local opts
  if is_table(d) then opts = d
  elseif is_table(c) then opts, c = c, nil
  elseif is_table(b) then opts, b = b, nil end
  local start, stop, step = 0, a, 1
  if b ~= nil then start, stop, step = a, b, c or 1 end
  if type(start) ~= 'number' or type(stop) ~= 'number' or type(step) ~= 'number' then
    raise(('arange: start, end and step must be numbers, got %s, %s, %s'):format(typename(start), typename(stop), typename(step)))
  end
  if start ~= start or stop ~= stop or step ~= step or math.abs(start) == math.huge or math.abs(stop) == math.huge then
    raise(('arange: start, end and step must be finite, got %s, %s, %s'):format(start, stop, step))
  end
  if step == 0 then raise('arange: step must not be zero') end
  local n = math.max(0, math.ceil((stop - start) / step))
  if n >= 2 ^ 62 then raise(('arange: %.17g elements is too large'):format(n)) end
  local integral = start % 1 == 0 and stop % 1 == 0 and step % 1 == 0
  opts = check_options('arange', opts, OPTS) or {}
  local o = { dtype = opts.dtype or (integral and 'int64' or 'float32'), device = opts.device,
    requires_grad = opts.requires_grad }
  local t = make('arange', 1, ffi.new('int64_t[1]', n), o)
  check(C.ln_arange_(t.p, start, step))
  return t
end

function M.linspace(start, stop, steps, opts)
  if type(steps) ~= 'number' or steps < 0 or steps % 1 ~= 0 then
    raise('linspace: steps must be a non-negative integer')
  end
  if type(start) ~= 'number' or type(stop) ~= 'number' then
    raise(('linspace: start and end must be numbers, got %s and %s'):format(typename(start), typename(stop)))
  end
  local t = make('linspace', 1, ffi.new('int64_t[1]', steps), opts)
  local step = steps > 1 and (stop - start) / (steps - 1) or 0
  check(C.ln_arange_(t.p, start, step))
  return t
end

function M.eye(n, m, opts)
  if is_table(m) then opts, m = m, nil end
  for _, v in ipairs({ { 'n', n }, { 'm', m == nil and n or m } }) do
    if type(v[2]) ~= 'number' or v[2] % 1 ~= 0 then
      raise(('eye: %s must be an integer, got %s'):format(v[1], tostring(v[2])))
    end
  end
  local nd, s = T.read_shape('eye', { n, m == nil and n or m })
  local t = make('eye', nd, s, opts)
  check(C.ln_eye_(t.p))
  return t
end

function M.rand(...)
  local nd, s, opts = shape_and_opts('rand', ...)
  local t = make('rand', nd, s, opts)
  check(C.ln_uniform_(t.p, 0, 1))
  return t
end

function M.randn(...)
  local nd, s, opts = shape_and_opts('randn', ...)
  local t = make('randn', nd, s, opts)
  check(C.ln_normal_(t.p, 0, 1))
  return t
end

-- randint(low, high, size[, opts]) or randint(high, size[, opts]): integers
-- in [low, high), int64 by default; the range must fit the dtype
local function int_bound(what, v)
  if type(v) ~= 'number' or v % 1 ~= 0 or v < -2 ^ 63 or v >= 2 ^ 63 then
    raise(('randint: %s must be an integer in [-2^63, 2^63), got %s'):format(what, tostring(v)))
  end
  return v
end

function M.randint(low, high, size, opts)
  if is_table(high) and (size == nil or is_table(size)) then
    low, high, size, opts = 0, low, high, size
  end
  if not is_table(size) then raise('randint: size must be a table of sizes') end
  int_bound('low', low)
  int_bound('high', high)
  local nd, s = T.read_shape('randint', size)
  opts = check_options('randint', opts, OPTS) or {}
  local t = make('randint', nd, s, { dtype = opts.dtype or 'int64', device = opts.device })
  check(C.ln_randint_(t.p, low, high))
  return t
end

function M.manual_seed(seed)
  C.ln_manual_seed(require('lunet.options').seed('manual_seed', 'seed', seed))
end

local function num_arg(fn, what, v, default)
  if v == nil then return default end
  if type(v) ~= 'number' then raise(('%s: %s must be a number, got %s'):format(fn, what, typename(v))) end
  return v
end
function Tensor.uniform_(self, lo, hi)
  check(C.ln_uniform_(T.need_tensor('rand', self, 'self').p, num_arg('rand', 'low', lo, 0), num_arg('rand', 'high', hi, 1)))
  return self
end
function Tensor.normal_(self, mean, std)
  check(C.ln_normal_(T.need_tensor('randn', self, 'self').p, num_arg('randn', 'mean', mean, 0), num_arg('randn', 'std', std, 1)))
  return self
end
function Tensor.bernoulli_(self, p)
  check(C.ln_bernoulli_(T.need_tensor('bernoulli', self, 'self').p, num_arg('bernoulli', 'p', p, 0.5)))
  return self
end

-- ---- from Lua data ----------------------------------------------------------------

local function infer_shape(data, shape, depth)
  local v = data
  while is_table(v) do
    shape[#shape + 1] = #v
    if #shape > 8 then raise('tensor: nested tables deeper than 8 dims') end
    v = v[1]
  end
  return type(v) == 'boolean'
end

local function flatten(data, shape, depth, out, n)
  local size = shape[depth]
  if not is_table(data) or #data ~= size then
    raise(('tensor: ragged nested table (dim %d expects %d entries, got %s)'):format(depth, size,
      is_table(data) and #data or type(data)))
  end
  if depth == #shape then
    for i = 1, size do
      local v = data[i]
      if type(v) == 'boolean' then v = v and 1 or 0
      elseif type(v) ~= 'number' then
        raise(('tensor: element must be a number, got %s'):format(typename(v)))
      end
      out[n] = v
      n = n + 1
    end
    return n
  end
  for i = 1, size do n = flatten(data[i], shape, depth + 1, out, n) end
  return n
end

-- lunet.tensor(data[, opts]): data is a number, a boolean or nested tables.
function M.tensor(data, opts)
  check_options('tensor', opts, OPTS)
  if is_tensor(data) then
    local t = data:clone():to({ dtype = opts and opts.dtype, device = opts and opts.device })
    if opts and opts.requires_grad then t.requires_grad = true end
    return t
  end
  if not is_table(data) and type(data) ~= 'number' and type(data) ~= 'boolean' then
    raise('tensor: expected a number or a nested table, got ' .. typename(data))
  end
  local shape = {}
  local boolean = infer_shape(data, shape)
  local numel = 1
  for i = 1, #shape do numel = numel * shape[i] end
  local values = ffi.new('double[?]', math.max(numel, 1))
  if #shape == 0 then values[0] = type(data) == 'boolean' and (data and 1 or 0) or data
  else flatten(data, shape, 1, values, 0) end
  local dt = opts and opts.dtype or (boolean and 'bool' or nil)
  local t = make('tensor', #shape, ffi.new('int64_t[?]', math.max(#shape, 1), shape), { dtype = dt })
  local src = wrap(C.ln_from_buffer(values, #shape, t.p.shape, 1, t.p.device_id))
  check(C.ln_copy_(t.p, src.p))
  if opts and opts.device then t = t:to(opts.device) end
  if opts and opts.requires_grad then t.requires_grad = true end
  return t
end

-- from_buffer(buf, size, dtype[, device][, nbytes]) copies the caller's memory
-- (device may also be a table {device = ..., nbytes = ...}). buf is a Lua
-- string, a cdata array (its size is ffi.sizeof(buf)) or a pointer,
-- which needs nbytes (how many bytes it holds): the shape must fit in them,
-- so nothing past the buffer is ever read.
function M.from_buffer(buf, size, dtype, device, nbytes)
  if is_table(device) then device, nbytes = device.device, device.nbytes end
  local nd, s = T.read_shape('from_buffer', size)
  if buf == nil then raise('from_buffer: buffer is nil') end
  local held
  if type(buf) == 'string' then held = #buf
  elseif type(buf) == 'cdata' then
    local kind = tostring(ffi.typeof(buf)):sub(-2)   -- ']>' array, '*>' pointer
    if kind == ']>' then held = ffi.sizeof(buf)
    elseif kind ~= '*>' or tostring(ffi.typeof(buf)):find('(*)', 1, true) then
      raise('from_buffer: buffer must be a string, a cdata array or a pointer, got ' .. tostring(ffi.typeof(buf)))
    end
  else
    raise('from_buffer: buffer must be a string, a cdata array or a pointer, got ' .. typename(buf))
  end
  if nbytes ~= nil then
    if type(nbytes) ~= 'number' or nbytes % 1 ~= 0 or nbytes < 0 or nbytes >= 2 ^ 63 then
      raise('from_buffer: nbytes must be a non-negative integer, got ' .. tostring(nbytes))
    end
    if held and nbytes > held then
      raise(('from_buffer: nbytes %d is more than the buffer holds (%d bytes)'):format(nbytes, held))
    end
    held = nbytes
  end
  if not held then
    raise('from_buffer: buf is a pointer: pass nbytes, the number of bytes it holds')
  end
  return wrap(C.ln_from_buffer_n(buf, held, nd, s, core.dtype_id('from_buffer', dtype),
    core.device_id('from_buffer', device)))
end

-- ---- reading back -------------------------------------------------------------------

local item_bufs = {}
for id = 0, 7 do item_bufs[id] = buf_types[id](1) end

local function to_number(buf, i, dt)
  local v = buf[i]
  if dt == 5 then return v ~= 0 end
  return tonumber(v)
end

-- Every NaN read back becomes the one quiet NaN: LuaJIT keeps its own values
-- (nil, tables, strings) in NaN space, so a float NaN with some payloads --
-- all ones: uninitialised memory, -1 read as float -- came back as nil, and
-- others could pass as pointers. Works on the words, before any becomes a
-- Lua value.
local bit = require 'bit'
local u32p = ffi.typeof('uint32_t *')
local band = bit.band
local function canonical_nans(buf, n, dt)
  if dt ~= 0 and dt ~= 1 then return end
  local u = ffi.cast(u32p, buf)
  if dt == 0 then
    for i = 0, n - 1 do
      local w = u[i]
      if band(w, 0x7F800000) == 0x7F800000 and band(w, 0x007FFFFF) ~= 0 then u[i] = 0x7FC00000 end
    end
  else   -- float64: the high word (little-endian) holds sign, exponent and the top of the mantissa
    for i = 0, n - 1 do
      local hi = u[2 * i + 1]
      if band(hi, 0x7FF00000) == 0x7FF00000 and (band(hi, 0x000FFFFF) ~= 0 or u[2 * i] ~= 0) then
        u[2 * i + 1], u[2 * i] = 0x7FF80000, 0
      end
    end
  end
end

-- half types are read through float32
local function readable(self)
  local dt = T.need_tensor('read', self, 'self').p.dtype_id
  if dt == 6 or dt == 7 then return self:float() end
  return self
end

function Tensor.item(self)
  local t = readable(self).p
  local n = C.ln_numel(t)
  if n ~= 1 then raise(('item: tensor has %d elements, expected 1'):format(tonumber(n))) end
  local buf = item_bufs[t.dtype_id]
  check(C.ln_tensor_read(t, buf))
  canonical_nans(buf, 1, t.dtype_id)
  return to_number(buf, 0, t.dtype_id)
end

-- Host copy of the values: a cdata array of the tensor's C type, its length,
-- and the dtype id it holds (float32 for half types).
function Tensor.read(self)
  local src = readable(self)
  local t = src.p
  local n = tonumber(C.ln_numel(t))
  -- (an expanded view may hold far more elements than its storage, and than
  -- a Lua array can: ffi would fail with a raw 'size of C type' error)
  if n * ffi.sizeof(ctypes[t.dtype_id]) > 2 ^ 30 then
    raise(('read: %.0f elements is too many to read into Lua (at most 1 GiB)'):format(n))
  end
  local buf = buf_types[t.dtype_id](math.max(n, 1))
  check(C.ln_tensor_read(t, buf), 3)
  canonical_nans(buf, n, t.dtype_id)
  return buf, n, t.dtype_id
end

function Tensor.totable(self)
  local t = T.need_tensor('totable', self, 'self').p
  local nd = t.ndim
  -- an empty tensor's tables stop at its first size-0 dim, but the dims
  -- before it may ask for any number of them ({2^53, 0}): refused past 2^24
  local tables, prod = 0, 1
  for d = 0, nd - 2 do
    prod = prod * tonumber(t.shape[d])
    if prod == 0 then break end
    tables = tables + prod
  end
  if tables > 2 ^ 24 and C.ln_numel(t) == 0 then
    local dims = {}
    for d = 0, nd - 1 do dims[d + 1] = ('%.0f'):format(tonumber(t.shape[d])) end
    raise(('totable: an empty tensor of shape {%s} would need %.0f nested Lua tables'):format(
      table.concat(dims, ','), tables))
  end
  local buf, _, dt = Tensor.read(self)
  if nd == 0 then return to_number(buf, 0, dt) end
  local pos = 0
  local function build(d)
    local r, size = {}, tonumber(t.shape[d])
    if d == nd - 1 then
      for i = 1, size do r[i] = to_number(buf, pos, dt); pos = pos + 1 end
    else
      for i = 1, size do r[i] = build(d + 1) end
    end
    return r
  end
  return build(0)
end
Tensor.tolist = Tensor.totable

function Tensor.equal(a, b)
  T.need_tensor('equal', a, 'first argument')
  if not is_tensor(b) then raise('equal: second argument must be a tensor') end
  if a.p.ndim ~= b.p.ndim then return false end
  for i = 0, a.p.ndim - 1 do if a.p.shape[i] ~= b.p.shape[i] then return false end end
  if a:numel() == 0 then return true end
  return a:eq(b):all():item()
end

function Tensor.allclose(a, b, rtol, atol)
  rtol, atol = rtol or 1e-5, atol or 1e-8
  if not is_tensor(b) then raise('allclose: second argument must be a tensor, got ' .. typename(b)) end
  if type(rtol) ~= 'number' or type(atol) ~= 'number' then raise('allclose: rtol and atol must be numbers') end
  local ok, diff = pcall(Tensor.sub, a:double(), b:double())
  if not ok then raise('allclose: ' .. tostring(diff):gsub('^.-: ', '', 1)) end
  if diff:numel() == 0 then return true end
  local bound = b:double():abs():mul_(rtol):add_(atol)
  local close = diff:abs():le(bound):logical_or(a:double():eq(b:double()))
  return close:all():item()
end

return M
