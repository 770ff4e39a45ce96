-- lunet.autograd.formulas: the derivative of every differentiable Tensor
-- method, one entry per op (as PyTorch's derivatives.yaml). An entry names
-- the recording kind (lunet.autograd.record: what the node keeps) and gives
-- backward(n, g) -> the gradient for each input (nil for an input that
-- needs none); n holds what the kind saved:
--   unary   n.a (save_in), n.r (save_out), n.x1..x3 (args)
--   binary  n.a, n.b (save), n.r (save = 'out'), n.c, n.sa/n.sb (shapes to
--           reduce broadcast gradients to); n[1]/n[2] say which input needs one
--   pair    n.a, n.b
--   view    n.shape, n.dtype, n.device of the input, n.x1..x3 (args)
--   reduce  n.shape (or n.x with save_in), n.dim, n.keepdim
--   extreme n.a, n.r, n.shape, n.dim, n.keepdim, n.idx
--   index   n.shape, n.dim, n.index
--   custom  make(orig, Tensor, name) -> the recording method
-- Backward runs with grad mode off, so the tensor ops below are plain ones;
-- S.raw holds the methods as they were before recording was added.
local ffi = require 'ffi'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local C = core.C
local wrap, is_tensor = T.wrap, T.is_tensor
local sum_to, zeros_as, back_cast = G.sum_to, G.zeros_as, G.back_cast
local node, edge, attach, saved, needs, bshape = G.node, G.edge, G.attach, G.saved, G.needs, G.bshape

local D = {}   -- D[i] the names in install order, D[name] the formula
local function def(name, kind, f)
  f = f or {}
  f.kind = kind
  D[#D + 1] = name
  D[name] = f
  return f
end
local function unary(name, backward, save) def(name, 'unary', { backward = backward, save_in = save == 'in', save_out = save == 'out' }) end

-- ---- elementwise ------------------------------------------------------------------------

unary('neg', function(n, g) return -g end)
unary('exp', function(n, g) return g * n.r end, 'out')
unary('log', function(n, g) return g / n.a end, 'in')
unary('sqrt', function(n, g) return g * 0.5 / n.r end, 'out')
unary('rsqrt', function(n, g) local r = n.r; return g * (r * r * r) * -0.5 end, 'out')
unary('tanh', function(n, g) local r = n.r; return g * (1 - r * r) end, 'out')
unary('sigmoid', function(n, g) local r = n.r; return g * (r * (1 - r)) end, 'out')
local has_relu_bw = pcall(function() return C.ln_relu_backward end)
unary('relu', function(n, g)
  local r = n.r
  if has_relu_bw then
    local d = wrap(C.ln_empty(r.p.ndim, r.p.shape, r.p.dtype_id, r.p.device_id))
    T.check(C.ln_relu_backward(d.p, g.p, r.p))
    return d
  end
  return g * r:gt(0):to(g.dtype)
end, 'out')
unary('abs', function(n, g) return g * n.a:sign() end, 'in')
unary('sin', function(n, g) return g * n.a:cos() end, 'in')
unary('cos', function(n, g) return -g * n.a:sin() end, 'in')
unary('reciprocal', function(n, g) local r = n.r; return -g * (r * r) end, 'out')
unary('log1p', function(n, g) return g / (n.a + 1) end, 'in')
unary('expm1', function(n, g) return g * (n.r + 1) end, 'out')
unary('square', function(n, g) return g * n.a * 2 end, 'in')
unary('erf', function(n, g) local a = n.a; return g * (a * a):neg():exp() * (2 / math.sqrt(math.pi)) end, 'in')

-- clamp(lo, hi): the gradient passes where lo <= a <= hi
def('clamp', 'unary', { save_in = true, args = true, backward = function(n, g)
  local a, m = n.a, nil
  if n.x1 then m = a:ge(n.x1) end
  if n.x2 then local h = a:le(n.x2); m = m and m:logical_and(h) or h end
  if not m then return g end
  return g * m:to(g.dtype)
end })

def('add', 'binary', { backward = function(n, g)
  local ga, gb
  if n[1] then ga = sum_to(g, n.sa) end
  if n[2] then gb = sum_to(n.c and n.c ~= 1 and g * n.c or g, n.sb) end
  return ga, gb
end })

def('sub', 'binary', { backward = function(n, g)
  local ga, gb
  if n[1] then ga = sum_to(g, n.sa) end
  if n[2] then gb = sum_to(g * -(n.c or 1), n.sb) end
  return ga, gb
end })

def('mul', 'binary', { save = true, backward = function(n, g)
  local a, b, ga, gb = n.a, n.b, nil, nil
  if n[1] then ga = sum_to(g * b, n.sa) end
  if n[2] then gb = sum_to(g * a, n.sb) end
  return ga, gb
end })

def('div', 'binary', { save = 'out', backward = function(n, g)
  local a, b, ga, gb = n.a, n.b, nil, nil
  if n[1] then ga = sum_to(g / b, n.sa) end
  if n[2] then gb = sum_to(-(g * n.r) / b, n.sb) end
  return ga, gb
end })

def('pow', 'binary', { save = 'out', backward = function(n, g)
  local a, b, ga, gb = n.a, n.b, nil, nil
  if n[1] then
    if type(b) == 'number' then
      if b == 0 then ga = g * 0 else ga = g * b * a:pow(b - 1) end
    else
      ga = sum_to(g * b * a:pow(b - 1), n.sa)
    end
  end
  if n[2] then
    local la = type(a) == 'number' and math.log(a) or a:log()
    gb = sum_to(g * n.r * la, n.sb)
  end
  return ga, gb
end })

-- maximum/minimum: ties share the gradient evenly
local function minmax(name, cmp)
  def(name, 'binary', { save = true, backward = function(n, g)
    local a, b = n.a, n.b
    local ga, gb
    if type(b) == 'number' or type(a) == 'number' then
      local t, s = a, b
      if type(a) == 'number' then t, s = b, a end
      local w = t[cmp](t, s):to(g.dtype) + t:eq(s):to(g.dtype) * 0.5
      if type(a) == 'number' then gb = g * w else ga = g * w end
      return ga, gb
    end
    local w = a[cmp](a, b):to(g.dtype) + a:eq(b):to(g.dtype) * 0.5
    if n[1] then ga = sum_to(g * w, n.sa) end
    if n[2] then gb = sum_to(g * (1 - w), n.sb) end
    return ga, gb
  end })
end
minmax('maximum', 'gt')
minmax('minimum', 'lt')

-- a:where(cond, b)
local function where_bw(n, g)
  local cond, ga, gb = n.cond, nil, nil
  local z = g * 0
  if n[1] then ga = sum_to(S.raw.where(g, cond, z), n.sa) end
  if n[2] then gb = sum_to(S.raw.where(z, cond, g), n.sb) end
  return ga, gb
end
def('where', 'custom', { backward = where_bw, make = function(orig)
  return function(a, cond, b)
    if not S.grad_enabled or not (needs(a) or needs(b)) then return orig(a, cond, b) end
    a, b = T.where_operands(a, cond, b)   -- (a Lua number beside: a 0-d tensor)
    local r = orig(a, cond, b)
    local n = node(where_bw, 'where', edge(a), edge(b))
    n.cond, n.sa, n.sb = saved(cond), bshape(a, r), bshape(b, r)
    return attach(r, n)
  end
end })

-- ---- matrix products ---------------------------------------------------------------------

local function mT(x) return x:transpose(-1, -2) end

def('matmul', 'pair', { backward = function(n, g)
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
  local mm = S.raw.matmul
  if n[1] then ga = sum_to(mm(g2, mT(b2)), a2:size()):reshape(a:size()) end
  if n[2] then gb = sum_to(mm(mT(a2), g2), b2:size()):reshape(b:size()) end
  return ga, gb
end })

def('bmm', 'pair', { backward = function(n, g)
  local ga, gb
  if n[1] then ga = S.raw.bmm(g, mT(n.b)) end
  if n[2] then gb = S.raw.bmm(mT(n.a), g) end
  return ga, gb
end })

-- addmm(c, a, b, {beta, alpha}) = beta c + alpha a b
local function addmm_bw(n, g)
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
def('addmm', 'custom', { backward = addmm_bw, make = function(orig)
  return function(c, a, b, opts)
    if not S.grad_enabled or not (needs(c) or needs(a) or needs(b)) then return orig(c, a, b, opts) end
    local r = orig(c, a, b, opts)
    local n = node(addmm_bw, 'addmm', edge(c), edge(a), edge(b))
    n.a, n.b, n.sc = saved(a), saved(b), bshape(c, r)
    n.beta, n.alpha = opts and opts.beta or 1, opts and opts.alpha or 1
    return attach(r, n)
  end
end })

-- ---- views and copies --------------------------------------------------------------------

local function back_reshape(n, g) return g:reshape(n.shape) end
local function pass(n, g) return g end
def('view', 'view', { view = true, backward = back_reshape })
def('reshape', 'view', { view = true, backward = back_reshape })
def('squeeze', 'view', { view = true, backward = back_reshape })
def('unsqueeze', 'view', { view = true, backward = back_reshape })
def('contiguous', 'view', { backward = pass })
def('clone', 'view', { backward = pass })
def('transpose', 'view', { view = true, args = true, backward = function(n, g) return g:transpose(n.x1, n.x2) end })
def('t', 'view', { view = true, backward = function(n, g) return g:t() end })
def('expand', 'view', { view = true, backward = function(n, g) return sum_to(g, n.shape) end })
def('permute', 'view', { view = true, args = true, backward = function(n, g)
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
end })

-- zeros of the input's shape with g written into the slice
local function scatter_slice(n, g, slicer)
  local z = wrap(C.ln_empty(#n.shape, ffi.new('int64_t[?]', math.max(1, #n.shape), n.shape), g.p.dtype_id, g.p.device_id))
  C.ln_fill_(z.p, 0)
  slicer(z, n):copy_(g)
  return z
end
local function narrow_of(z, n) return S.raw.narrow(z, n.x1, n.x2, n.x3) end
local function select_of(z, n) return S.raw.select(z, n.x1, n.x2) end
def('narrow', 'view', { view = true, args = true, backward = function(n, g) return scatter_slice(n, g, narrow_of) end })
def('select', 'view', { view = true, args = true, backward = function(n, g) return scatter_slice(n, g, select_of) end })

-- split/chunk/unbind return several views; each part gets a node that puts
-- its gradient back in place (chunk calls split)
local function part_of(z, n)
  if n.sel then return S.raw.select(z, n.x1, n.x2) end
  return S.raw.narrow(z, n.x1, n.x2, n.x3)
end
local function part_bw(n, g) return scatter_slice(n, g, part_of) end
local function parts_node(a, parts, d, starts, lens, sel)
  for i = 1, #parts do
    local n = node(part_bw, sel and 'unbind' or 'split', edge(a))
    n.shape, n.x1, n.sel, n.view = a:size(), d, sel, true
    if sel then n.x2 = i else n.x2, n.x3 = starts[i], lens[i] end
    attach(parts[i], n)
  end
  return parts
end
def('split', 'custom', { backward = part_bw, make = function(orig)
  return function(a, size, dim)
    if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, size, dim) end
    local parts = orig(a, size, dim)
    local d = T.cdim('split', a, dim or 1) + 1
    local starts, lens, pos = {}, {}, 1
    for i = 1, #parts do
      starts[i], lens[i] = pos, tonumber(parts[i].p.shape[d - 1])
      pos = pos + lens[i]
    end
    return parts_node(a, parts, d, starts, lens, false)
  end
end })
def('unbind', 'custom', { backward = part_bw, make = function(orig)
  return function(a, dim)
    if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim) end
    local parts = orig(a, dim)
    return parts_node(a, parts, T.cdim('unbind', a, dim or 1) + 1, nil, nil, true)
  end
end })

-- casts and device moves: the gradient goes back to the input's dtype and device
for _, name in ipairs({ 'to', 'float', 'double', 'type', 'cpu', 'half', 'bfloat16' }) do
  def(name, 'view', { backward = back_cast })
end

-- ---- reductions ----------------------------------------------------------------------------

local function reduction(name, scale_by_count)
  def(name, 'reduce', { backward = function(n, g)
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
  if n.dim ~= nil and not n.keepdim then rr = r:unsqueeze(n.dim); gg = g:unsqueeze(n.dim) end
  local mask = a:eq(rr):to(g.dtype)
  local count = n.dim == nil and S.raw.sum(mask) or S.raw.sum(mask, n.dim, true)
  return mask * gg / count
end
for _, name in ipairs({ 'max', 'min', 'amax', 'amin' }) do def(name, 'extreme', { backward = extreme_bw }) end

-- var/std/norm while recording: computed from differentiable ops (the
-- plain kernels run otherwise), so they need no formula of their own.
-- Arguments parsed as lunet.tensor_reduce does.
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
  if dim == nil then d = a - a:mean() else d = a - a:mean(dim, true) end
  local n = dim == nil and a:numel() or a:size(dim)
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
    local x = p == 2 and a * a or a:abs():pow(p)
    local s = dim == nil and x:sum() or x:sum(dim, keepdim)
    return p == 2 and s:sqrt() or s:pow(1 / p)
  end
end })

-- ---- indexing --------------------------------------------------------------------------

def('gather', 'index', { backward = function(n, g) return zeros_as(n.shape, g):scatter_add_(n.dim, n.index, g) end })
def('index_select', 'index', { backward = function(n, g)
  -- expand the 1-d index along the other dims, then scatter_add
  local d = n.dim
  local nd = #n.shape
  if d < 0 then d = nd + d + 1 end
  local ishape = {}
  for i = 1, nd do ishape[i] = i == d and tonumber(g.p.shape[i - 1]) or 1 end
  local idx = n.index:reshape(ishape):expand(g:size()):contiguous()
  return zeros_as(n.shape, g):scatter_add_(d, idx, g)
end })

-- cat/stack(list, dim): one edge per tensor
local function joiner(name, stack)
  local function bw(n, g)
    local out, d, pos = {}, n.dim, 1
    for i = 1, n.ni do
      if n[i] then
        if stack then out[i] = S.raw.select(g, d, i)
        else out[i] = S.raw.narrow(g, d, pos, n.sizes[i]) end
      end
      if not stack then pos = pos + n.sizes[i] end
    end
    return out
  end
  def(name, 'custom', { backward = bw, make = function(orig)
    return function(list, dim, more)
      if not S.grad_enabled then return orig(list, dim, more) end
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
  end })
end
joiner('cat', false)
joiner('stack', true)

return D
