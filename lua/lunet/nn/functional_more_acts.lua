-- lunet.nn.functional's activations hardtanh, selu, celu, logsigmoid,
-- softsign, tanhshrink, threshold, glu, softmin, hardshrink, softshrink, as
-- PyTorch 1.13's, and the in-place hardtanh_, selu_, celu_, threshold_.
-- Each is a composition of differentiable tensor ops (every backend, second
-- derivatives too; selu and celu: elu's kernel, lunet.nn.functional_elu),
-- written so that the gradients at the kinks are
-- PyTorch's: where() gives none to the branch it did not take, clamp passes
-- it at its bounds. Installed into F by lunet.nn.functional.
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local raise, check, positional = options.raise, options.check, options.positional
local records = A.records
local NO = setmetatable({}, { __newindex = function() error('functional: internal table is read-only', 2) end })

-- PyTorch's SELU constants (Klambauer et al. 2017)
local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

return function(F, h)
  local need, in_place = h.need, h.in_place

  local function need_float(fn, x)
    need(fn, x, 'input')
    if not x:is_floating_point() then
      raise(('%s: input must be a floating-point tensor, got %s'):format(fn, x.dtype))
    end
    return x
  end

  -- hardtanh(x[, min_val = -1[, max_val = 1[, inplace]]]) or hardtanh(x, {min_val, max_val, inplace})
  local HT_OPTS, HT_POS = { min_val = 'number', max_val = 'number', inplace = 'boolean' },
    { 'min_val', 'max_val', 'inplace' }
  local function hardtanh_fwd(x, lo, hi)
    if not records(x) then return x:clamp(lo, hi) end
    -- PyTorch's gradient is 0 at the bounds, where clamp's passes
    return x:where(x:gt(lo):logical_and(x:lt(hi)), x:detach():clamp(lo, hi))
  end
  local function hardtanh(fn, x, inplace, ...)
    local o = check(fn, positional(fn, HT_POS, ...), HT_OPTS) or NO
    need_float(fn, x)
    local lo, hi = o.min_val or -1, o.max_val or 1
    -- (PyTorch's gives max_val everywhere; lunet's clamp refuses it too)
    if not (lo <= hi) then raise(('%s: min_val (%s) must be <= max_val (%s)'):format(fn, lo, hi)) end
    if inplace or o.inplace then return in_place(fn, x, hardtanh_fwd, lo, hi) end
    return hardtanh_fwd(x, lo, hi)
  end
  function F.hardtanh(x, ...) return hardtanh('hardtanh', x, false, ...) end
  function F.hardtanh_(x, ...) return hardtanh('hardtanh_', x, true, ...) end

  -- selu(x[, inplace]): scale (x if x > 0 else alpha (exp(x) - 1))
  local SELU_OPTS, SELU_POS = { inplace = 'boolean' }, { 'inplace' }
  local elu_kernel = require 'lunet.nn.functional_elu'   -- (selu and celu: one kernel and one node)
  local function selu_fwd(x) return elu_kernel(x, SELU_ALPHA, SELU_SCALE, 1) end
  local function selu(fn, x, inplace, ...)
    local o = check(fn, positional(fn, SELU_POS, ...), SELU_OPTS) or NO
    need_float(fn, x)
    if inplace or o.inplace then return in_place(fn, x, selu_fwd) end
    return selu_fwd(x)
  end
  function F.selu(x, ...) return selu('selu', x, false, ...) end
  function F.selu_(x, ...) return selu('selu_', x, true, ...) end

  -- celu(x[, alpha = 1[, inplace]]): x if x > 0 else alpha (exp(x / alpha) - 1)
  local CELU_OPTS, CELU_POS = { alpha = 'number', inplace = 'boolean' }, { 'alpha', 'inplace' }
  local function celu_fwd(x, alpha) return elu_kernel(x, alpha, 1, 1 / alpha) end
  local function celu(fn, x, inplace, ...)
    local o = check(fn, positional(fn, CELU_POS, ...), CELU_OPTS) or NO
    need_float(fn, x)
    local alpha = o.alpha or 1
    if alpha == 0 then raise(fn .. ': alpha cannot be 0') end
    if inplace or o.inplace then return in_place(fn, x, celu_fwd, alpha) end
    return celu_fwd(x, alpha)
  end
  function F.celu(x, ...) return celu('celu', x, false, ...) end
  function F.celu_(x, ...) return celu('celu_', x, true, ...) end

  -- threshold(x, threshold, value[, inplace]): x where x > threshold, else value
  local TH_OPTS, TH_POS = { threshold = 'number', value = 'number', inplace = 'boolean' },
    { 'threshold', 'value', 'inplace' }
  -- (not x <= threshold: a NaN stays NaN, as PyTorch's)
  local function threshold_fwd(x, th, v) return x:where(x:le(th):logical_not(), v) end
  local function threshold(fn, x, inplace, ...)
    local o = check(fn, positional(fn, TH_POS, ...), TH_OPTS) or NO
    need_float(fn, x)
    if o.threshold == nil or o.value == nil then
      raise(('%s: threshold and value must be numbers, got %s and %s'):format(fn, type(o.threshold), type(o.value)))
    end
    if inplace or o.inplace then return in_place(fn, x, threshold_fwd, o.threshold, o.value) end
    return threshold_fwd(x, o.threshold, o.value)
  end
  function F.threshold(x, ...) return threshold('threshold', x, false, ...) end
  function F.threshold_(x, ...) return threshold('threshold_', x, true, ...) end

  -- logsigmoid(x): log(sigmoid(x)), as -softplus(-x) (no log of an underflowed 0)
  function F.logsigmoid(x) return -F.softplus(-need_float('logsigmoid', x)) end
  -- softsign(x): x / (1 + |x|)
  function F.softsign(x) return need_float('softsign', x) / (x:abs() + 1) end
  -- tanhshrink(x): x - tanh(x)
  function F.tanhshrink(x) return need_float('tanhshrink', x) - x:tanh() end

  local DIM_OPTS, DIM_POS = { dim = 'number' }, { 'dim' }

  -- glu(x[, dim = -1]): a * sigmoid(b), a and b the halves of x along dim
  function F.glu(x, ...)
    local o = check('glu', positional('glu', DIM_POS, ...), DIM_OPTS) or NO
    need_float('glu', x)
    if x:dim() == 0 then raise('glu: a 0-d input has no dim to halve') end
    local d = T.cdim('glu', x, o.dim or -1) + 1
    local n = x:size(d)
    if n % 2 == 1 then raise(('glu: dim %d has odd size %d (it is halved: give it an even size)'):format(d, n)) end
    return x:narrow(d, 1, n / 2) * x:narrow(d, n / 2 + 1, n / 2):sigmoid()
  end

  -- softmin(x[, dim = -1]): softmax(-x) along dim
  function F.softmin(x, ...)
    local o = check('softmin', positional('softmin', DIM_POS, ...), DIM_OPTS) or NO
    need_float('softmin', x)
    local d = T.cdim('softmin', x, o.dim or -1) + 1
    return F.softmax(-x, d)
  end

  local SHRINK_OPTS, SHRINK_POS = { lambd = 'number' }, { 'lambd' }

  -- hardshrink(x[, lambd = 0.5]): x where |x| > lambd, else 0
  function F.hardshrink(x, ...)
    local l = (check('hardshrink', positional('hardshrink', SHRINK_POS, ...), SHRINK_OPTS) or NO).lambd or 0.5
    need_float('hardshrink', x)
    return x:where(x:abs():le(l):logical_not(), 0)
  end

  -- softshrink(x[, lambd = 0.5]): x - lambd where x > lambd, x + lambd where
  -- x < -lambd, else 0 (x less x clamped to [-lambd, lambd]: gradient 0 at +-lambd)
  function F.softshrink(x, ...)
    local l = (check('softshrink', positional('softshrink', SHRINK_POS, ...), SHRINK_OPTS) or NO).lambd or 0.5
    need_float('softshrink', x)
    if not (l >= 0) then raise(('softshrink: lambd must be >= 0, got %s'):format(l)) end
    return x - x:clamp(-l, l)
  end
end
