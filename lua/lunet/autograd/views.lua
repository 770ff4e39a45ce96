-- lunet.autograd.views: in-place writes through views, as PyTorch records
-- them. A view made while recording (grad mode on, whether or not its input
-- requires grad) keeps its base (record.base: the tensor at the root of its
-- views, whose storage it shares). An in-place op
-- on the view then also rewrites the base's history:
--
--   base_new = base_old with the view's region replaced by the op's result
--
-- (copy_slices: the base's gradient with that region zeroed goes to the old
-- base, the region's to the op), and the view becomes a view of the new
-- base (as_strided). A view whose storage was written since its op was
-- recorded (through its base or another view) is made again from its base
-- when it is next used (regenerate). Geometry: the view's shape, strides
-- and offset within a contiguous base; a base that is not contiguous, or a
-- view with a stride of 0 (expand), is not handled (graph.check_current
-- then refuses the stale tensor).
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local G = require 'lunet.autograd.graph'
local C = core.C
local record, is_tensor = T.record, T.is_tensor
local node, edge, attach, zeros_as = G.node, G.edge, G.attach, G.zeros_as

local V = {}

-- the view's region in its base: {shape, stride, offset} or nil
function V.geometry(v, b)
  if C.ln_same_storage(v.p, b.p) ~= 1 or C.ln_is_contiguous(b.p) ~= 1 then return nil end
  local stride = v:stride()
  for i = 1, #stride do if stride[i] == 0 then return nil end end
  return { shape = v:size(), stride = stride, off = tonumber(v.p.offset - b.p.offset), bshape = b:size() }
end

-- the base's gradient: the region's part to the op that wrote it, the rest to the old base
local function copy_slices_bw(n, g)
  local gb = g:contiguous()
  if C.ln_same_storage(gb.p, g.p) == 1 then gb = g:clone() end   -- (the incoming gradient may be shared: zeroed below)
  local geo = n.geo
  local region = gb:as_strided(geo.shape, geo.stride, geo.off)
  local gr = n[2] and region:clone() or nil
  C.ln_fill_(region.p, 0)
  return gb, gr
end

-- the view's gradient placed in zeros of the base's shape
local function as_strided_bw(n, g)
  local geo = n.geo
  local z = zeros_as(geo.bshape, g)
  T.check(C.ln_copy_(z:as_strided(geo.shape, geo.stride, geo.off).p, g.p))
  return z
end

local function view_node(b, geo)
  local n = node(as_strided_bw, 'as_strided', edge(b))
  n.geo, n.view = geo, true
  return n
end

-- the base v keeps (nil: none, or one that lost its history since: detach_)
function V.base_of(v)
  local r = record(v)
  local b = r and r.base
  if b and v.p.grad_flag ~= 0 and b.p.grad_flag == 0 then return nil end
  return b
end

-- r, a view of a made while recording: remember the root of a's views
function V.set_base(r, a)
  if C.ln_same_storage(r.p, a.p) ~= 1 then return end   -- (reshape may copy)
  local ra = record(a)
  record(r, true).base = ra and ra.base or a
end

-- after view v (of base b, region geo) was written in place: b_edge is b's
-- history before the write, src_edge the op's result's (false: a constant)
function V.rebase(b, v, geo, b_edge, src_edge)
  local cs = node(copy_slices_bw, 'copy_slices', b_edge, src_edge)
  cs.geo = geo
  attach(b, cs)
  attach(v, view_node(b, geo))
  return v
end

-- x's grad_fn made again from its base, when x is a view whose storage was
-- written since and the base's own history is current; nil otherwise
function V.regenerate(x, r)
  local b = r.base
  if not is_tensor(b) then return nil end
  local rb = record(b)
  if rb and rb.grad_fn and rb.version ~= C.ln_storage_history_version(b.p) then return nil end
  local geo = V.geometry(x, b)
  if not geo then return nil end
  local n = view_node(b, geo)
  attach(x, n)
  return n
end

return V
