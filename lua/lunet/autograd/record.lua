-- lunet.autograd.record: the one recording path. Each formula of
-- lunet.autograd.formulas names a kind; the kind's maker turns the plain
-- method into one that, when grad mode is on and an input requires grad,
-- runs it, makes the node (edges, what the formula saves) and attaches it
-- to the result. With nothing to record a wrapper costs one check and a
-- tail call; recording allocates the node and what the formula saves.
local T = require 'lunet.tensor'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local is_tensor = T.is_tensor
local node, edge, attach, saved, needs, bshape = G.node, G.edge, G.attach, G.saved, G.needs, G.bshape
local set_base = require('lunet.autograd.views').set_base

local K = {}

-- r = op(a, ...): the node saves a (save_in), r (save_out) and the first
-- three arguments after a (args: x1, x2, x3)
function K.unary(name, f, orig)
  local bw, save_in, save_out, args = f.backward, f.save_in, f.save_out, f.args
  return function(a, ...)
    if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, ...) end
    local r = orig(a, ...)
    local n = node(bw, name, edge(a))
    if save_in then n.a = saved(a) end
    if save_out then n.r = saved(r) end
    if args then n.x1, n.x2, n.x3 = ... end
    return attach(r, n)
  end
end

-- r = op(a, b[, c]) with broadcasting, a or b possibly a number: the node
-- keeps the shapes to reduce the gradients to (sa, sb), c, and a, b
-- (save = true) or a, b, r (save = 'out')
function K.binary(name, f, orig)
  local bw, save = f.backward, f.save
  return function(a, b, c)
    if not S.grad_enabled or not (needs(a) or needs(b)) then return orig(a, b, c) end
    local r = orig(a, b, c)
    local n = node(bw, name, edge(a), edge(b))
    n.sa, n.sb = bshape(a, r), bshape(b, r)
    if save then n.a, n.b = saved(a), saved(b) end
    n.c = c
    if save == 'out' then n.r = saved(r) end
    return attach(r, n)
  end
end

-- r = op(a, b) of two tensors that do not broadcast (matrix products)
function K.pair(name, f, orig)
  local bw = f.backward
  return function(a, b)
    if not S.grad_enabled or not (needs(a) or needs(b)) then return orig(a, b) end
    local r = orig(a, b)
    local n = node(bw, name, edge(a), edge(b))
    n.a, n.b = saved(a), saved(b)
    return attach(r, n)
  end
end

-- shape changes, copies and casts: the node keeps the input's shape,
-- dtype and device (and its first three arguments with args)
function K.view(name, f, orig)
  local bw, args, is_view = f.backward, f.args, f.view or nil
  return function(a, ...)
    if not S.grad_enabled or not is_tensor(a) then return orig(a, ...) end
    if a.p.grad_flag == 0 then
      if not is_view then return orig(a, ...) end
      -- (a view of a tensor that does not require grad, made while recording:
      -- a value that does written into it reaches a: autograd.views)
      local r = orig(a, ...)
      if r ~= a and is_tensor(r) then set_base(r, a) end
      return r
    end
    local r = orig(a, ...)
    if r == a or not is_tensor(r) then return r end   -- (t:type() gives the dtype's name)
    local n = node(bw, name, edge(a))
    n.shape = a:size()
    n.view = is_view
    if args then n.x1, n.x2, n.x3 = ... end
    n.dtype, n.device = a.p.dtype_id, a.p.device_id
    attach(r, n)
    if is_view then set_base(r, a) end   -- (an in-place write to r rewrites a's history too)
    return r
  end
end

-- reductions r = op(a[, dim[, keepdim]]): the node keeps a's shape, dim,
-- keepdim, and a (save_in)
function K.reduce(name, f, orig)
  local bw, save_in, check = f.backward, f.save_in, f.check
  return function(a, dim, keepdim, ...)
    if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim, keepdim, ...) end
    if check then check(a, dim) end
    local r = orig(a, dim, keepdim, ...)
    local n = node(bw, name, edge(a))
    if save_in then n.x = saved(a) else n.shape = a:size() end
    n.dim, n.keepdim = dim, keepdim
    return attach(r, n)
  end
end

-- max/min over all elements or a dim (then with indices, which need no
-- gradient); with a tensor second argument it is the elementwise form
function K.extreme(name, f, orig)
  local bw = f.backward
  return function(a, dim, keepdim)
    if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 or is_tensor(dim) then return orig(a, dim, keepdim) end
    local r, idx = orig(a, dim, keepdim)
    local n = node(bw, name, edge(a))
    n.a, n.r, n.shape, n.dim, n.keepdim = saved(a), saved(r), a:size(), dim, keepdim
    if idx and is_tensor(idx) then n.idx = idx end
    return attach(r, n), idx
  end
end

-- r = op(a, dim, index): the index may be a Lua list
function K.index(name, f, orig)
  local bw = f.backward
  return function(a, dim, index)
    if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim, index) end
    if is_table(index) then index = require('lunet.factory').tensor(index, { dtype = 'int64' }) end
    local r = orig(a, dim, index)
    local n = node(bw, name, edge(a))
    n.shape, n.dim, n.index = a:size(), dim, index
    return attach(r, n)
  end
