-- lunet.autograd: reverse-mode automatic differentiation, as in PyTorch.
--
-- Differentiable Tensor methods are wrapped: when grad mode is on and an
-- input requires grad, the result gets requires_grad and a grad_fn node.
-- A node is a small table: [1..n] its input edges (the input's node, the leaf
-- tensor itself, or false when that input needs no gradient), `fn` the
-- backward function (node, grad_out) -> grad per input, `name`, and the few
-- values the backward needs (saved tensors, shapes). loss:backward() sorts
-- the graph, runs each node once all its consumers have contributed, and
-- accumulates into the leaves' .grad. Backward math is made of tensor ops
-- (C kernels); nothing is done per element in Lua. With no input requiring
-- grad the wrappers cost one check and a tail call.
local ffi = require 'ffi'

-- One autograd per process: the Tensor metatype (set once by the first load of
-- lunet.tensor) keeps that load's methods and records, so a re-require (busted
-- unloads modules between spec files) must return the first instance.
local registry = debug.getregistry()
if registry.lunet_autograd then
  -- a reloaded lunet.tensor has a new method table (reached through
  -- lunet.cat, lunet.where, ...): wrap it too, with this instance's state
  pcall(require, 'lunet.tensor_reduce')
  pcall(require, 'lunet.tensor_index')
  registry.lunet_autograd._install(require('lunet.tensor').Tensor)
  return registry.lunet_autograd
end

local core = require 'lunet.core'
local T = require 'lunet.tensor'
local C = core.C
local wrap, record, is_tensor = T.wrap, T.record, T.is_tensor

-- the reductions may live in another module: load it first so its methods get wrapped
pcall(require, 'lunet.tensor_reduce')
pcall(require, 'lunet.tensor_index')

local A = {}
local enabled = true

function A.is_grad_enabled() return enabled end
function A.set_grad_enabled(on) local old = enabled; enabled = not not on; return old end

local function run_with(mode, fn, ...)
  local old = enabled
  enabled = mode
  local res = { pcall(fn, ...) }
  enabled = old
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

-- lunet.no_grad(fn, ...): run fn with recording off, return its results
function A.no_grad(fn, ...)
  if type(fn) ~= 'function' then error('no_grad: expected a function, got ' .. type(fn), 2) end
  return run_with(false, fn, ...)
end
function A.enable_grad(fn, ...)
  if type(fn) ~= 'function' then error('enable_grad: expected a function, got ' .. type(fn), 2) end
  return run_with(true, fn, ...)
end

-- ---- helpers ---------------------------------------------------------------------------

local function needs(x) return is_tensor(x) and x.p.grad_flag ~= 0 end

-- the edge to an input: its node, the leaf itself, or false
local function edge(x)
  if not is_tensor(x) or x.p.grad_flag == 0 then return false end
  local r = record(x)
  local f = r and r.grad_fn
  if f then return f end
  return x
end

-- attach node to result r (r requires grad from now on)
local function attach(r, node)
  r.p.grad_flag = 1
  record(r, true).grad_fn = node
  if A.anomaly_hook then A.anomaly_hook('forward', node, r) end   -- lunet.detect_anomaly
  return r
end
A.attach, A.edge, A.needs = attach, edge, needs

-- what a node saves: a new header on the same storage, without the
-- input's autograd record, so saved tensors never chain graphs together
local function saved(x)
  if is_tensor(x) then return wrap(C.ln_alias(x.p)) end
  return x
end
A.saved = saved

local function same_shape(a, b)
  local pa, pb = a.p, b.p
  if pa.ndim ~= pb.ndim then return false end
  for i = 0, pa.ndim - 1 do if pa.shape[i] ~= pb.shape[i] then return false end end
  return true
end

local reduce_ok = pcall(function() return C.ln_reduce end)
local ones_cache = setmetatable({}, { __mode = 'v' })

-- sum over 0-based dim d keeping it (size 1)
local function sum_keep(g, d)
  if reduce_ok then return wrap(C.ln_reduce(C.LN_RSUM, g.p, d, 1, 0, nil)) end
  -- fallback without reductions: move d last, (M, n) @ ones(n, 1)
  local nd = g.p.ndim
  local shape = g:size()
  local n = shape[d + 1]
  local x = g
  if d ~= nd - 1 then x = x:transpose(d + 1, nd) end
  local rest = x:size()
  rest[nd] = 1
  local m = x:contiguous():reshape(-1, n)
  local key = n .. g.dtype .. g.device
  local ones = ones_cache[key]
  if not ones then
    ones = wrap(C.ln_empty(2, ffi.new('int64_t[2]', n, 1), g.p.dtype_id, g.p.device_id))
    C.ln_fill_(ones.p, 1)
    ones_cache[key] = ones
  end
  local s = m:matmul(ones):reshape(rest)
  if d ~= nd - 1 then s = s:transpose(d + 1, nd) end
  return s
end
A.sum_keep = sum_keep

-- sum g down to `shape` (a table), undoing broadcasting
local function sum_to(g, shape)
  if not shape then return g end
  local nd, nt = g.p.ndim, #shape
  local lead = nd - nt
  if lead > 0 then
    local sz = g:size()
    local outer, rest = 1, {}
    for i = 1, lead do outer = outer * sz[i] end
    for i = lead + 1, nd do rest[#rest + 1] = sz[i] end
    local inner = outer == 0 and 0 or g:numel() / outer
    g = sum_keep(g:reshape(outer, inner), 0):reshape(rest)
    nd = nt
  end
  for i = 1, nt do
    if shape[i] == 1 and g.p.shape[i - 1] ~= 1 then g = sum_keep(g, i - 1) end
  end
  return g
end
A.sum_to = sum_to

-- the shape to reduce a gradient to, or nil when x already has r's shape
local function bshape(x, r)
  if not is_tensor(x) or same_shape(x, r) then return nil end
  return x:size()
end

-- a node: edges 1-3, fn, name and room for two fields its op saves (x and w,
-- a and b, ...) without growing the table (rehashes: ~80 a LeNet-5 step)
local table_new = require 'table.new'
local function node(fn, name, n1, n2, n3)
  local n = table_new(3, 4)
  n[1], n[2], n[3], n.fn, n.name = n1, n2 or false, n3 or false, fn, name
  return n
end

-- ---- wrapping ----------------------------------------------------------------------------
-- install(Tensor) wraps the methods of a Tensor table (once per table; the
-- first is the one the ln_ref metatype uses).
local installed = setmetatable({}, { __mode = 'k' })
local function install(Tensor)
if installed[Tensor] then return end
installed[Tensor] = true

local raw = {}   -- the unwrapped methods
if not A.raw then A.raw = raw end

-- unary: r = f(a), backward uses (g, a, r)
local function unary(name, bw, save_in, save_out)
  local orig = Tensor[name]
  if not orig then return end
  raw[name] = orig
  Tensor[name] = function(a, ...)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, ...) end
    local r = orig(a, ...)
    local n = node(bw, name, edge(a))
    if save_in then n.a = saved(a) end
    if save_out then n.r = r:detach() end
    return attach(r, n)
  end
