-- lunet.nn.functional's distances cosine_similarity, pairwise_distance and
-- the losses built on them: triplet_margin_loss, cosine_embedding_loss,
-- margin_ranking_loss, as PyTorch 1.13's (its formulas, eps placements and
-- broadcasting), composed of differentiable tensor ops. Installed into F by
-- lunet.nn.functional; returns the forms that take the caller's name (the
-- modules' errors name the module: "nn.TripletMarginLoss: ...").
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local raise, check_options, positional, one_of = options.raise, options.check, options.positional, options.one_of

return function(F, h)
  local need, sum_all = h.need, h.sum_all

  local function shape_str(t) return '{' .. table.concat(t:size(), ',') .. '}' end

  local function need_float(fn, x, what)
    need(fn, x, what)
    if not x:is_floating_point() then
      raise(('%s: %s must be a floating-point tensor, got %s'):format(fn, what, x.dtype))
    end
    return x
  end

  -- the shape a and b broadcast to, or an error naming both
  local function broadcast(fn, a, an, b, bn)
    local sa, sb = a:size(), b:size()
    local n, out = math.max(#sa, #sb), {}
    for i = 1, n do
      local x, y = sa[i - n + #sa] or 1, sb[i - n + #sb] or 1
      if x ~= y and x ~= 1 and y ~= 1 then
        raise(('%s: %s %s and %s %s differ (and do not broadcast)'):format(fn, an, shape_str(a), bn, shape_str(b)))
      end
      out[i] = x == 1 and y or x
    end
    return out
  end

  local function same(a, b)
    if #a ~= #b then return false end
    for i = 1, #a do if a[i] ~= b[i] then return false end end
    return true
  end

  local function number(fn, what, v)
    if type(v) ~= 'number' or v ~= v then raise(('%s: %s must be a number, got %s'):format(fn, what, tostring(v))) end
    return v
  end

  local function reduce(l, r)
    if r == 'none' then return l end
    local s = sum_all(l)
    if r == 'sum' then return s end
    return s / l:numel()
  end

  -- torch.norm(d, p, dim, keepdim) with its gradient: 0 where the norm is 0
  -- (a sqrt or a power of a sum that is 0 would give NaN or inf)
  local function vnorm(d, p, dim, keepdim)
    if p == math.huge then return d:abs():amax(dim, keepdim) end
    if p == 1 then return d:abs():sum(dim, keepdim) end
    if p == 0 then return d:ne(0):to(d.dtype):sum(dim, keepdim) + (d * 0):sum(dim, keepdim) end
    local s = p == 2 and (d * d):sum(dim, keepdim) or d:abs():pow(p):sum(dim, keepdim)
    local pos = s:ne(0)   -- (a NaN stays NaN)
    s = s:where(pos, 1)
    return (p == 2 and s:sqrt() or s:pow(1 / p)):where(pos, 0)
  end

  -- v clamped to >= eps, its gradient v's own (PyTorch clamps a clone in place under no_grad)
  local function clamp_value(v, eps) return v + (v:clamp_min(eps) - v):detach() end

  -- ---- cosine_similarity(x1, x2[, dim = 2[, eps = 1e-8]]) ------------------------------------
  -- sum(x1 / sqrt(max(|x1|^2, eps^2)) * x2 / sqrt(max(|x2|^2, eps^2))) along dim, x1 and x2
  -- broadcast first (PyTorch 1.13's: the clamps leave the gradients of the squared norms)
  local COS_OPTS, COS_POSITIONAL = { dim = 'number', eps = 'number' }, { 'dim', 'eps' }
  local function cosine_similarity(fn, x1, x2, dim, eps)
    need_float(fn, x1, 'x1'); need_float(fn, x2, 'x2')
    local shape = broadcast(fn, x1, 'x1', x2, 'x2')   -- (the norms are of the broadcast vectors)
    if not same(x1:size(), shape) then x1 = x1:expand(shape) end
    if not same(x2:size(), shape) then x2 = x2:expand(shape) end
    local d = T.cdim(fn, x1, dim) + 1
    local s1, s2 = clamp_value((x1 * x1):sum(d, true), eps * eps), clamp_value((x2 * x2):sum(d, true), eps * eps)
    return ((x1 / s1:sqrt()) * (x2 / s2:sqrt())):sum(d)   -- (PyTorch's order, bit for bit in float32)
  end
  local function cos_opts(fn, ...)
    local o = check_options(fn, positional(fn, COS_POSITIONAL, ...), COS_OPTS) or {}
    return { dim = o.dim or 2, eps = number(fn, 'eps', o.eps or 1e-8) }
  end
  function F.cosine_similarity(x1, x2, ...)
    local o = cos_opts('cosine_similarity', ...)
    return cosine_similarity('cosine_similarity', x1, x2, o.dim, o.eps)
  end

  -- ---- pairwise_distance(x1, x2[, p = 2[, eps = 1e-6[, keepdim = false]]]) ---------------------
  -- the p-norm of x1 - x2 + eps along the last dim
  local PD_OPTS, PD_POSITIONAL = { p = 'number', eps = 'number', keepdim = 'boolean' }, { 'p', 'eps', 'keepdim' }
  local function pairwise_distance(fn, x1, x2, p, eps, keepdim, n1, n2)
    need_float(fn, x1, n1 or 'x1'); need_float(fn, x2, n2 or 'x2')
    local nd = #broadcast(fn, x1, n1 or 'x1', x2, n2 or 'x2')
    local d = x1 - x2 + eps
    if nd == 0 then return vnorm(d:reshape(1), p, 1, false) end   -- (PyTorch: the norm of the one element)
    return vnorm(d, p, nd, keepdim)
  end
  local function pd_opts(fn, o)
    local p = number(fn, 'p', o.p or 2)   -- (PyTorch takes any p, negative ones too)
    return { p = p, eps = number(fn, 'eps', o.eps or 1e-6), keepdim = o.keepdim or false }
  end
  function F.pairwise_distance(x1, x2, ...)
    local fn = 'pairwise_distance'
    local o = pd_opts(fn, check_options(fn, positional(fn, PD_POSITIONAL, ...), PD_OPTS) or {})
    return pairwise_distance(fn, x1, x2, o.p, o.eps, o.keepdim)
  end

  -- ---- triplet_margin_loss(anchor, positive, negative[, opts]) ----------------------------------
  -- max(d(a, p) - d(a, n) + margin, 0), d the pairwise distance; swap: d(a, n)
  -- replaced by d(p, n) where that is smaller
  local TRIPLET_OPTS = { margin = 'number', p = 'number', eps = 'number', swap = 'boolean', reduction = 'string' }
  local function triplet_opts(fn, o)
    o = check_options(fn, o, TRIPLET_OPTS) or {}
    one_of(fn, 'reduction', o.reduction, options.REDUCTIONS)
    local r = pd_opts(fn, o)
    r.margin, r.swap, r.reduction = number(fn, 'margin', o.margin or 1), o.swap or false, o.reduction or 'mean'
    return r
  end
  local function triplet_margin_loss(fn, a, pos, neg, o)
    need_float(fn, a, 'anchor'); need_float(fn, pos, 'positive'); need_float(fn, neg, 'negative')
    if a:dim() ~= pos:dim() or a:dim() ~= neg:dim() then
      raise(('%s: anchor, positive and negative must have the same number of dims, got %s, %s and %s'):format(fn,
        shape_str(a), shape_str(pos), shape_str(neg)))
    end
    local dp = pairwise_distance(fn, a, pos, o.p, o.eps, false, 'anchor', 'positive')
    local dn = pairwise_distance(fn, a, neg, o.p, o.eps, false, 'anchor', 'negative')
    if o.swap then dn = dn:minimum(pairwise_distance(fn, pos, neg, o.p, o.eps, false, 'positive', 'negative')) end
    return reduce((dp - dn + o.margin):clamp_min(0), o.reduction)
  end
  function F.triplet_margin_loss(a, pos, neg, opts)
    local fn = 'triplet_margin_loss'
    return triplet_margin_loss(fn, a, pos, neg, triplet_opts(fn, opts))
  end

  -- ---- cosine_embedding_loss(x1, x2, target[, {margin = 0, reduction}]) -------------------------
  -- 1 - cos where target is 1, max(cos - margin, 0) where it is -1 (0 elsewhere);
  -- cos = x1.x2 / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12)) along the last dim
  local MARGIN_OPTS = { margin = 'number', reduction = 'string' }
  local function margin_opts(fn, o)
    o = check_options(fn, o, MARGIN_OPTS) or {}
    one_of(fn, 'reduction', o.reduction, options.REDUCTIONS)
    return { margin = number(fn, 'margin', o.margin or 0), reduction = o.reduction or 'mean' }
  end
  local EPSILON = 1e-12
  local function cosine_embedding_loss(fn, x1, x2, y, o)
    need_float(fn, x1, 'input1'); need_float(fn, x2, 'input2'); need(fn, y, 'target')
    local td = y:dim()
    if td > 1 then raise(('%s: target must be 0-d or 1-d, got %s'):format(fn, shape_str(y))) end
    if x1:dim() ~= td + 1 or x2:dim() ~= td + 1 then
      raise(('%s: a %d-d target needs %d-d inputs, got %s and %s'):format(fn, td, td + 1, shape_str(x1), shape_str(x2)))
    end
    local shape = broadcast(fn, x1, 'input1', x2, 'input2')
    if td == 1 and y:size(1) ~= shape[1] and y:size(1) ~= 1 and shape[1] ~= 1 then
      raise(('%s: target %s and the inputs %s differ in the batch size'):format(fn, shape_str(y), shape_str(x1)))
    end
    local d = td + 1
    local prod = (x1 * x2):sum(d)
    local m1, m2 = (x1 * x1):sum(d) + EPSILON, (x2 * x2):sum(d) + EPSILON
    local cos = prod / (m1 * m2):sqrt()
    local l = (1 - cos):where(y:eq(1), 0) + (cos - o.margin):clamp_min(0):where(y:eq(-1), 0)
    return reduce(l, o.reduction)
  end
  function F.cosine_embedding_loss(x1, x2, y, opts)
    local fn = 'cosine_embedding_loss'
    return cosine_embedding_loss(fn, x1, x2, y, margin_opts(fn, opts))
  end

  -- ---- margin_ranking_loss(x1, x2, target[, {margin = 0, reduction}]) ---------------------------
  -- max(-target (x1 - x2) + margin, 0)
  local function margin_ranking_loss(fn, x1, x2, y, o)
    need_float(fn, x1, 'input1'); need_float(fn, x2, 'input2'); need_float(fn, y, 'target')
    if x1:dim() ~= x2:dim() or x1:dim() ~= y:dim() then
      raise(('%s: input1, input2 and target must have the same number of dims, got %s, %s and %s'):format(fn,
        shape_str(x1), shape_str(x2), shape_str(y)))
    end
    broadcast(fn, x1, 'input1', x2, 'input2'); broadcast(fn, x1, 'input1', y, 'target')
    broadcast(fn, x2, 'input2', y, 'target')
    return reduce((-y * (x1 - x2) + o.margin):clamp_min(0), o.reduction)
  end
  function F.margin_ranking_loss(x1, x2, y, opts)
    local fn = 'margin_ranking_loss'
    return margin_ranking_loss(fn, x1, x2, y, margin_opts(fn, opts))
  end

  return {
    need = need, need_float = need_float, broadcast = broadcast, number = number, reduce = reduce, shape_str = shape_str,
    cos_opts = cos_opts, cosine_similarity = cosine_similarity,
    pd_opts = pd_opts, pairwise_distance = pairwise_distance,
    triplet_opts = triplet_opts, triplet_margin_loss = triplet_margin_loss,
    margin_opts = margin_opts, cosine_embedding_loss = cosine_embedding_loss, margin_ranking_loss = margin_ranking_loss,
  }
end
