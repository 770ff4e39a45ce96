-- lunet.nn.functional's losses soft_margin_loss, multilabel_soft_margin_loss,
-- multi_margin_loss, poisson_nll_loss, gaussian_nll_loss, as PyTorch 1.13's
-- (its formulas, clamps and broadcasting), composed of differentiable tensor
-- ops. Installed into F by lunet.nn.functional with the helpers of
-- functional_distance; returns the forms that take the caller's name.
local A = require 'lunet.autograd'
local factory = require 'lunet.factory'
local options = require 'lunet.options'
local raise, check_options, one_of = options.raise, options.check, options.one_of

return function(F, h)
  local need, need_float, broadcast, number, reduce, shape_str =
    h.need, h.need_float, h.broadcast, h.number, h.reduce, h.shape_str

  local function reduction_opts(fn, o, known)
    o = check_options(fn, o, known) or {}
    one_of(fn, 'reduction', o.reduction, options.REDUCTIONS)
    return o
  end

  -- ---- soft_margin_loss(input, target[, {reduction}]): log(1 + exp(-target input)) ------------
  local REDUCE_OPTS = { reduction = 'string' }
  local function soft_margin_opts(fn, o) return { reduction = reduction_opts(fn, o, REDUCE_OPTS).reduction or 'mean' } end
  local function soft_margin_loss(fn, x, y, o)
    need_float(fn, x, 'input'); need_float(fn, y, 'target')
    broadcast(fn, x, 'input', y, 'target')
    return reduce((-x * y):exp():log1p(), o.reduction)   -- (PyTorch's form: inf where exp overflows)
  end
  function F.soft_margin_loss(x, y, opts)
    local fn = 'soft_margin_loss'
    return soft_margin_loss(fn, x, y, soft_margin_opts(fn, opts))
  end

  -- ---- multilabel_soft_margin_loss(input, target[, {weight, reduction}]) ------------------------
  -- -(t logsigmoid(x) + (1 - t) logsigmoid(-x)) weighted, averaged over the
  -- classes (the last dim): one value per sample
  local WEIGHT_OPTS = { weight = 'tensor', reduction = 'string' }
  local function weight_opts(fn, o)
    o = reduction_opts(fn, o, WEIGHT_OPTS)
    return { weight = o.weight, reduction = o.reduction or 'mean' }
  end
  local function logsigmoid(x) return -F.softplus(-x) end
  local function multilabel_soft_margin_loss(fn, x, y, o)
    need_float(fn, x, 'input'); need_float(fn, y, 'target')
    if x:dim() < 1 then raise(fn .. ': input must have a class dim (1-d or more), got a 0-d tensor') end
    broadcast(fn, x, 'input', y, 'target')
    local l = -(y * logsigmoid(x) + (1 - y) * logsigmoid(-x))
    if o.weight then
      need_float(fn, o.weight, 'weight')
      broadcast(fn, x, 'input', o.weight, 'weight')
      l = l * o.weight
    end
    local cd = x:dim()   -- (PyTorch: the input's last dim, also when the target broadcasts wider)
    return reduce(l:sum(cd) / x:size(cd), o.reduction)
  end
  function F.multilabel_soft_margin_loss(x, y, opts)
    local fn = 'multilabel_soft_margin_loss'
    return multilabel_soft_margin_loss(fn, x, y, weight_opts(fn, opts))
  end

  -- ---- multi_margin_loss(input (N, C) or (C), target (N) in 1..C[, {p, margin, weight, reduction}])
  -- sum over j ~= y of max(0, margin - x[y] + x[j])^p (times weight[y]) / C
  local MM_OPTS = { p = 'number', margin = 'number', weight = 'tensor', reduction = 'string' }
  local function multi_margin_opts(fn, o)
    o = reduction_opts(fn, o, MM_OPTS)
    local p = o.p or 1
    if p ~= 1 and p ~= 2 then raise(('%s: p must be 1 or 2, got %s'):format(fn, tostring(p))) end
    if o.weight ~= nil then
      need_float(fn, o.weight, 'weight')
      if o.weight:dim() > 1 then raise(('%s: weight must be 1-d, got %s'):format(fn, shape_str(o.weight))) end
    end
    return { p = p, margin = number(fn, 'margin', o.margin or 1), weight = o.weight, reduction = o.reduction or 'mean' }
  end
  local function multi_margin_loss(fn, x, y, o)
    need_float(fn, x, 'input'); need(fn, y, 'target')
    local nd = x:dim()
    if nd > 2 or x:numel() == 0 then
      raise(('%s: input must be a non-empty (C) or (N, C) tensor, got %s'):format(fn, shape_str(x)))
    end
    local N, Cn = nd == 2 and x:size(1) or 1, nd >= 1 and x:size(nd) or 1
    if y:dim() > 1 or y:numel() ~= N then
      raise(('%s: target must hold %d label%s (a 0-d or 1-d tensor), got %s'):format(fn, N, N == 1 and '' or 's', shape_str(y)))
    end
    if y:is_floating_point() or y.dtype == 'bool' then
      raise(('%s: target must hold class labels (an integer tensor), got %s'):format(fn, y.dtype))
    end
    if y.dtype ~= 'int64' then y = y:to('int64') end
    local lo, hi = A.no_grad(function() return tonumber(y:min():item()), tonumber(y:max():item()) end)
    if lo < 1 or hi > Cn then
      raise(('%s: target holds a label %d out of range 1..%d'):format(fn, lo < 1 and lo or hi, Cn))
    end
    local w = o.weight
    if w and w:numel() ~= Cn then
      raise(('%s: weight %s must have one value per class (%d)'):format(fn, shape_str(w), Cn))
    end
    local X, t = x:reshape(N, Cn), y:reshape(N, 1)
    local z = X - X:gather(2, t) + o.margin
    local others = factory.arange(1, Cn + 1, { dtype = 'int64', device = x.device }):reshape(1, Cn):ne(t)
    local l = o.p == 2 and z * z or z
    l = l:where(z:gt(0):logical_and(others), 0)   -- (PyTorch: a gradient only where z > 0)
    if w then l = l * w:reshape(Cn):index_select(1, t:reshape(N)):reshape(N, 1) end
    l = l:sum(2) / Cn
    if o.reduction == 'none' then return l:reshape(y:size()) end
    return reduce(l, o.reduction)
  end
  function F.multi_margin_loss(x, y, opts)
    local fn = 'multi_margin_loss'
    return multi_margin_loss(fn, x, y, multi_margin_opts(fn, opts))
  end

  -- ---- poisson_nll_loss(input, target[, {log_input = true, full = false, eps = 1e-8, reduction}])
  -- exp(x) - t x (log_input), else x - t log(x + eps); full adds the Stirling
  -- term t log(t) - t + log(2 pi t) / 2 where t > 1
  local POISSON_OPTS = { log_input = 'boolean', full = 'boolean', eps = 'number', reduction = 'string' }
  local function poisson_opts(fn, o)
    o = reduction_opts(fn, o, POISSON_OPTS)
    local log_input = o.log_input
    if log_input == nil then log_input = true end
    return { log_input = log_input, full = o.full or false, eps = number(fn, 'eps', o.eps or 1e-8),
      reduction = o.reduction or 'mean' }
  end
  local function poisson_nll_loss(fn, x, y, o)
    need_float(fn, x, 'input'); need_float(fn, y, 'target')
    broadcast(fn, x, 'input', y, 'target')
    local l
    if o.log_input then l = x:exp() - y * x else l = x - y * (x + o.eps):log() end
    if o.full then
      l = l + (y * y:log() - y + 0.5 * (2 * math.pi * y):log()):masked_fill(y:le(1), 0)
    end
    return reduce(l, o.reduction)
  end
  function F.poisson_nll_loss(x, y, opts)
    local fn = 'poisson_nll_loss'
    return poisson_nll_loss(fn, x, y, poisson_opts(fn, opts))
  end

  -- ---- gaussian_nll_loss(input, target, var[, {full = false, eps = 1e-6, reduction}]) ----------
  -- (log(max(var, eps)) + (input - target)^2 / max(var, eps)) / 2 (+ log(2 pi) / 2
  -- with full); var has the input's shape, or it without the last dim, or
  -- that with a last dim of 1 (one variance per sample). The clamp leaves
  -- var's gradient as it is (PyTorch clamps a clone under no_grad).
  local GAUSS_OPTS = { full = 'boolean', eps = 'number', reduction = 'string' }
  local function gaussian_opts(fn, o)
    o = reduction_opts(fn, o, GAUSS_OPTS)
    return { full = o.full or false, eps = number(fn, 'eps', o.eps or 1e-6), reduction = o.reduction or 'mean' }
  end
  local function same(a, b)
    if #a ~= #b then return false end
    for i = 1, #a do if a[i] ~= b[i] then return false end end
    return true
  end
  local function but_last(a) return { unpack(a, 1, math.max(#a - 1, 0)) } end
  local function gaussian_nll_loss(fn, x, y, var, o)
    need_float(fn, x, 'input'); need_float(fn, y, 'target'); need_float(fn, var, 'var')
    local xs, vs = x:size(), var:size()
    if not same(xs, vs) then   -- (PyTorch's tests, in its order)
      if same(but_last(xs), vs) then var = var:unsqueeze(#vs + 1)
      elseif not (#vs >= 1 and same(but_last(xs), but_last(vs)) and vs[#vs] == 1) then
        raise(('%s: var %s is of incorrect size: give the input\'s %s, it without the last dim, or that with a last dim of 1')
          :format(fn, shape_str(var), shape_str(x)))
      end
    end
    broadcast(fn, x, 'input', y, 'target')
    if var:numel() > 0 and A.no_grad(function() return var:lt(0):any():item() end) then
      raise(fn .. ': var has negative entries')
    end
    local v = var + (var:clamp_min(o.eps) - var):detach()
    local d = x - y
    local l = (v:log() + d * d / v) * 0.5
    if o.full then l = l + 0.5 * math.log(2 * math.pi) end
    return reduce(l, o.reduction)
  end
  function F.gaussian_nll_loss(x, y, var, opts)
    local fn = 'gaussian_nll_loss'
    return gaussian_nll_loss(fn, x, y, var, gaussian_opts(fn, opts))
  end

  return {
    soft_margin_opts = soft_margin_opts, soft_margin_loss = soft_margin_loss,
    weight_opts = weight_opts, multilabel_soft_margin_loss = multilabel_soft_margin_loss,
    multi_margin_opts = multi_margin_opts, multi_margin_loss = multi_margin_loss,
    poisson_opts = poisson_opts, poisson_nll_loss = poisson_nll_loss,
    gaussian_opts = gaussian_opts, gaussian_nll_loss = gaussian_nll_loss,
  }
end
