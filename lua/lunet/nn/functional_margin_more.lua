-- lunet.nn.functional's hinge_embedding_loss, multilabel_margin_loss and
-- triplet_margin_with_distance_loss, as PyTorch 1.13's, composed of
-- differentiable tensor ops. Installed into F by lunet.nn.functional with the
-- helpers of functional_distance; returns the forms that take the caller's name.
local A = require 'lunet.autograd'
local factory = require 'lunet.factory'
local options = require 'lunet.options'
local is_tensor = require('lunet.tensor').is_tensor
local raise, check_options, one_of = options.raise, options.check, options.one_of

return function(F, h, distance)
  local need, need_float, broadcast, number, reduce, shape_str =
    h.need, h.need_float, h.broadcast, h.number, h.reduce, h.shape_str

  -- ---- hinge_embedding_loss(input, target[, {margin = 1, reduction}]) ---------------------------
  -- input where target ~= -1, plus max(0, margin - input) where target ~= 1 (torch's formula)
  local HINGE_OPTS = { margin = 'number', reduction = 'string' }
  local function hinge_opts(fn, o)
    o = check_options(fn, o, HINGE_OPTS) or {}
    one_of(fn, 'reduction', o.reduction, options.REDUCTIONS)
    return { margin = number(fn, 'margin', o.margin or 1), reduction = o.reduction or 'mean' }
  end
  local function hinge_embedding_loss(fn, x, y, o)
    need_float(fn, x, 'input'); need(fn, y, 'target')
    broadcast(fn, x, 'input', y, 'target')
    local l = (o.margin - x):clamp_min(0):where(y:ne(1), 0) + x:where(y:ne(-1), 0)
    return reduce(l, o.reduction)
  end
  function F.hinge_embedding_loss(x, y, opts)
    local fn = 'hinge_embedding_loss'
    return hinge_embedding_loss(fn, x, y, hinge_opts(fn, opts))
  end

  -- ---- multilabel_margin_loss(input (C) or (N, C), target of its shape[, {reduction}]) ----------
  -- target: each sample's labels 1..C, ended by the first 0 (torch's -1); the sum
  -- over its labels j and the classes i not among them of max(0, 1 - x[j] + x[i]), / C
  local REDUCE_OPTS = { reduction = 'string' }
  local function reduction_opts(fn, o)
    o = check_options(fn, o, REDUCE_OPTS) or {}
    one_of(fn, 'reduction', o.reduction, options.REDUCTIONS)
    return { reduction = o.reduction or 'mean' }
  end
  local function multilabel_margin_loss(fn, x, y, o)
    need_float(fn, x, 'input'); need(fn, y, 'target')
    local nd = x:dim()
    if nd > 2 or x:numel() == 0 then
      raise(('%s: input must be a non-empty (C) or (N, C) tensor, got %s'):format(fn, shape_str(x)))
    end
    if y:is_floating_point() or y.dtype == 'bool' then
      raise(('%s: target must hold class labels (an integer tensor), got %s'):format(fn, y.dtype))
    end
    if y:dim() ~= nd or y:numel() ~= x:numel() or (nd == 2 and y:size(1) ~= x:size(1)) then
      raise(('%s: target %s must have the input\'s shape %s'):format(fn, shape_str(y), shape_str(x)))
    end
    local N, Cn = nd == 2 and x:size(1) or 1, nd >= 1 and x:size(nd) or 1
    local X, Y = x:reshape(N, Cn), y:reshape(N, Cn):to('int64')
    local valid, lab, is_target = A.no_grad(function()
      local lo, hi = Y:min():item(), Y:max():item()
      if lo < 0 or hi > Cn then
        raise(('%s: target holds a label %d out of range 1..%d (0 ends the labels)'):format(fn, lo < 0 and lo or hi, Cn))
      end
      local valid = Y:ne(0):to('int64'):cumprod(2):gt(0)   -- (labels before the first 0)
      local lab = Y:where(valid, 1)
      local is_target = X:new_zeros({ N, Cn }):scatter_add(2, lab, valid:to(x.dtype)):gt(0)
      return valid, lab, is_target
    end)
    -- z[n][j][i] = 1 - x[lab j] + x[i], for labels j and non-labels i
    local z = 1 - X:gather(2, lab):reshape(N, Cn, 1) + X:reshape(N, 1, Cn)
    local keep = valid:reshape(N, Cn, 1):logical_and(is_target:logical_not():reshape(N, 1, Cn))
    local l = z:where(z:gt(0):logical_and(keep), 0):sum({ 2, 3 }) / Cn   -- (a gradient only where z > 0)
    if o.reduction == 'none' then return nd == 2 and l or l:reshape({}) end
    return reduce(l, o.reduction)
  end
  function F.multilabel_margin_loss(x, y, opts)
    local fn = 'multilabel_margin_loss'
    return multilabel_margin_loss(fn, x, y, reduction_opts(fn, opts))
  end

  -- ---- triplet_margin_with_distance_loss(anchor, positive, negative[, opts]) --------------------
  -- max(d(a, p) - d(a, n) + margin, 0), d = distance_function (pairwise_distance
  -- by default); swap: d(a, n) replaced by d(p, n) where that is smaller
  local TMD_OPTS = { distance_function = true, margin = 'number', swap = 'boolean', reduction = 'string' }
  local function tmd_opts(fn, o)
    o = check_options(fn, o, TMD_OPTS) or {}
    one_of(fn, 'reduction', o.reduction, options.REDUCTIONS)
    local df = o.distance_function   -- (a function, or a callable such as an nn module)
    if df ~= nil and type(df) ~= 'function' and not (type(df) == 'table' and getmetatable(df) and getmetatable(df).__call) then
      raise(('%s: distance_function must be a function, got %s'):format(fn, type(df)))
    end
    local m = number(fn, 'margin', o.margin or 1)   -- (torch 1.13 takes any margin)
    return { distance_function = o.distance_function, margin = m, swap = o.swap or false,
      reduction = o.reduction or 'mean' }
  end
  local function triplet_margin_with_distance_loss(fn, a, p, n, o)
    need(fn, a, 'anchor'); need(fn, p, 'positive'); need(fn, n, 'negative')
    if a:dim() ~= p:dim() or a:dim() ~= n:dim() then
      raise(('%s: anchor, positive and negative must have the same number of dims, got %s, %s and %s'):format(fn,
        shape_str(a), shape_str(p), shape_str(n)))
    end
    local d = o.distance_function or function(u, v)
      return distance.pairwise_distance(fn, u, v, 2, 1e-6, false)
    end
    local function dist(u, v, what)
      local r = d(u, v)
      if not is_tensor(r) then raise(('%s: distance_function must return a tensor (%s), got %s'):format(fn, what, type(r))) end
      return r
    end
    local dp, dn = dist(a, p, 'anchor, positive'), dist(a, n, 'anchor, negative')
    if o.swap then dn = dn:minimum(dist(p, n, 'positive, negative')) end
    return reduce((dp - dn + o.margin):clamp_min(0), o.reduction)
  end
  function F.triplet_margin_with_distance_loss(a, p, n, opts)
    local fn = 'triplet_margin_with_distance_loss'
    return triplet_margin_with_distance_loss(fn, a, p, n, tmd_opts(fn, opts))
  end

  return {
    hinge_opts = hinge_opts, hinge_embedding_loss = hinge_embedding_loss,
    reduction_opts = reduction_opts, multilabel_margin_loss = multilabel_margin_loss,
    tmd_opts = tmd_opts, triplet_margin_with_distance_loss = triplet_margin_with_distance_loss,
  }
end