end

local function unary_bw(f) return function(n, g) return f(g, n.a, n.r, n) end end

local function def_unary(name, f, save_in, save_out) unary(name, unary_bw(f), save_in, save_out) end

def_unary('neg', function(g) return -g end)
def_unary('exp', function(g, a, r) return g * r end, false, true)
def_unary('log', function(g, a) return g / a end, true)
def_unary('sqrt', function(g, a, r) return g * 0.5 / r end, false, true)
def_unary('rsqrt', function(g, a, r) return g * (r * r * r) * -0.5 end, false, true)
def_unary('tanh', function(g, a, r) return g * (1 - r * r) end, false, true)
def_unary('sigmoid', function(g, a, r) return g * (r * (1 - r)) end, false, true)
local has_relu_bw = pcall(function() return C.ln_relu_backward end)
def_unary('relu', function(g, a, r)
  if has_relu_bw then
    local d = wrap(C.ln_empty(r.p.ndim, r.p.shape, r.p.dtype_id, r.p.device_id))
    T.check(C.ln_relu_backward(d.p, g.p, r.p))
    return d
  end
  return g * r:gt(0):to(g.dtype)
end, false, true)
def_unary('abs', function(g, a) return g * a:sign() end, true)
def_unary('sin', function(g, a) return g * a:cos() end, true)
def_unary('cos', function(g, a) return -g * a:sin() end, true)
def_unary('reciprocal', function(g, a, r) return -g * (r * r) end, false, true)
def_unary('log1p', function(g, a) return g / (a + 1) end, true)
def_unary('expm1', function(g, a, r) return g * (r + 1) end, false, true)
def_unary('square', function(g, a) return g * a * 2 end, true)
def_unary('erf', function(g, a) return g * (a * a):neg():exp() * (2 / math.sqrt(math.pi)) end, true)

-- clamp(lo, hi): the gradient passes where lo <= a <= hi
do
  local orig = Tensor.clamp
  raw.clamp = orig
  local function bw(n, g)
    local a, m = n.a, nil
    if n.lo then m = a:ge(n.lo) end
    if n.hi then local h = a:le(n.hi); m = m and m:logical_and(h) or h end
    if not m then return g end
    return g * m:to(g.dtype)
  end
  Tensor.clamp = function(a, lo, hi)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, lo, hi) end
    local r = orig(a, lo, hi)
    local n = node(bw, 'clamp', edge(a))
    n.a, n.lo, n.hi = saved(a), lo, hi
    return attach(r, n)
  end
end

-- binary ops: a and b may be numbers (not both)
local function binary(name, bw, save)
  local orig = Tensor[name]
  raw[name] = orig
  Tensor[name] = function(a, b, c)
    if not enabled or not (needs(a) or needs(b)) then return orig(a, b, c) end
    local r = orig(a, b, c)
    local n = node(bw, name, edge(a), edge(b))
    n.sa, n.sb = bshape(a, r), bshape(b, r)
    if save then n.a, n.b = saved(a), saved(b) end
    n.c = c
    if save == 'out' then n.r = r:detach() end
    return attach(r, n)
  end
end

binary('add', function(n, g)
  local ga, gb
  if n[1] then ga = sum_to(g, n.sa) end
  if n[2] then gb = sum_to(n.c and n.c ~= 1 and g * n.c or g, n.sb) end
  return ga, gb
end)

binary('sub', function(n, g)
  local ga, gb
  if n[1] then ga = sum_to(g, n.sa) end
  if n[2] then gb = sum_to(g * -(n.c or 1), n.sb) end
  return ga, gb
end)

binary('mul', function(n, g)
  local a, b, ga, gb = n.a, n.b, nil, nil
  if n[1] then ga = sum_to(g * b, n.sa) end
  if n[2] then gb = sum_to(g * a, n.sb) end
  return ga, gb
end, true)

binary('div', function(n, g)
  local a, b, ga, gb = n.a, n.b, nil, nil
  if n[1] then ga = sum_to(g / b, n.sa) end
  if n[2] then gb = sum_to(-(g * n.r) / b, n.sb) end
  return ga, gb
end, 'out')

binary('pow', function(n, g)
  local a, b, ga, gb = n.a, n.b, nil, nil
  if n[1] then
    if type(b) == 'number' then
      if b == 0 then ga = g * 0 else ga = g * b * Tensor.pow(a, b - 1) end
    else
      ga = sum_to(g * b * Tensor.pow(a, b - 1), n.sa)
    end
  end
  if n[2] then
    local la = type(a) == 'number' and math.log(a) or a:log()
    gb = sum_to(g * n.r * la, n.sb)
  end
  return ga, gb
end, 'out')

local function minmax_bw(cmp)
  return function(n, g)
    local a, b = n.a, n.b
    local ga, gb
    if type(b) == 'number' or type(a) == 'number' then
      local t, s = a, b
      if type(a) == 'number' then t, s = b, a end
      local w = cmp(t, s):to(g.dtype) + t:eq(s):to(g.dtype) * 0.5
      if type(a) == 'number' then gb = g * w else ga = g * w end
      return ga, gb
    end
    local w = cmp(a, b):to(g.dtype) + a:eq(b):to(g.dtype) * 0.5
    if n[1] then ga = sum_to(g * w, n.sa) end
    if n[2] then gb = sum_to(g * (1 - w), n.sb) end
    return ga, gb
  end
end
binary('maximum', minmax_bw(Tensor.gt), true)
binary('minimum', minmax_bw(Tensor.lt), true)

