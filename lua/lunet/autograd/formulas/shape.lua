-- lunet.autograd.formulas.shape: views, copies, casts, splits and joins, gather/index_select.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table = core.is_table
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local C = core.C
local wrap, is_tensor = T.wrap, T.is_tensor
local sum_to, zeros_as, back_cast, node, edge, attach, needs =
  G.sum_to, G.zeros_as, G.back_cast, G.node, G.edge, G.attach, G.needs
local set_base = require('lunet.autograd.views').set_base

return function(def, unary)
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
    local dims = is_table(n.x1) and n.x1 or { n.x1, n.x2, n.x3 }
    if not is_table(n.x1) then
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

  -- zeros of the input's shape with g written into the slice; the slice,
  -- a view of z that would hold z's storage until the collector found it,
  -- freed once written (lunet.nn.eager: z itself is freed once summed)
  local eager
  local function scatter_slice(n, g, slicer)
    local z = wrap(C.ln_empty(#n.shape, ffi.new('int64_t[?]', math.max(1, #n.shape), n.shape), g.p.dtype_id, g.p.device_id))
    C.ln_fill_(z.p, 0)
    local slice = slicer(z, n)
    slice:copy_(g)
    eager = eager or require 'lunet.nn.eager'
    -- (not under create_graph: there the copy into the view is recorded)
    if eager.active() and not S.creating then eager.consumed(slice, z) end
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
      set_base(parts[i], a)
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
  for _, name in ipairs({ 'to', 'float', 'double', 'type', 'cpu', 'cuda', 'half', 'bfloat16' }) do
    def(name, 'view', { backward = back_cast })
  end

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
          elseif is_table(dim) then
            local l = { list }
            for i = 1, #dim do l[i + 1] = dim[i] end
            list, dim = l, more
          end
        end
        if not is_table(list) then return orig(list, dim, more) end
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
end
