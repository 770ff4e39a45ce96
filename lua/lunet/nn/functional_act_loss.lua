-- lunet.nn.functional's activations silu, hardswish, hardsigmoid, relu6,
-- softplus, mish, prelu (the first five also in place: inplace = true) and losses l1_loss, smooth_l1_loss, huber_loss,
-- binary_cross_entropy, kl_div, as PyTorch 1.13's. Each forward is made of
-- tensor ops run without recording (silu and mish: one kernel each, SLEEF's
-- vector exp/tanh on the CPU); its gradient is one node whose backward
-- is PyTorch's formula (lunet.autograd.formulas.act_loss), so the gradients
-- at the kinks and clamps are PyTorch's too. Installed into F by
-- lunet.nn.functional, which hands over its helpers.
local A = require 'lunet.autograd'
local C = require('lunet.core').C
local wrap = require('lunet.tensor').wrap
local options = require 'lunet.options'
local raise = options.raise
local recorder, records, no_grad = A.recorder, A.records, A.no_grad

return function(F, h)
  local need, same_shape, sum_all, reduction, in_place = h.need, h.same_shape, h.sum_all, h.reduction, h.in_place

  local function need_float(fn, x, what)
    need(fn, x, what)
    if not x:is_floating_point() then
      raise(('%s: %s must be a floating-point tensor, got %s'):format(fn, what, x.dtype))
    end
    return x
  end

  -- run fwd(a, ...) without recording when a tensor among its arguments would be recorded
  local function run(fwd, a, b, c, d, e)
    if records(a, b, c, d, e) then return no_grad(fwd, a, b, c, d, e) end
    return fwd(a, b, c, d, e)
  end

  -- ---- activations ------------------------------------------------------------------------

  -- name(x[, inplace = false]): one input, a forward of tensor ops; inplace
  -- (a boolean, or {inplace = ...}) overwrites x and returns it
  local INPLACE = { inplace = 'boolean' }
  local function activation(name, fwd)
    local rec = recorder(name)
    local function out_of_place(x)
      local r = run(fwd, x)
      rec(r, x)
      return r
    end
    F[name] = function(x, inplace)
      need_float(name, x, 'input')
      if inplace ~= nil and inplace ~= false then
        if inplace ~= true then
          inplace = (options.check(name, options.positional(name, { 'inplace' }, inplace), INPLACE) or {}).inplace
        end
        if inplace then return in_place(name, x, out_of_place) end
      end
      return out_of_place(x)
    end
  end

  -- silu: x / (1 + exp(-x)); mish: x tanh(log1p(exp(x))); hardswish:
  -- x clamp(x + 3, 0, 6) / 6; hardsigmoid: clamp(x + 3, 0, 6) / 6 (one
  -- kernel each: c/cpu/elementwise.c)
  activation('silu', function(x) return wrap(C.ln_unary(C.LN_SILU, x.p)) end)
  activation('hardswish', function(x) return wrap(C.ln_unary(C.LN_HARDSWISH, x.p)) end)
  activation('hardsigmoid', function(x) return wrap(C.ln_unary(C.LN_HARDSIGMOID, x.p)) end)
  activation('relu6', function(x) return x:clamp(0, 6) end)
  activation('mish', function(x) return wrap(C.ln_unary(C.LN_MISH, x.p)) end)

  -- softplus(x[, beta = 1[, threshold = 20]]) or softplus(x, {beta, threshold}):
  -- log(1 + exp(beta x)) / beta, x where beta x > threshold (one kernel)
  local SOFTPLUS_OPTS, SOFTPLUS_POSITIONAL = { beta = 'number', threshold = 'number' }, { 'beta', 'threshold' }
  local record_softplus = recorder('softplus')
  function F.softplus(x, ...)
    local o = options.check('softplus', options.positional('softplus', SOFTPLUS_POSITIONAL, ...), SOFTPLUS_OPTS) or {}
    need_float('softplus', x, 'input')
    local beta, threshold = o.beta or 1, o.threshold or 20
    local r = wrap(C.ln_unary_p(C.LN_SOFTPLUS, x.p, beta, threshold, 0))
    record_softplus(r, x, beta, threshold)
    return r
  end

  -- prelu(x, weight): x where x > 0, else weight x; weight has one value or
  -- one per channel (dim 2 of x)
  local record_prelu = recorder('prelu')
  local function prelu_fwd(x, w, shape) return x:where(x:gt(0), x * w:reshape(shape)) end
  function F.prelu(x, w)
    need_float('prelu', x, 'input')
    need('prelu', w, 'weight')
    if w:dim() > 1 then raise(('prelu: weight must be a scalar or 1-d tensor, got %d-d'):format(w:dim())) end
    local nd, nw = x:dim(), w:numel()
    local shape, channels = {}, nd >= 2 and x:size(2) or 1
    for i = 1, nd do shape[i] = 1 end
    if nw ~= 1 then
      if nw ~= channels then
        raise(('prelu: weight has %d values, the input %d channel%s (dim 2); give it 1 or %d'):format(nw, channels,
          channels == 1 and '' or 's', channels))
      end
      shape[2] = nw
    end
    local r = run(prelu_fwd, x, w, shape)
    record_prelu(r, x, w, nil, shape)
    return r
  end

  -- ---- losses -----------------------------------------------------------------------------

  -- the elementwise loss l reduced (codes of reduction(): 0 none, 1 mean, 2 sum)
  local function reduce(l, red)
    if red == 0 then return l end
    local s = sum_all(l)
    if red == 2 then return s end
    return s / l:numel()
  end

  local function loss_inputs(fn, x, y)
    need_float(fn, x, 'input'); need_float(fn, y, 'target')
    same_shape(fn, x, y)
  end

  local REDUCE_OPTS = { reduction = 'string' }
  local record_l1 = recorder('l1_loss')
  local function l1_fwd(x, y, red) return reduce((x - y):abs(), red) end
  -- l1_loss(input, target[, {reduction = 'mean'}]): |input - target|
  function F.l1_loss(x, y, opts)
    opts = options.check('l1_loss', opts, REDUCE_OPTS) or {}
    loss_inputs('l1_loss', x, y)
    local red = reduction('l1_loss', opts.reduction)
    local r = run(l1_fwd, x, y, red)
    record_l1(r, x, y, nil, red)
    return r
  end

  local function nonneg(fn, what, v, strict)
    if type(v) ~= 'number' or not (strict and v > 0 or not strict and v >= 0) then
      raise(('%s: %s must be a number %s 0, got %s'):format(fn, what, strict and '>' or '>=', tostring(v)))
    end
  end

  -- smooth_l1_loss(input, target[, {reduction = 'mean', beta = 1}]):
  -- 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target)
  local SMOOTH_OPTS = { reduction = 'string', beta = 'number' }
  local record_smooth_l1 = recorder('smooth_l1_loss')
  local function smooth_l1_fwd(x, y, red, beta)
    local z = (x - y):abs()
    return reduce((z * z * 0.5 / beta):where(z:lt(beta), z - 0.5 * beta), red)
  end
  function F.smooth_l1_loss(x, y, opts)
    opts = options.check('smooth_l1_loss', opts, SMOOTH_OPTS) or {}
    loss_inputs('smooth_l1_loss', x, y)
    local red, beta = reduction('smooth_l1_loss', opts.reduction), opts.beta or 1
    nonneg('smooth_l1_loss', 'beta', beta)
    local r = run(smooth_l1_fwd, x, y, red, beta)
    record_smooth_l1(r, x, y, nil, red, beta)
    return r
  end

  -- huber_loss(input, target[, {reduction = 'mean', delta = 1}]):
  -- 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
  local HUBER_OPTS = { reduction = 'string', delta = 'number' }
  local record_huber = recorder('huber_loss')
  local function huber_fwd(x, y, red, delta)
    local z = (x - y):abs()
    return reduce((z * z * 0.5):where(z:lt(delta), (z - 0.5 * delta) * delta), red)
  end
  function F.huber_loss(x, y, opts)
    opts = options.check('huber_loss', opts, HUBER_OPTS) or {}
    loss_inputs('huber_loss', x, y)
    local red, delta = reduction('huber_loss', opts.reduction), opts.delta or 1
    nonneg('huber_loss', 'delta', delta, true)
    local r = run(huber_fwd, x, y, red, delta)
    record_huber(r, x, y, nil, red, delta)
    return r
  end

  -- binary_cross_entropy(input, target[, {weight, reduction = 'mean'}]):
  -- -weight (target log(input) + (1 - target) log(1 - input)), each log
  -- clamped to >= -100; input must hold probabilities (in [0, 1])
  local BCE_OPTS = { weight = 'tensor', reduction = 'string' }
  local record_bce = recorder('binary_cross_entropy')
  local function bce_fwd(x, y, red, w)
    local l = (y - 1) * (-x):log1p():clamp(-100) - y * x:log():clamp(-100)
    if w then l = l * w end
    return reduce(l, red)
  end
  -- w broadcasts to shape (trailing dims equal or 1)
  local function broadcasts_to(w, shape)
    local ws = w:size()
    if #ws > #shape then return false end
    for i = 1, #ws do
      local a, b = ws[#ws - i + 1], shape[#shape - i + 1]
      if a ~= b and a ~= 1 then return false end
    end
    return true
  end
  function F.binary_cross_entropy(x, y, opts)
    opts = options.check('binary_cross_entropy', opts, BCE_OPTS) or {}
    loss_inputs('binary_cross_entropy', x, y)
    local red, w = reduction('binary_cross_entropy', opts.reduction), opts.weight
    if w ~= nil then
      need_float('binary_cross_entropy', w, 'weight')
      if not broadcasts_to(w, x:size()) then
        raise(('binary_cross_entropy: weight {%s} does not broadcast to the input {%s}'):format(
          table.concat(w:size(), ','), table.concat(x:size(), ',')))
      end
    end
    -- (PyTorch's check; a NaN fails it too)
    if x:numel() > 0 and not no_grad(function() return x:ge(0):logical_and(x:le(1)):all():item() end) then
      raise('binary_cross_entropy: all elements of input should be between 0 and 1 (probabilities: '
        .. 'apply sigmoid first, or use binary_cross_entropy_with_logits on the logits)')
    end
    local r = run(bce_fwd, x, y, red, w)
    record_bce(r, x, y, nil, red, w)
    return r
  end

  -- kl_div(input, target[, {reduction = 'mean', log_target = false}]): input
  -- holds log-probabilities; target probabilities (log-probabilities with
  -- log_target): target (log(target) - input), summed and divided by the
  -- batch size (dim 1) with reduction = 'batchmean'
  local KL_OPTS = { reduction = 'string', log_target = 'boolean' }
  local KL_REDUCTIONS = { 'none', 'mean', 'sum', 'batchmean' }
  local record_kl = recorder('kl_div')
  local function kl_fwd(x, t, red, log_target, div)
    local l
    if log_target then l = t:exp() * (t - x)
    else l = (t * t:log()):where(t:ne(0), 0) - t * x end
    if red == 3 then return sum_all(l) / div end
    return reduce(l, red)
  end
  function F.kl_div(x, t, opts)
    opts = options.check('kl_div', opts, KL_OPTS) or {}
    loss_inputs('kl_div', x, t)
    local red, div = opts.reduction, nil
    if red == 'batchmean' then
      if x:dim() > 0 then red, div = 3, x:size(1) else red = 2 end   -- (PyTorch: a 0-d input's sum)
    else
      options.one_of('kl_div', 'reduction', red, KL_REDUCTIONS)
      red = reduction('kl_div', red)
    end
    local log_target = opts.log_target == true
    local r = run(kl_fwd, x, t, red, log_target, div)
    record_kl(r, x, t, nil, red, log_target, div)
    return r
  end
end