-- a:where(cond, b)
do
  local orig = Tensor.where
  raw.where = orig
  local function bw(n, g)
    local cond, ga, gb = n.cond, nil, nil
    local z = g * 0
    if n[1] then ga = sum_to(orig(g, cond, z), n.sa) end
    if n[2] then gb = sum_to(orig(z, cond, g), n.sb) end
    return ga, gb
  end
  Tensor.where = function(a, cond, b)
    if not enabled or not (needs(a) or needs(b)) then return orig(a, cond, b) end
    a, b = T.where_operands(a, cond, b)   -- (a Lua number beside: a 0-d tensor)
    local r = orig(a, cond, b)
    local n = node(bw, 'where', edge(a), edge(b))
    n.cond, n.sa, n.sb = saved(cond), bshape(a, r), bshape(b, r)
    return attach(r, n)
  end
end

-- ---- matrix products ------------------------------------------------------------------

local function mT(x) return x:transpose(-1, -2) end

do
  local orig = Tensor.matmul
  raw.matmul = orig
  local function bw(n, g)
    local a, b = n.a, n.b
    local ga, gb
    local na, nb = a.p.ndim, b.p.ndim
    if na == 1 and nb == 1 then
      if n[1] then ga = g * b end
      if n[2] then gb = g * a end
      return ga, gb
    end
    local a2 = na == 1 and a:unsqueeze(1) or a
    local b2 = nb == 1 and b:unsqueeze(2) or b
    local g2 = g
    if na == 1 then g2 = g2:unsqueeze(g2.p.ndim) end
    if nb == 1 then g2 = g2:unsqueeze(g2.p.ndim + 1) end
    if n[1] then ga = sum_to(orig(g2, mT(b2)), a2:size()):reshape(a:size()) end
    if n[2] then gb = sum_to(orig(mT(a2), g2), b2:size()):reshape(b:size()) end
    return ga, gb
  end
  Tensor.matmul = function(a, b)
    if not enabled or not (needs(a) or needs(b)) then return orig(a, b) end
    local r = orig(a, b)
    local n = node(bw, 'matmul', edge(a), edge(b))
    n.a, n.b = saved(a), saved(b)
    return attach(r, n)
  end
end

do
  local orig = Tensor.bmm
  raw.bmm = orig
  local function bw(n, g)
    local ga, gb
    if n[1] then ga = orig(g, mT(n.b)) end
    if n[2] then gb = orig(mT(n.a), g) end
    return ga, gb
  end
  Tensor.bmm = function(a, b)
    if not enabled or not (needs(a) or needs(b)) then return orig(a, b) end
    local r = orig(a, b)
    local n = node(bw, 'bmm', edge(a), edge(b))
    n.a, n.b = saved(a), saved(b)
    return attach(r, n)
  end
end

