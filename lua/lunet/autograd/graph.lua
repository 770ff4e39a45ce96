-- lunet.autograd.graph: what recording an op makes. A node is a small
-- table: [1..3] its input edges (the input's node, the leaf tensor itself,
-- or false when that input needs no gradient; a node of more inputs sets
-- ni and fills [1..ni]), `fn` the backward (node, grad_out) -> grad per
-- input, `name`, and the few values the backward needs (saved tensors,
-- shapes, arguments). And the helpers formulas share (sum_to, zeros_as, ...).
local ffi = require 'ffi'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local C = core.C
local wrap, record, is_tensor = T.wrap, T.record, T.is_tensor
local table_new = require 'table.new'

local G = {}

function G.needs(x) return is_tensor(x) and x.p.grad_flag ~= 0 end

local version, history_version = C.ln_storage_version, C.ln_storage_history_version
local raise = require('lunet.options').raise

-- A tensor's values must be what its grad_fn says. attach stamps the
-- tensor's record with its storage's history version; a write recorded on
-- another tensor (its base or another view of it) moves that version, one
-- under no_grad does not (it is no part of any history, as in PyTorch;
-- saved tensors see every write: check_saved). check_current then makes
-- a view's history again from its base where it can (autograd.views, as
-- PyTorch regenerates a view's grad_fn) and otherwise refuses the tensor,
-- which would have given wrong gradients. Returns the current grad_fn.
function G.check_current(x, r, fn)
  local v = r.version
  if v == nil or v == history_version(x.p) then return r.grad_fn end
  local n = r.base and require('lunet.autograd.views').regenerate(x, r)
  if n then return n end
  raise(('%s: a {%s} %s tensor was changed in place after the operation that made it was recorded (it is a view' ..
    ' of a tensor written in place, or a tensor written through a view of it), so its gradient would be wrong;' ..
    ' compute it again after the change, or write into a clone()'):format(fn, table.concat(x:size(), ','), x.dtype))
end
local check_current = G.check_current

-- the edge to an input: its node, the leaf itself, or false
function G.edge(x)
  if not is_tensor(x) or x.p.grad_flag == 0 then return false end
  local r = record(x)
  if r and r.grad_fn then return check_current(x, r, 'autograd') end
  return x
end

-- attach node to result r (r requires grad from now on)
function G.attach(r, node)
  r.p.grad_flag = 1
  local rec = record(r, true)
  rec.grad_fn, rec.version = node, history_version(r.p)
  if S.anomaly_hook then S.anomaly_hook('forward', node, r) end   -- lunet.detect_anomaly
  return r
end

-- what a node saves: a new header on the same storage, without the
-- input's autograd record, so saved tensors never chain graphs together,
-- stamped with the storage's version (G.check_saved)
local saved_alias = T.saved_alias
function G.saved(x)
  if is_tensor(x) then return saved_alias(x) end
  return x
end

-- the fields of a node that hold what it saved (G.saved)
local SAVED = { 'a', 'b', 'r', 'x', 'cond' }
G.SAVED = SAVED
-- an error when a tensor node n saved was written in place since (its
-- storage's version moved): its backward would use the new values, as
-- PyTorch refuses
function G.check_saved(n)
  for k = 1, #SAVED do
    local t = n[SAVED[k]]
    if type(t) == 'table' then
      local v = rawget(t, '_version')
      if v and version(t.p) ~= v then
        error(('backward: a tensor that %s saved for its gradient (%s %s) was changed in place after it was saved' ..
          ' (version %d then, %d now), so the gradient would use the new values; change a clone() instead, or' ..
          ' use the out-of-place op (a DataLoader refills a batch two batches later: clone() it, or pass copy =' ..
          ' true)'):format(n.name or 'an op', tostring(t:size()), t.dtype, v, version(t.p)), 0)
      end
    end
  end
end

-- a node: edges 1-3, fn, name and room for two fields its op saves (x and w,
-- a and b, ...) without growing the table (rehashes: ~80 a LeNet-5 step)
function G.node(fn, name, n1, n2, n3)
  local n = table_new(3, 4)
  n[1], n[2], n[3], n.fn, n.name = n1, n2 or false, n3 or false, fn, name
  return n
end

local function same_shape(a, b)
  local pa, pb = a.p, b.p
  if pa.ndim ~= pb.ndim then return false end
  for i = 0, pa.ndim - 1 do if pa.shape[i] ~= pb.shape[i] then return false end end
  return true
end
G.same_shape = same_shape

local reduce_ok = pcall(function() return C.ln_reduce end)
local ones_cache = setmetatable({}, { __mode = 'v' })

-- sum over 0-based dim d keeping it (size 1)
local function sum_keep(g, d)
  if S.creating then return g:sum(d + 1, true) end   -- (create_graph: recorded)
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
G.sum_keep = sum_keep

-- sum g down to `shape` (a table), undoing broadcasting
function G.sum_to(g, shape)
  if not shape then return g end
  -- (an empty gradient sums to zeros: the reshapes below cannot infer an
  -- empty tensor's other sizes)
  if g:numel() == 0 then return G.zeros_as(shape, g) end
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

-- the shape to reduce a gradient to, or nil when x already has r's shape
function G.bshape(x, r)
  if not is_tensor(x) or same_shape(x, r) then return nil end
  return x:size()
end

function G.zeros_as(shape, like)
  local z = wrap(C.ln_empty(#shape, ffi.new('int64_t[?]', math.max(1, #shape), shape), like.p.dtype_id, like.p.device_id))
  C.ln_fill_(z.p, 0)
  return z
end

-- casts and device moves: the gradient goes back to the input's dtype and device
function G.back_cast(n, g)
  if g.p.device_id ~= n.device then g = g:to(n.device) end
  if g.p.dtype_id ~= n.dtype then g = g:to(core.dtypes[n.dtype]) end
  return g
end

return G