end

-- an op whose recording fits no kind above: the formula makes its wrapper
function K.custom(name, f, orig, Tensor) return f.make(orig, Tensor, name) end

-- the layers of lunet.nn.functional: the forward runs first (its own checks,
-- its errors at the caller's line) and hands its result to the recorder,
-- rec(r, a[, b, c[, d]], x1, ..., xk), with its f.inputs (1, 3 or 4) tensor
-- inputs (nil for an absent bias) and the f.args (up to four) values the
-- backward needs (its arguments, what it computed: indices, batch statistics,
-- a saved state). The node keeps edges to the inputs, the first save_in of
-- them (n.a, n.b), r (save_out) and x1..xk; rec returns r. A layer is not a
-- Tensor method. Each layer's recorder is its own function, generated from
-- those counts: one function shared by all layers, branching on them, made
-- the JIT's traces side-exit from one layer to the next (and materialize
-- what they had sunk), and storing even a nil under a new key grows a node.
local layer_src = [[
local S, needs, node, edge, attach, saved, bw, name = ...
return function(r, %s)
  if not S.grad_enabled or not (%s) then return r end
  local n = node(bw, name, %s)
%s  return attach(r, n)
end]]
function K.layer(name, f)
  local ni, save_in, nargs = f.inputs, f.save_in or 0, f.args or 0
  if not (ni == 1 or ni == 3 or ni == 4) or save_in > 2 or nargs > 4 then
    error(('autograd: layer %s: inputs must be 1, 3 or 4, save_in at most 2, args at most 4'):format(name))
  end
  local ins, params, guard, edges, body = { 'a', 'b', 'c', 'd' }, {}, {}, {}, {}
  for i = 1, ni do
    params[i], guard[i] = ins[i], 'needs(' .. ins[i] .. ')'
    if i <= 3 then edges[i] = 'edge(' .. ins[i] .. ')' end
  end
  if ni == 4 then body[#body + 1] = '  n[4], n.ni = edge(d), 4   -- (a list node: its backward returns a list)\n' end
  for i = 1, save_in do body[#body + 1] = ('  n.%s = saved(%s)\n'):format(ins[i], ins[i]) end
  if f.save_out then body[#body + 1] = '  n.r = saved(r)\n' end
  for i = 1, nargs do
    params[#params + 1] = 'x' .. i
    body[#body + 1] = ('  n.x%d = x%d\n'):format(i, i)
  end
  local src = layer_src:format(table.concat(params, ', '), table.concat(guard, ' or '), table.concat(edges, ', '),
    table.concat(body))
  return assert(loadstring(src, '=autograd layer ' .. name))(S, needs, node, edge, attach, saved, f.backward, name)
end

-- records(a, ...): whether an op on these inputs would be recorded now (a
-- forward that keeps extra state only for its backward asks first)
function K.records(a, b, c, d, e, f)
  return S.grad_enabled and (needs(a) or needs(b) or needs(c) or needs(d) or needs(e) or needs(f))
end

return K