do
  local orig = Tensor.addmm
  raw.addmm = orig
  local function bw(n, g)
    local gc, ga, gb
    local beta, alpha = n.beta, n.alpha
    if n[1] then gc = sum_to(beta == 1 and g or g * beta, n.sc) end
    local ga_ = alpha == 1 and g or g * alpha
    if n[2] then ga = ga_:matmul(n.b:t()) end
    -- gb = a^T ga_, computed as (ga_^T a)^T: nn.Linear passes w:t() as b,
    -- so the transposed view's backward hands the weight a contiguous
    -- (out, in) gradient (as PyTorch's grad_output^T input), not a strided
    -- one that every accumulation into .grad would walk across
    if n[3] then gb = ga_:t():matmul(n.a):t() end
    return gc, ga, gb
  end
  Tensor.addmm = function(c, a, b, opts)
    if not enabled or not (needs(c) or needs(a) or needs(b)) then return orig(c, a, b, opts) end
    local r = orig(c, a, b, opts)
    local n = node(bw, 'addmm', edge(c), edge(a), edge(b))
    n.a, n.b, n.sc = saved(a), saved(b), bshape(c, r)
    n.beta, n.alpha = opts and opts.beta or 1, opts and opts.alpha or 1
    return attach(r, n)
  end
end

-- ---- views and copies ------------------------------------------------------------------

-- wrap a shape-changing method; bw(n, g) gets n.shape (input's size) and n.args
local view_ops = { view = true, reshape = true, squeeze = true, unsqueeze = true, transpose = true, t = true,
  expand = true, permute = true, narrow = true, select = true }
local function viewlike(name, bw, keep_args)
  local is_view = view_ops[name] or nil
  local orig = Tensor[name]
  if not orig then return end
  raw[name] = orig
  Tensor[name] = function(a, ...)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, ...) end
    local r = orig(a, ...)
    if r == a or type(r) ~= 'cdata' then return r end   -- (t:type() gives the dtype's name)
    local n = node(bw, name, edge(a))
    n.shape = a:size()
    n.view = is_view
    if keep_args then n.x1, n.x2, n.x3 = ... end
    n.dtype, n.device = a.p.dtype_id, a.p.device_id
    return attach(r, n)
  end
end

local function back_reshape(n, g) return g:reshape(n.shape) end
viewlike('view', back_reshape)
viewlike('reshape', back_reshape)
viewlike('squeeze', back_reshape)
viewlike('unsqueeze', back_reshape)
viewlike('contiguous', function(n, g) return g end)
viewlike('clone', function(n, g) return g end)
viewlike('transpose', function(n, g) return g:transpose(n.x1, n.x2) end, true)
viewlike('t', function(n, g) return g:t() end)
T.getters.T = function(self) return Tensor.t(self) end
viewlike('expand', function(n, g) return sum_to(g, n.shape) end)
viewlike('permute', function(n, g)
  local dims = type(n.x1) == 'table' and n.x1 or { n.x1, n.x2, n.x3 }
  if type(n.x1) ~= 'table' then
    error('permute: backward supports at most 3 varargs dims; pass a table', 0)
  end
  local nd = #dims
  local inv = {}
  for i = 1, nd do
    local d = dims[i]
    if d < 0 then d = nd + d + 1 end
    inv[d] = i
  end
  return g:permute(inv)
end, true)

-- zeros of the input's shape with g written into the slice
local function scatter_slice(n, g, slicer)
  local z = wrap(C.ln_empty(#n.shape, ffi.new('int64_t[?]', math.max(1, #n.shape), n.shape), g.p.dtype_id, g.p.device_id))
  C.ln_fill_(z.p, 0)
  slicer(z, n):copy_(g)
  return z
end
viewlike('narrow', function(n, g)
  return scatter_slice(n, g, function(z, n) return raw.narrow(z, n.x1, n.x2, n.x3) end)
end, true)
viewlike('select', function(n, g)
  return scatter_slice(n, g, function(z, n) return raw.select(z, n.x1, n.x2) end)
end, true)

-- split/chunk/unbind return several views; each part gets a node that puts
-- its gradient back in place (chunk calls split)
local function parts_node(a, parts, d, starts, lens, sel)
  for i = 1, #parts do
    local n = node(function(n, g)
      return scatter_slice(n, g, function(z, n)
        if n.sel then return raw.select(z, n.x1, n.x2) end
        return raw.narrow(z, n.x1, n.x2, n.x3)
      end)
    end, sel and 'unbind' or 'split', edge(a))
    n.shape, n.x1, n.sel, n.view = a:size(), d, sel, true
    if sel then n.x2 = i else n.x2, n.x3 = starts[i], lens[i] end
    attach(parts[i], n)
  end
  return parts
end

if Tensor.split then
  local orig = Tensor.split
  raw.split = orig
  Tensor.split = function(a, size, dim)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, size, dim) end
    local parts = orig(a, size, dim)
    local d = T.cdim('split', a, dim or 1) + 1
    local starts, lens, pos = {}, {}, 1
    for i = 1, #parts do
      starts[i], lens[i] = pos, tonumber(parts[i].p.shape[d - 1])
      pos = pos + lens[i]
    end
    return parts_node(a, parts, d, starts, lens, false)
  end
end

if Tensor.unbind then
  local orig = Tensor.unbind
  raw.unbind = orig
  Tensor.unbind = function(a, dim)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim) end
    local parts = orig(a, dim)
    return parts_node(a, parts, T.cdim('unbind', a, dim or 1) + 1, nil, nil, true)
  end
end

-- casts and device moves: the gradient goes back to the input's dtype and device
local function back_cast(n, g)
  if g.p.device_id ~= n.device then g = g:to(n.device) end
  if g.p.dtype_id ~= n.dtype then g = g:to(core.dtypes[n.dtype]) end
  return g
end
for _, name in ipairs({ 'to', 'float', 'double', 'type', 'cpu', 'half', 'bfloat16' }) do
  viewlike(name, back_cast)
end

-- the argument form of permute: keep its table even when given as varargs
do
  local wrapped = Tensor.permute
  Tensor.permute = function(a, ...)
    if type((...)) ~= 'table' then return wrapped(a, { ... }) end
    return wrapped(a, ...)
  end
end

-- ---- reductions (when lunet.tensor_reduce provides them) -------------------------------

local function reduction(name, scale_by_count)
  local orig = Tensor[name]
  if not orig then return end
  raw[name] = orig
  local function bw(n, g)
    local shape = n.shape
    local r
    if n.dim == nil then
      local ones = {}
      for i = 1, #shape do ones[i] = 1 end
      r = (#shape == 0) and g or g:reshape(ones):expand(shape)
    else
      if not n.keepdim then g = g:unsqueeze(n.dim) end
      r = g:expand(shape)
    end
    if scale_by_count then
      local cnt = 1
      if n.dim == nil then for i = 1, #shape do cnt = cnt * shape[i] end
      else local d = n.dim; if d < 0 then d = #shape + d + 1 end; cnt = shape[d] end
      r = r / cnt
    else
      r = r:contiguous()
    end
    return r
  end
  Tensor[name] = function(a, dim, keepdim, ...)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim, keepdim, ...) end
    local r = orig(a, dim, keepdim, ...)
    local n = node(bw, name, edge(a))
    n.shape, n.dim, n.keepdim = a:size(), dim, keepdim
    return attach(r, n)
  end
end
reduction('sum', false)
reduction('mean', true)

-- prod: d out / d x_i = the product of the other elements of x_i's slice. With
-- no zero in the slice that is out / x_i; with one zero, the product of the
-- rest at the zero's position and 0 elsewhere; with two or more, 0.
do
  local orig = Tensor.prod
  if orig then
    raw.prod = orig
    local function bw(n, g)
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
    end
    Tensor.prod = function(a, dim, keepdim, ...)
      if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim, keepdim, ...) end
      if dim ~= nil and type(dim) ~= 'number' then
        error('prod: the gradient over several dims at once is not supported; reduce one dim at a time', 2)
      end
      local r = orig(a, dim, keepdim, ...)
      local n = node(bw, 'prod', edge(a))
      n.x, n.dim, n.keepdim = saved(a), dim, keepdim
      return attach(r, n)
    end
  end
end

-- ---- indexing ----------------------------------------------------------------------------

local function zeros_as(shape, like)
  local z = wrap(C.ln_empty(#shape, ffi.new('int64_t[?]', math.max(1, #shape), shape), like.p.dtype_id, like.p.device_id))
  C.ln_fill_(z.p, 0)
  return z
end
A.zeros_as = zeros_as

if Tensor.gather and Tensor.scatter_add_ then
  local orig = Tensor.gather
  raw.gather = orig
  local function bw(n, g) return zeros_as(n.shape, g):scatter_add_(n.dim, n.index, g) end
  Tensor.gather = function(a, dim, index)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim, index) end
    if type(index) == 'table' then index = require('lunet.factory').tensor(index, { dtype = 'int64' }) end
    local r = orig(a, dim, index)
    local n = node(bw, 'gather', edge(a))
    n.shape, n.dim, n.index = a:size(), dim, index
    return attach(r, n)
  end
end

if Tensor.index_select and Tensor.scatter_add_ then
  local orig = Tensor.index_select
  raw.index_select = orig
  local function bw(n, g)
    -- expand the 1-d index along the other dims, then scatter_add
    local d = n.dim
    local nd = #n.shape
    if d < 0 then d = nd + d + 1 end
    local ishape = {}
    for i = 1, nd do ishape[i] = i == d and tonumber(g.p.shape[i - 1]) or 1 end
    local idx = n.index:reshape(ishape):expand(g:size()):contiguous()
    return zeros_as(n.shape, g):scatter_add_(d, idx, g)
  end
  Tensor.index_select = function(a, dim, index)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim, index) end
    if type(index) == 'table' then index = require('lunet.factory').tensor(index, { dtype = 'int64' }) end
    local r = orig(a, dim, index)
    local n = node(bw, 'index_select', edge(a))
    n.shape, n.dim, n.index = a:size(), dim, index
    return attach(r, n)
  end
end


-- max/min/amax/amin: over all elements the gradient is shared evenly among
-- the tied maxima (as PyTorch's amax); over a dim it goes to the returned index
local function extreme(name)
  local orig = Tensor[name]
  if not orig then return end
  raw[name] = orig
  local function bw(n, g)
    local a, r = n.a, n.r
    if n.idx then
      local idx, gg = n.idx, g
      if not n.keepdim then idx = idx:unsqueeze(n.dim); gg = g:unsqueeze(n.dim) end
      return zeros_as(n.shape, g):scatter_add_(n.dim, idx, gg)
    end
    local rr, gg = r, g
    if n.dim ~= nil and not n.keepdim then rr = r:unsqueeze(n.dim); gg = g:unsqueeze(n.dim) end
    local mask = a:eq(rr):to(g.dtype)
    local count = n.dim == nil and raw.sum(mask) or raw.sum(mask, n.dim, true)
    return mask * gg / count
  end
  Tensor[name] = function(a, dim, keepdim)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 or is_tensor(dim) then return orig(a, dim, keepdim) end
    local r, idx = orig(a, dim, keepdim)
    local n = node(bw, name, edge(a))
    n.a, n.r, n.shape, n.dim, n.keepdim = saved(a), r:detach(), a:size(), dim, keepdim
    if idx and is_tensor(idx) then n.idx = idx end
    return attach(r, n), idx
  end
end
if Tensor.sum then
  extreme('max'); extreme('min'); extreme('amax'); extreme('amin')
end

-- var/std/norm while recording: computed from differentiable ops (the
-- plain kernels run otherwise). Arguments parsed as lunet.tensor_reduce does.
local function spread_args(dim, opt, keepdim)
  if type(dim) == 'table' or type(dim) == 'boolean' then dim, opt, keepdim = nil, dim, opt end
  local corr = 1
  if type(opt) == 'table' then
    if opt.correction ~= nil then corr = opt.correction elseif opt.unbiased == false then corr = 0 end
    if keepdim == nil then keepdim = opt.keepdim end
  elseif type(opt) == 'boolean' then corr = opt and 1 or 0
  elseif type(opt) == 'number' then corr = opt end
  return dim, corr, keepdim
end

local function var_graph(a, dim, corr, keepdim)
  local d
  if dim == nil then d = a - Tensor.mean(a) else d = a - Tensor.mean(a, dim, true) end
  local n = dim == nil and a:numel() or a:size(dim)
  local s = dim == nil and Tensor.sum(d * d) or Tensor.sum(d * d, dim, keepdim)
  return s / math.max(n - corr, 0)
end

if Tensor.var and Tensor.sum then
  local orig_var, orig_std, orig_norm = Tensor.var, Tensor.std, Tensor.norm
  raw.var, raw.std, raw.norm = orig_var, orig_std, orig_norm
  Tensor.var = function(a, dim, opt, keepdim)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig_var(a, dim, opt, keepdim) end
    return var_graph(a, spread_args(dim, opt, keepdim))
  end
  Tensor.std = function(a, dim, opt, keepdim)
    if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig_std(a, dim, opt, keepdim) end
    return var_graph(a, spread_args(dim, opt, keepdim)):sqrt()
  end
  if orig_norm then
    Tensor.norm = function(a, p, dim, keepdim)
      if not enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig_norm(a, p, dim, keepdim) end
      if p == nil or p == 'fro' then p = 2 end
      if type(p) ~= 'number' or p <= 0 or p == math.huge then
        if p == math.huge then return Tensor.amax(a:abs(), dim, keepdim) end
        return orig_norm(a, p, dim, keepdim)
      end
      local x = p == 2 and a * a or a:abs():pow(p)
      local s = dim == nil and Tensor.sum(x) or Tensor.sum(x, dim, keepdim)
      return p == 2 and s:sqrt() or s:pow(1 / p)
    end
  end
end

-- cat/stack(list, dim): one edge per tensor
local function joiner(name, stack)
  local orig = Tensor[name]
  if not orig then return end
  raw[name] = orig
  local function bw(n, g)
    local out, d, pos = {}, n.dim, 1
    for i = 1, n.ni do
      if n[i] then
        if stack then out[i] = raw.select(g, d, i)
        else out[i] = raw.narrow(g, d, pos, n.sizes[i]) end
      end
      if not stack then pos = pos + n.sizes[i] end
    end
    return out
  end
  Tensor[name] = function(list, dim, more)
    if not enabled then return orig(list, dim, more) end
    if is_tensor(list) then
      if is_tensor(dim) then list, dim = { list, dim }, more
      elseif type(dim) == 'table' then
        local l = { list }
        for i = 1, #dim do l[i + 1] = dim[i] end
        list, dim = l, more
      end
    end
    if type(list) ~= 'table' then return orig(list, dim, more) end
    local any = false
    for i = 1, #list do if needs(list[i]) then any = true; break end end
    if not any then return orig(list, dim, more) end
    local r = orig(list, dim)
    local d = dim or 1
    local nd = r.p.ndim
    if d < 0 then d = nd + d + 1 end
    local n = { fn = bw, name = name, ni = #list, dim = d, sizes = {} }
    for i = 1, #list do
      n[i] = edge(list[i])
      if not stack then n.sizes[i] = list[i]:size(d) end
    end
    return attach(r, n)
  end
end
joiner('cat', false)
joiner('stack', true)
if Tensor.concat then Tensor.concat = Tensor.cat end

-- ---- leaves: detach, requires_grad_, retain_grad ----------------------------------------

function Tensor.detach(self) return wrap(C.ln_alias(self.p)) end
function Tensor.detach_(self)
  self.p.grad_flag = 0
  local r = record(self)
  if r then r.grad_fn = nil end
  return self
end
function Tensor.requires_grad_(self, on)
  if on == nil then on = true end
  local r = record(self)
  if r and r.grad_fn and not on then
    error('requires_grad_: cannot turn off requires_grad of a non-leaf tensor; use detach()', 2)
  end
  T.setters.requires_grad(self, on)
  return self
end
function Tensor.is_leaf(self)
  local r = record(self)
  return not (r and r.grad_fn)
end
-- (the node holds self weakly: self's record holds the node, and a strong
-- reference back would keep both alive for good)
local weak_v = { __mode = 'v' }
function Tensor.retain_grad(self)
  local r = record(self)
  if r and r.grad_fn then r.grad_fn.retain = setmetatable({ self }, weak_v) end
  return self
end

-- ---- backward -----------------------------------------------------------------------------

-- a hook's replacement must be a gradient of the tensor: a tensor of g's
-- shape, dtype and device (anything else was silently used, or failed far
-- from the hook)
local function shape_str(t) return '{' .. table.concat(t:size(), ',') .. '}' end
local function hook_result(r, g)
  if not is_tensor(r) then
    error(('a gradient hook returned a %s; expected a tensor or nil'):format(type(r)), 0)
  end
  if not same_shape(r, g) or r.p.dtype_id ~= g.p.dtype_id or r.p.device_id ~= g.p.device_id then
    error(('a gradient hook returned a %s %s tensor on %s; the gradient it replaces is %s %s on %s'):format(
      shape_str(r), r.dtype, r.device, shape_str(g), g.dtype, g.device), 0)
  end
  return r
end

local function run_hooks(hooks, g)
  for i = 1, #hooks do
    local r = hooks[i](g)
    if r ~= nil then g = hook_result(r, g) end
  end
  return g
end

-- fresh: g was made for this leaf alone (no other holder), so the leaf may keep it.
-- Returns true when that same g (fresh, not a cast, move or reshape of it)
-- was added into the leaf's existing .grad: the caller may then free it
local function accumulate_leaf(x, g, fresh)
  local given = fresh and g
  if g.p.dtype_id ~= x.p.dtype_id then g = g:to(core.dtypes[x.p.dtype_id]); fresh = true end
  if g.p.device_id ~= x.p.device_id then g = g:to(core.device_name(x.p.device_id)); fresh = true end
  if not same_shape(g, x) then g = g:reshape(x:size()) end
  local rec = record(x, true)
  if rec.hooks then g = run_hooks(rec.hooks, g); fresh = false; given = false end   -- a hook saw g
  local old = rec.grad
  local added = false
  if old then
    raw.add_(old, g)   -- the leaf owns its .grad
    added = rawequal(g, given) and g.p.slot == 0
  elseif fresh and C.ln_is_contiguous(g.p) == 1 then
    rec.grad = g
  else
    -- a contiguous copy the leaf owns (g may be shared or a view)
    rec.grad = raw.clone(g)
  end
  local post = rec.post_hooks
  if post then for i = 1, #post do post[i](x) end end
  return added
end

-- t:register_hook(fn): fn(grad) runs when t's gradient is computed (before
-- it is accumulated, for a leaf) and may return a replacement of the same
-- shape, dtype and device. Returns a handle with :remove().
-- A non-leaf's hooks go with its node once backward has run. A leaf's stay
-- until removed: a tensor is a cdata, which LuaJIT's collector cannot trace
-- into, so its hooks live in a table keyed by it (tensor.lua's records), and
-- a hook that captures its own tensor (or a module holding it) keeps both
-- alive until h:remove() (as a cdata finalizer that refers to its cdata).
-- The handle's remove (h.remove() or h:remove()) is made on first access:
-- creating a closure aborts the JIT trace of the caller, and DataParallel
-- registers a hook on every step without ever removing it.
local HookHandle = {}
function HookHandle.__index(h, k)
  if k ~= 'remove' then return nil end
  local list, fn = h.list, h.fn
  local function remove()
    for i = #list, 1, -1 do if list[i] == fn then table.remove(list, i) end end
  end
  rawset(h, 'remove', remove)
  return remove
end

local function add_hook(list_owner, key, fn)
  local list = list_owner[key]
  if not list then list = {}; list_owner[key] = list end
  list[#list + 1] = fn
  return setmetatable({ list = list, fn = fn }, HookHandle)
end

function Tensor.register_hook(self, fn)
  if type(fn) ~= 'function' then error('register_hook: expected a function', 2) end
  if self.p.grad_flag == 0 then error("register_hook: tensor does not require grad", 2) end
  local r = record(self, true)
  if r.grad_fn then return add_hook(r.grad_fn, 'hooks', fn) end
  return add_hook(r, 'hooks', fn)
end

-- t:register_post_accumulate_grad_hook(fn): for a leaf, fn(t) runs right
-- after t.grad has been updated (data parallelism starts a bucket's
-- all-reduce from here while backward goes on)
function Tensor.register_post_accumulate_grad_hook(self, fn)
  if type(fn) ~= 'function' then error('register_post_accumulate_grad_hook: expected a function', 2) end
  local r = record(self, true)
  if r.grad_fn then error('register_post_accumulate_grad_hook: only for leaf tensors', 2) end
  return add_hook(r, 'post_hooks', fn)
end

-- Gradients made inside a backward are freed as soon as the last node that
-- got them has run, so their storage goes back to the allocator's cache
-- while still in the CPU's cache and the next gradient of its size reuses it
-- (left to the collector, every memory-bound op of a training step wrote
-- cold memory: LeNet-5's ReLUs 2-5x slower). handed[t] counts t's holders:
-- +1 per node it was handed to (pending), -1 when that node has run or has
-- it summed into a new tensor; a leaf's gradient and the caller's grad count
-- 2 for good, as do gradients seen by hooks or in a retained or
-- anomaly-checked graph (not dropped). With the CPU devices' streams too
-- (free_early): a queued task holds its tensors' storages (ln_launch's keep),
-- never their headers, so the storage stays until the task has run.
local function free_header(t)
  ffi.gc(t, nil)
  C.ln_tensor_free(t.p)   -- (ln_ref_free takes a struct by value: NYI in traces)
end

local function drop(handed, t, free_early)
  local c = handed[t]
  if not c then return end
  c = c - 1
  handed[t] = c
  if c == 0 and free_early and t.p.slot == 0 then free_header(t) end
end

-- The graph from root down, once: each node runs when every consumer has
-- handed it its gradient. A plain function called through pcall (a closure
-- made per backward would abort the JIT trace of the training loop);
-- `current` names the node running, for the error message.
local table_clear = require 'table.clear'
local current
local function run_graph(root, grad, retain)
  -- count consumers of each node reachable from root
  -- (the tables are presized from the node count: grown key by key they
  -- rehashed ~15 times a backward; sized for the largest graph, they made
  -- small graphs' backwards leave kilobytes of garbage each)
  local deps = table_new(0, 8)
  deps[root] = 0
  local stack, sp, nodes = table_new(8, 0), 1, 1
  stack[1] = root
  while sp > 0 do
    local n = stack[sp]; stack[sp] = nil; sp = sp - 1
    for i = 1, n.ni or 3 do
      local e = n[i]
      if e and type(e) == 'table' then
        local d = deps[e]
        if d == nil then
          deps[e] = 1
          nodes = nodes + 1
          if e.freed then error('backward: trying to backward through the graph a second time; pass {retain_graph = true} the first time', 0) end
          sp = sp + 1; stack[sp] = e
        else deps[e] = d + 1 end
      end
    end
  end
  local pending = table_new(0, nodes)
  pending[root] = grad
  local handed = table_new(0, 2 * nodes)   -- holders of each gradient (drop)
  handed[grad] = 2
  local held = root.grads   -- (autograd.backward: every caller's gradient counts 2 too)
  if held then for i = 1, root.ni do handed[held[i]] = 2 end end
  local free_early = C.ln_cuda_device_count() == 0 and not A.anomaly_hook
  -- ready nodes run first in, first out: independent branches (the
  -- replicas of DataParallel) advance together, so each one's gradients
  -- (and the all-reduces they start) reach its device's stream early
  local ready, head, rp = table_new(nodes, 0), 1, 1
  ready[1] = root
  while head <= rp do
    local n = ready[head]; ready[head] = nil; head = head + 1
    local g = pending[n]
    pending[n] = nil
    local gs1, gs2, gs3
    local added1, added2, added3 = false, false, false   -- gs_i summed into a leaf's .grad
    local ni = n.ni
    if g then
      current = n.name
      if n.hooks then g = run_hooks(n.hooks, g) end
      if n.retain and n.retain[1] then accumulate_leaf(n.retain[1], g) end
      gs1, gs2, gs3 = n.fn(n, g)
      if A.anomaly_hook then A.anomaly_hook('backward', n, gs1, gs2, gs3) end
    end
    for i = 1, ni or 3 do
      local e = n[i]
      if e then
        local gi
        if ni then gi = gs1 and gs1[i] else gi = i == 1 and gs1 or i == 2 and gs2 or gs3 end
        if type(e) == 'table' then
          if gi then
            local old = pending[e]
            if old then
              local sum = old + gi
              pending[e] = sum
              handed[sum] = 1
              drop(handed, old, free_early)   -- e holds the sum instead
            else
              pending[e] = gi
              handed[gi] = (handed[gi] or 0) + 1
            end
          end
          local d = deps[e] - 1
          deps[e] = d
          if d == 0 then rp = rp + 1; ready[rp] = e end
        elseif gi then
          -- fresh unless it shares the incoming gradient's storage (a
          -- pass-through or a view of it) or was returned for another input too
          local fresh = not ni and C.ln_same_storage(gi.p, g.p) == 0
          if fresh and i > 1 and gs1 and C.ln_same_storage(gi.p, gs1.p) == 1 then fresh = false end
          if fresh and i > 2 and gs2 and C.ln_same_storage(gi.p, gs2.p) == 1 then fresh = false end
          handed[gi] = (handed[gi] or 0) + 2
          if accumulate_leaf(e, gi, fresh) and free_early then
            if i == 1 then added1 = true elseif i == 2 then added2 = true else added3 = true end
          end
        end
      end
    end
    -- a fresh weight gradient summed into .grad is garbage now: its storage
    -- goes back to the cache at once (after the queued add) instead of at
    -- the next collection, unless the node returned the same tensor twice
    if added1 and not rawequal(gs1, gs2) and not rawequal(gs1, gs3) then free_header(gs1) end
    if added2 and not rawequal(gs2, gs1) and not rawequal(gs2, gs3) then free_header(gs2) end
    if added3 and not rawequal(gs3, gs1) and not rawequal(gs3, gs2) then free_header(gs3) end
    -- n is done with g: drop its hold (see drop)
    if g and not retain and not n.hooks and not n.retain and not A.anomaly_hook then
      drop(handed, g, free_early)
    end
    if not retain then
      -- free what the node saved, its hooks and retain_grad mark (a hook that
      -- captures its own tensor is a cycle through that tensor's record); keep
      -- the edges so a second call can tell
      -- (table.clear and the few fields put back: a pairs() loop is not
      -- compiled by LuaJIT and cost a third of this loop's time)
      if ni then
        for k in pairs(n) do
          if type(k) ~= 'number' and k ~= 'name' and k ~= 'fn' and k ~= 'ni' then n[k] = nil end
        end
      else
        local e1, e2, e3, name, fn = n[1], n[2], n[3], n.name, n.fn
        table_clear(n)
        n[1], n[2], n[3], n.name, n.fn = e1, e2, e3, name, fn
      end
      n.freed = true
    end
  end
end

-- runs the graph from root (its gradient grad), then the callbacks queued
-- meanwhile; raises the first error at the caller's caller
local function run_backward(root, grad, retain)
  local old_enabled = enabled
  enabled = false
  local outer = current
  current = nil
  local ok, err = pcall(run_graph, root, grad, retain)
  enabled = old_enabled
  if not ok and current then
    err = ('backward of %s: %s'):format(current, tostring(err):gsub('^[^:\n]*:%d+: ', '', 1))
  end
  current = outer   -- (a backward run from a hook inside another)
  local cbs = A.callbacks
  if cbs[1] then
    -- callbacks queued during this backward (A.queue_callback) run once it
    -- ends, with ok = false when it failed; their own errors are raised too
    A.callbacks = {}
    for i = 1, #cbs do
      local ok2, err2 = pcall(cbs[i], ok)
      if ok and not ok2 then ok, err = false, err2 end
    end
  end
  if not ok then error(err, 3) end
end

-- t:backward([grad], [opts]) with opts.retain_graph
local BACKWARD_OPTS = { retain_graph = 'boolean' }
function Tensor.backward(self, grad, opts)
  if type(grad) == 'table' and not is_tensor(grad) then opts, grad = grad, nil end
  if opts ~= nil then require('lunet.options').check('backward', opts, BACKWARD_OPTS) end
  if self.p.grad_flag == 0 then
    error('backward: tensor does not require grad and has no grad_fn', 2)
  end
  if grad == nil then
    if self:numel() ~= 1 then
      error(('backward: grad can be implicitly created only for a single-element output, got %d elements'):format(self:numel()), 2)
    end
    grad = wrap(C.ln_empty(self.p.ndim, self.p.shape, self.p.dtype_id, self.p.device_id))
    C.ln_fill_(grad.p, 1)
  else
    if not is_tensor(grad) then error('backward: grad must be a tensor', 2) end
    if not same_shape(grad, self) then
      error(('backward: grad has shape {%s}, output has {%s}'):format(table.concat(grad:size(), ','),
        table.concat(self:size(), ',')), 2)
    end
  end
  local retain = opts and opts.retain_graph
  local rec = record(self)
  local root = rec and rec.grad_fn
  if not root then
    local ok, err = pcall(accumulate_leaf, self, grad)
    if not ok then error('backward: ' .. tostring(err), 2) end
    return
  end
  if root.freed then
    error('backward: trying to backward through the graph a second time; pass {retain_graph = true} the first time', 2)
  end
  run_backward(root, grad, retain)
end

-- A.queue_callback(fn): fn(ok) runs when the backward in progress ends (as
-- torch's Variable._execution_engine.queue_callback; DataParallel launches
-- its remaining all-reduces from there)
A.callbacks = A.callbacks or {}
function A.queue_callback(fn) A.callbacks[#A.callbacks + 1] = fn end

-- ---- in-place ops ------------------------------------------------------------------------
-- As in PyTorch: changing a leaf that requires grad (or a view of one) in
-- place while recording is an error (run it inside lunet.no_grad, as
-- optimizers and initialisers do). On other tensors, when the tensor or an
-- argument requires grad, the op is recorded by computing it out of place,
-- copying the result in and moving its grad_fn to the tensor; fill-like ops
-- cut the history. With nothing requiring grad they cost one or two checks.
do
  local leaf_msg = '%s: a leaf tensor that requires grad (or a view of one) cannot be changed in place' ..
    ' while recording; use the out-of-place op, or lunet.no_grad'
  local cutting = { fill_ = true, zero_ = true, uniform_ = true, normal_ = true, bernoulli_ = true }
  local raw_copy = Tensor.copy_

  local function copy_bw(n, g)
    g = sum_to(g, n.ss)
    return back_cast(n, g)
  end

  local names = {}
  for name, f in pairs(Tensor) do
    if type(f) == 'function' and name:sub(-1) == '_' and name ~= 'requires_grad_' and name ~= 'detach_' then
      names[#names + 1] = name
    end
  end
  for _, name in ipairs(names) do
    local f = Tensor[name]
    raw[name] = f
    local base = name:sub(1, -2)
    Tensor[name] = function(self, a1, ...)
      if not enabled or not is_tensor(self) then return f(self, a1, ...) end
      local self_grad = self.p.grad_flag ~= 0
      if not self_grad and not (is_tensor(a1) and a1.p.grad_flag ~= 0) then return f(self, a1, ...) end
      if self_grad then
        local r = record(self)
        local fn = r and r.grad_fn
        if not fn or (fn.view and type(fn[1]) == 'cdata') then error(leaf_msg:format(name), 2) end
      end
      if cutting[name] then
        f(self, a1, ...)
        return Tensor.detach_(self)
      end
      local r
      if name == 'copy_' then
        local src = a1
        raw_copy(self, src)
        if not is_tensor(src) or src.p.grad_flag == 0 then return Tensor.detach_(self) end
        local n = node(copy_bw, 'copy_', edge(src))
        n.ss = bshape(src, self)
        n.dtype, n.device = src.p.dtype_id, src.p.device_id
        return attach(self, n)
      end
      local out_of_place = Tensor[base]
      if type(out_of_place) ~= 'function' or not raw[base] then
        error(name .. ': not differentiable in place; use lunet.no_grad or an out-of-place form', 2)
      end
      -- on a copy of self: the op may save its input, which is overwritten next
      r = out_of_place(Tensor.clone(self), a1, ...)
      raw_copy(self, r)
      local rr = record(r)
      if rr and rr.grad_fn then return attach(self, rr.grad_fn) end
      return Tensor.detach_(self)
    end
  end
end

-- lunet.autograd.backward(tensors, grads[, opts]): one backward from several
-- roots at once (torch.autograd.backward): the sum of tensors[i] * grads[i]
-- differentiated, each graph node run once, after all its consumers. grads[i]
-- (a tensor of tensors[i]'s shape, on its device) may be nil for a
-- single-element tensor (1). Roots on different devices need no gradient from
-- one another: DataParallel:forward_loss starts every replica's backward this
-- way, so that no device waits for another before its last bucket.
local function roots_fn(n) return n.grads end
A.backward = function(tensors, grads, opts)
  if opts ~= nil then require('lunet.options').check('autograd.backward', opts, BACKWARD_OPTS) end
  if type(tensors) ~= 'table' or is_tensor(tensors) then tensors = { tensors } end
  grads = grads or {}
  if type(grads) ~= 'table' or is_tensor(grads) then grads = { grads } end
  local m = #tensors
  if m == 0 then error('autograd.backward: expected a non-empty list of tensors', 2) end
  local root = { ni = 0, name = 'autograd.backward', fn = roots_fn, grads = {} }
  for i = 1, m do
    local t, g = tensors[i], grads[i]
    if not is_tensor(t) then error(('autograd.backward: tensors[%d] is a %s, not a tensor'):format(i, type(t)), 2) end
    if t.p.grad_flag == 0 then error(('autograd.backward: tensors[%d] does not require grad and has no grad_fn'):format(i), 2) end
    if g == nil then
      if t:numel() ~= 1 then
        error(('autograd.backward: grads[%d] can be implicitly created only for a single-element tensor, got %d elements'):format(i, t:numel()), 2)
      end
      g = wrap(C.ln_empty(t.p.ndim, t.p.shape, t.p.dtype_id, t.p.device_id))
      C.ln_fill_(g.p, 1)
    elseif not is_tensor(g) or not same_shape(g, t) or g.p.device_id ~= t.p.device_id or g.p.dtype_id ~= t.p.dtype_id then
      error(('autograd.backward: grads[%d] must be a %s tensor of shape {%s} on %s'):format(i, t.dtype,
        table.concat(t:size(), ','), t.device), 2)
    end
    local rec = record(t)
    local fn = rec and rec.grad_fn
    if not fn then
      local ok, err = pcall(accumulate_leaf, t, g)
      if not ok then error('autograd.backward: ' .. tostring(err), 2) end
    else
      if fn.freed then
        error('autograd.backward: trying to backward through the graph a second time; pass {retain_graph = true} the first time', 2)
      end
      root.ni = root.ni + 1
      root[root.ni] = fn
      root.grads[root.ni] = g
    end
  end
  if root.ni > 0 then run_backward(root, root.grads[1], opts and opts.retain_graph) end
end

end -- install
A._install = install
install(T.Tensor)

-- lunet.autograd.grad-like helper for specs: the gradients of out wrt inputs
function A.grad(out, inputs, grad_out)
  local saved = {}
  for i, x in ipairs(inputs) do saved[i] = x.grad; x.grad = nil end
  out:backward(grad_out, { retain_graph = true })
  local res = {}
  for i, x in ipairs(inputs) do res[i] = x.grad; x.grad = saved[i] end
  return res
end

-- functions for other modules (nn.functional) that define their own nodes
A.node = node
A.enabled = function() return enabled end

registry.lunet_autograd = A
return A
