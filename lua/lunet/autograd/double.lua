-- lunet.autograd.double: a node's backward run so that it records itself
-- (create_graph = true: gradient penalties, Hessian-vector products). The
-- engine calls D.run(n, g) instead of n.fn(n, g) with grad mode on: the
-- formula sees its saved tensors "live" (an alias carrying the input's node,
-- or the leaf itself, as torch's SavedVariable unpacks them), so formulas
-- made of tensor ops record their own backward. Formulas that call a C
-- kernel have a differentiable `double` here; the other nodes (no such form
-- yet, or made outside the formulas) run as usual and hand back gradients
-- whose own backward raises a named error: never a silently zero second
-- derivative. Only the create_graph path comes here.
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local formulas = require 'lunet.autograd.formulas'
local C = core.C
local is_table, is_tensor, wrap = core.is_table, T.is_tensor, T.wrap

local D = {}

-- the kinds whose formulas are made of tensor ops (a C kernel call in one of
-- them is listed in NOT; relu's has a double below)
local KINDS = { unary = true, binary = true, pair = true, view = true, reduce = true, extreme = true, index = true }
local NOT = { polygamma = true }
-- the layers of formulas/act_loss.lua: tensor ops too
local TENSOR_LAYERS = {}
for _, name in ipairs({ 'relu6', 'prelu', 'l1_loss',
  'smooth_l1_loss', 'huber_loss', 'binary_cross_entropy', 'kl_div' }) do TENSOR_LAYERS[name] = true end
-- nodes made outside the formulas whose backward is made of tensor ops and
-- saves no input (fold: pad, index_select of g; conv_transpose3d's col2im)
local TENSOR_NODES = { fold = true }
-- saved field -> the edge it is the input of (0: the node's own output)
local LIVE = { a = 1, b = 2, x = 1, r = 0 }
local LIVE_BY_NAME = { addmm = { a = 2, b = 3 } }

-- the live form of saved tensor s: the leaf itself, or an alias with node e as its grad_fn
local function live(s, e)
  if not e then return s end
  if not is_table(e) then return e end   -- (a leaf: the very tensor saved)
  return G.attach(wrap(C.ln_alias(s.p)), e)
end

local function F() return require('lunet.nn.functional') end

-- differentiable backwards of the formulas that call C kernels (n: the live view of the node)
local DOUBLE = {}
DOUBLE.relu = function(n, g) return g * n.r:gt(0):to(g.dtype) end
-- silu, gelu, mish: their backward kernels' formulas as tensor ops
DOUBLE.silu = function(n, g)
  local x = n.a
  local s = x:sigmoid()
  return g * s * ((1 - s) * x + 1)
end
DOUBLE.mish = function(n, g)
  local x = n.a
  local sig = x:sigmoid()
  local tsp = x:exp():log1p():tanh()
  return g * (tsp + x * sig * (1 - tsp * tsp))
end
-- hardswish, hardsigmoid, softplus, elu (celu, selu), tanh, sigmoid: their
-- backward kernels' formulas (formulas/act_loss.lua, pointwise.lua) as tensor ops
local SIXTH_F = tonumber(require('ffi').new('float', 1 / 6))
DOUBLE.hardswish = function(n, g)
  local x = n.a
  return g:where(x:gt(3), g * (x / 3 + 0.5)):where(x:lt(-3):logical_not(), 0)
end
DOUBLE.hardsigmoid = function(n, g)
  local x = n.a
  return (g * SIXTH_F):where(x:gt(-3):logical_and(x:lt(3)), 0)
end
DOUBLE.softplus = function(n, g)
  local xb = n.a * n.x1
  local z = xb:exp()
  return g:where(xb:gt(n.x2), g * z / (z + 1))
end
DOUBLE.elu = function(n, g)
  local x, alpha, scale, iscale = n.a, n.x1, n.x2, n.x3
  return (g * scale):where(x:gt(0), g * ((x * iscale):exp() * (iscale * alpha * scale)))
end
DOUBLE.tanh = function(n, g) local r = n.r; return g * (1 - r * r) end
DOUBLE.sigmoid = function(n, g) local r = n.r; return g * ((1 - r) * r) end
DOUBLE.gelu = function(n, g)
  local x = n.a
  if n.x1 then   -- approximate = 'tanh'
    local beta, kappa = math.sqrt(2 / math.pi), 0.044715
    local t = ((x + x * x * x * kappa) * beta):tanh()
    return g * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * beta * (x * x * (3 * kappa) + 1))
  end
  local cdf = ((x * (1 / math.sqrt(2))):erf() + 1) * 0.5
  return g * (cdf + x * (x * x * -0.5):exp() * (1 / math.sqrt(2 * math.pi)))
end
DOUBLE.linear = function(n, g)
  local gx, gw, gb
  if n[1] then gx = g:matmul(n.b) end
  if n[2] then gw = g:t():matmul(n.a) end
  if n[3] then gb = g:sum(1) end
  return gx, gw, gb
end
local function softmax2(n, g)
  local d, r = n.x1 + 1, n.r
  if n.x2 == 0 then return r * (g - (g * r):sum(d, true)) end
  return g - r:exp() * g:sum(d, true)
end
DOUBLE.softmax, DOUBLE.log_softmax = softmax2, softmax2
-- nll_loss's input gradient is linear in g: the kernel's for a unit g, times g
DOUBLE.nll_loss = function(n, g)
  local ones = wrap(C.ln_empty(g.p.ndim, g.p.shape, g.p.dtype_id, g.p.device_id))
  C.ln_fill_(ones.p, 1)
  local m = wrap(C.ln_empty(n.a.p.ndim, n.a.p.shape, n.a.p.dtype_id, n.a.p.device_id))
  local w = n.x2
  T.check(C.ln_nll_loss_backward(m.p, ones.p, n.x1.p, w and w.p, n.x3, n.x4, 1))
  if g.p.ndim >= 1 then g = g:unsqueeze(2) end
  return m * g
end
DOUBLE.pad = function(n, g) return g:narrow(3, n.x1 + 1, n.x3):narrow(4, n.x2 + 1, n.x4) end
-- the weight gradient of a convolution (params p, kernel KH x KW) of input x
-- with output gradient g: a convolution of x by g, batch as channels (as
-- torch's). With G groups x's channels of group i go to channels i*N..
-- (batch Cin/G) and g's of group i are the weights of group i: one grouped
-- convolution, not one per group
local function conv_wgrad(x, g, p, KH, KW)
  local ng, xt = p.groups, nil
  if x:size(1) == 0 then return G.zeros_as({ g:size(2), x:size(2) / ng, KH, KW }, g) end   -- (an empty batch)
  if ng == 1 then xt = x:transpose(1, 2)
  else
    local N, Ci, H, W = x:size(1), x:size(2), x:size(3), x:size(4)
    xt = x:reshape(N, ng, Ci / ng, H, W):permute(3, 2, 1, 4, 5):reshape(Ci / ng, ng * N, H, W)
  end
  local k = F().conv2d(xt, g:transpose(1, 2), nil, { stride = { p.dil_h, p.dil_w },
    padding = { p.pad_h, p.pad_w }, dilation = { p.stride_h, p.stride_w }, groups = ng })
  return k:narrow(3, 1, KH):narrow(4, 1, KW):transpose(1, 2)
end
-- conv2d: the input gradient a transposed convolution of g, the weight's conv_wgrad
DOUBLE.conv2d = function(n, g)
  local x, w, p = n.a, n.b, n.x1
  local gx, gw, gb
  local sh, sw, ph, pw, dh, dw = p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w
  local KH, KW = w:size(3), w:size(4)
  if n[1] then
    local H, W, OH, OW = x:size(3), x:size(4), g:size(3), g:size(4)
    local oph = H - ((OH - 1) * sh - 2 * ph + dh * (KH - 1) + 1)
    local opw = W - ((OW - 1) * sw - 2 * pw + dw * (KW - 1) + 1)
    gx = F().conv_transpose2d(g, w, nil, { stride = { sh, sw }, padding = { ph, pw }, output_padding = { oph, opw },
      dilation = { dh, dw }, groups = p.groups })
  end
  if n[2] then gw = conv_wgrad(x, g, p, KH, KW) end
  if n[3] then gb = g:sum({ 1, 3, 4 }) end
  return gx, gw, gb
end
-- conv_transpose2d: x1 the params of the convolution from the output (its
-- first x2 x x3 rows and columns) back to x, whose input gradient is that
-- convolution of g and whose weight gradient is conv_wgrad with g as input
DOUBLE.conv_transpose2d = function(n, g)
  local x, w, p = n.a, n.b, n.x1
  local gk = g
  if n.x2 ~= g:size(3) or n.x3 ~= g:size(4) then gk = g:narrow(3, 1, n.x2):narrow(4, 1, n.x3) end
  local gx, gw, gb
  if n[1] then
    gx = F().conv2d(gk, w, nil, { stride = { p.stride_h, p.stride_w }, padding = { p.pad_h, p.pad_w },
      dilation = { p.dil_h, p.dil_w }, groups = p.groups })
  end
  if n[2] then gw = conv_wgrad(gk, x, p, w:size(3), w:size(4)) end
  if n[3] then gb = g:sum({ 1, 3, 4 }) end
  return gx, gw, gb
end

-- a linear map of g made by a C kernel, recorded: its backward is the
-- adjoint map (itself recorded the same way): pooling's gradients
local function linear_pair(name_a, ka, name_b, kb)
  local fa, fb
  local function bwa(n, g) return fb(g, n.ctx) end
  local function bwb(n, g) return fa(g, n.ctx) end
  local function make(name, k, bw)
    return function(g, ctx)
      local r = S.no_grad(k, g, ctx)
      if not S.grad_enabled or not G.needs(g) then return r end
      local n = G.node(bw, name, G.edge(g))
      n.ctx = ctx
      return G.attach(r, n)
    end
  end
  fa, fb = make(name_a, ka, bwa), make(name_b, kb, bwb)
  return fa, fb
end
local shape4 = require('ffi').new('int64_t[4]')
local function new4(like, N, Cc, H, W)
  shape4[0], shape4[1], shape4[2], shape4[3] = N, Cc, H, W
  return wrap(C.ln_empty(4, shape4, like.p.dtype_id, like.p.device_id))
end
-- avg_pool2d (ctx: params, H, W, OH, OW) and adaptive_avg_pool2d (ctx: H, W, OH, OW)
local avg_bw, avg_fw = linear_pair('avg_pool2d_backward', function(g, c)
  local d = new4(g, g:size(1), g:size(2), c[2], c[3])
  T.check(C.ln_avgpool2d_backward(d.p, g.p, c[1]))
  return d
end, 'avg_pool2d', function(g, c)
  local o = new4(g, g:size(1), g:size(2), c[4], c[5])
  T.check(C.ln_avgpool2d_forward(o.p, g.p, c[1]))
  return o
end)
DOUBLE.avg_pool2d = function(n, g) return avg_bw(g, { n.x1, n.x2, n.x3, g:size(3), g:size(4) }) end
local aavg_bw, aavg_fw = linear_pair('adaptive_avg_pool2d_backward', function(g, c)
  local d = new4(g, g:size(1), g:size(2), c[1], c[2])
  T.check(C.ln_adaptive_avgpool2d_backward(d.p, g.p))
  return d
end, 'adaptive_avg_pool2d', function(g, c)
  local o = new4(g, g:size(1), g:size(2), c[3], c[4])
  T.check(C.ln_adaptive_avgpool2d_forward(o.p, g.p))
  return o
end)
DOUBLE.adaptive_avg_pool2d = function(n, g) return aavg_bw(g, { n.x1, n.x2, g:size(3), g:size(4) }) end
-- interpolate (ctx: mode, align_corners, scales, the input's size, the output's)
local shape5 = require('ffi').new('int64_t[5]')
local function new5(like, s)
  for i = 1, #s do shape5[i - 1] = s[i] end
  return wrap(C.ln_empty(#s, shape5, like.p.dtype_id, like.p.device_id))
end
local interp_bw = linear_pair('interpolate_backward', function(g, c)
  local d = new5(g, c[4])
  T.check(C.ln_interpolate_backward(d.p, g.p, c[1], c[2], c[3]))
  return d
end, 'interpolate', function(g, c)
  local o = new5(g, c[5])
  T.check(C.ln_interpolate_forward(o.p, g.p, c[1], c[2], c[3]))
  return o
end)
DOUBLE.interpolate = function(n, g) return interp_bw(g, { n.x1, n.x2, n.x3, n.x4, g:size() }) end
-- max_pool2d: g put at the argmax positions (x1: 0-based within each plane),
-- a scatter_add (zero second derivative in x, as torch's)
DOUBLE.max_pool2d = function(n, g)
  local N, Cc, H, W = n.a:size(1), n.a:size(2), n.a:size(3), n.a:size(4)
  local m = g:size(3) * g:size(4)
  local idx = (n.x1 + 1):reshape(N, Cc, m)
  return G.zeros_as({ N, Cc, H * W }, g):scatter_add(3, idx, g:reshape(N, Cc, m)):reshape(N, Cc, H, W)
end

-- in-place writes to views (autograd.views): the region {shape, stride, off}
-- of a base of shape bshape (geo), taken out (region) or put into zeros
-- (place), each the other's backward, recorded while grad mode is on
local region, place
local function region_bw(n, g) return place(g, n.geo) end
local function place_bw(n, g) return region(g, n.geo) end
function region(g, geo)
  local r = S.no_grad(function() return g:contiguous():as_strided(geo.shape, geo.stride, geo.off):clone() end)
  if not S.grad_enabled or not G.needs(g) then return r end
  local n = G.node(region_bw, 'as_strided', G.edge(g))
  n.geo = geo
  return G.attach(r, n)
end
function place(g, geo)
  local z = S.no_grad(function()
    local z = G.zeros_as(geo.bshape, g)
    T.check(C.ln_copy_(z:as_strided(geo.shape, geo.stride, geo.off).p, g.p))
    return z
  end)
  if not S.grad_enabled or not G.needs(g) then return z end
  local n = G.node(place_bw, 'as_strided_backward', G.edge(g))
  n.geo = geo
  return G.attach(z, n)
end
-- grid_sample: the gradient of its composition from tensor ops
-- (lunet.nn.functional_grid), the kernel's own, taken with create_graph
local GRID_MODES = { [0] = 'bilinear', 'nearest', 'bicubic' }
local GRID_PADS = { [0] = 'zeros', 'border', 'reflection' }
DOUBLE.grid_sample = function(n, g)
  local ins, at = {}, {}
  if n[1] then ins[#ins + 1] = n.a; at[1] = #ins end
  if n[2] then ins[#ins + 1] = n.b; at[2] = #ins end
  local out = F()._grid_sample_composed(n.a, n.b,
    { mode = GRID_MODES[n.x1], padding_mode = GRID_PADS[n.x2], align_corners = n.x3 == 1 })
  local gs = S.grad(out, ins, { grad_outputs = g, create_graph = true, allow_unused = true })
  return at[1] and gs[at[1]] or nil, at[2] and gs[at[2]] or nil
end

-- (no formula: these nodes are known by name)
local NODES = {
  copy_slices = function(n, g)
    local gr = region(g, n.geo)
    return g - place(gr, n.geo), n[2] and gr or nil
  end,
  as_strided = function(n, g) return place(g, n.geo) end,
  as_strided_backward = place_bw,
}
require('lunet.autograd.double_norm')(DOUBLE)
D.DOUBLE = DOUBLE

-- the error node hung on an unsupported node's gradients
local function refuse(name)
  return function() error(('double backward through %s is not supported yet'):format(name), 0) end
end

-- whether node n (of formula f) records its own backward
local function supported(n, f)
  if not f or n.fn ~= f.backward then return false end
  if DOUBLE[n.name] or TENSOR_LAYERS[n.name] then return true end
  return (KINDS[f.kind] or f.kind == 'custom' and f.backward) and not NOT[n.name] and true or false
end

-- nodes that say where their saved tensors come from (n.live, field -> 1 or
-- 2: that input's edge, 0: the node's own output, or a node: the output of
-- a sibling, lunet.linalg's factorizations): their backwards are made of
-- tensor ops and linalg calls, run on the live tensors
local function run_live(n, g)
  local proxy = setmetatable({}, { __index = n })
  for field, e in pairs(n.live) do
    local s = rawget(n, field)
    if is_tensor(s) then proxy[field] = live(s, e == 0 and n or type(e) == 'number' and n[e] or e) end
  end
  return n.fn(proxy, g)
end

-- n's backward with grad g, recorded (grad mode is on)
function D.run(n, g)
  if n.grads or n.name == 'copy_' then return n.fn(n, g) end   -- (the roots of autograd.grad, autograd.backward; copy_'s tensor ops)
  if n.live then return run_live(n, g) end
  if n.geo and NODES[n.name] then return NODES[n.name](n, g) end
  if TENSOR_NODES[n.name] and not formulas[n.name] then return n.fn(n, g) end
  local f = formulas[n.name]
  if not supported(n, f) then
    -- run as usual, then the gradients carry an error node (when anything
    -- they came from requires grad: g or the node's inputs)
    local gs1, gs2, gs3 = S.no_grad(n.fn, n, g)
    local needs = G.needs(g)
    for i = 1, n.ni or 3 do if n[i] then needs = true end end
    if not needs then return gs1, gs2, gs3 end
    local name = n.name or 'an op'
    -- (its edges: g's and n's inputs, so that autograd.grad reaches it)
    local function mark(t)
      if not is_tensor(t) then return t end
      local e = G.node(refuse(name), name .. ' (double backward)')
      e[1] = G.edge(g)
      for i = 1, n.ni or 3 do e[i + 1] = n[i] or false end
      e.ni = (n.ni or 3) + 1
      return G.attach(wrap(C.ln_alias(t.p)), e)
    end
    if n.ni then
      local out = {}
      for i = 1, n.ni do out[i] = gs1 and mark(gs1[i]) or false end
      return out
    end
    return mark(gs1), mark(gs2), mark(gs3)
  end
  local map = LIVE_BY_NAME[n.name] or LIVE
  local proxy = setmetatable({}, { __index = n })
  for field, i in pairs(map) do
    local s = rawget(n, field)
    if is_tensor(s) then proxy[field] = live(s, i == 0 and n or n[i]) end
  end
  local bw = DOUBLE[n.name] or n.fn
  return bw(proxy, g)
end

return D
