-- lunet.data.transforms, continued: the AutoAugment family (torchvision
-- 0.14's tensor path) as C ops: RandomPosterize, RandomSolarize,
-- RandomAutocontrast, RandomEqualize, RandomAdjustSharpness, RandomInvert,
-- their fixed forms F.posterize, F.solarize, F.autocontrast, F.equalize,
-- F.adjust_sharpness, F.invert, and the policies AutoAugment, RandAugment,
-- TrivialAugmentWide. lunet's images are float in [0, 1]: solarize's
-- threshold is in those units (torchvision's float path); posterize and
-- equalize, uint8-only in torchvision, act on the uint8 image round(255 v)
-- and give torchvision's uint8 result / 255. The policies run torchvision's
-- ops on the float image, Posterize/Solarize/Equalize on its uint8 pixels
-- (Solarize's thresholds are 0..255), as torchvision's policies on the uint8
-- image; their random choices come from lunet's keyed stream, not torch's.
local ffi = require 'ffi'
local core = require 'lunet.core'
local options = require 'lunet.options'
local C = core.C

return function(M, h)
  local new, values, F = h.new, h.values, M.functional
  local function add(kind, compile, tostr) h.OPS[kind], h.COMPILE[kind], h.tostr[kind] = true, compile, tostr end

  local function prob(fn, p)
    p = p == nil and 0.5 or p
    if type(p) ~= 'number' or not (p >= 0 and p <= 1) then error(fn .. ': p must be in [0, 1], got ' .. tostring(p), 3) end
    return p
  end
  local function bits_of(fn, b)
    if type(b) ~= 'number' or b % 1 ~= 0 or b < 0 or b > 8 then error(fn .. ': bits must be an integer in [0, 8], got ' .. tostring(b), 3) end
    return b
  end
  local function threshold_of(fn, t)   -- (torchvision's float path refuses thresholds above 1)
    if type(t) ~= 'number' or not (t <= 1) then error(fn .. ': threshold must be a number <= 1 (float image units), got ' .. tostring(t), 3) end
    return t
  end
  local function factor_of(fn, f)
    if type(f) ~= 'number' or not (f >= 0 and f < math.huge) then error(fn .. ': sharpness_factor must be a non-negative number, got ' .. tostring(f), 3) end
    return f
  end

  -- the single ops: kind -> {C op, the parameter's check or nil}
  local SINGLE = {
    RandomPosterize = { C.LN_OP_POSTERIZE, 'bits', bits_of }, RandomSolarize = { C.LN_OP_SOLARIZE, 'threshold', threshold_of },
    RandomAdjustSharpness = { C.LN_OP_SHARPNESS, 'sharpness_factor', factor_of },
    RandomAutocontrast = { C.LN_OP_AUTOCONTRAST }, RandomEqualize = { C.LN_OP_EQUALIZE }, RandomInvert = { C.LN_OP_INVERT },
  }
  for kind, s in pairs(SINGLE) do
    local op, what, check = s[1], s[2], s[3]
    if what then
      M[kind] = function(v, ...)
        local opts = options.check(kind, options.positional(kind, { 'p' }, ...), { p = 'number' }) or {}
        return new(kind, { value = check(kind, v), p = prob(kind, opts.p) })
      end
    else
      M[kind] = function(...)
        local opts = options.check(kind, options.positional(kind, { 'p' }, ...), { p = 'number' }) or {}
        return new(kind, { p = prob(kind, opts.p) })
      end
    end
    add(kind, function(o, u)
      o.kind, o.p = op, u.p
      if op == C.LN_OP_POSTERIZE then o.i = u.value elseif what then o.a[0] = u.value end
    end, function(t)
      return what and ('%s(%g, {p = %g})'):format(kind, t.value, t.p) or ('%s({p = %g})'):format(kind, t.p)
    end)
  end
  function F.posterize(x, bits) return M.RandomPosterize(bits_of('posterize', bits), 1)(x) end
  function F.solarize(x, threshold) return M.RandomSolarize(threshold_of('solarize', threshold), 1)(x) end
  function F.adjust_sharpness(x, f) return M.RandomAdjustSharpness(factor_of('adjust_sharpness', f), 1)(x) end
  function F.autocontrast(x) return M.RandomAutocontrast(1)(x) end
  function F.equalize(x) return M.RandomEqualize(1)(x) end
  function F.invert(x) return M.RandomInvert(1)(x) end

  -- the policies: one AUTOAUG op (interpolation, fill as RandomAffine's; fill
  -- nil: torchvision's None, zeros without the fill mask)
  local OP_NAMES = { 'Identity', 'ShearX', 'ShearY', 'TranslateX', 'TranslateY', 'Rotate', 'Brightness', 'Color',
    'Contrast', 'Sharpness', 'Posterize', 'Solarize', 'AutoContrast', 'Equalize', 'Invert' }
  local OP_ID = {}
  for i, n in ipairs(OP_NAMES) do OP_ID[n] = i - 1 end
  M.autoaugment_ops = OP_NAMES   -- (C's LN_AUG_* order, 0-based there)
  local function geometry(fn, opts)
    local interp = options.one_of(fn, 'interpolation', opts.interpolation, { 'nearest', 'bilinear' }) or 'nearest'
    local fill = opts.fill ~= nil and values(fn, 'fill', opts.fill) or nil
    for _, v in ipairs(fill or {}) do
      if not (v > -math.huge and v < math.huge) then error(fn .. ': fill must be finite', 3) end
    end
    return interp, fill
  end
  local function int_in(fn, what, v, lo, hi)
    if type(v) ~= 'number' or v % 1 ~= 0 or v < lo or v > hi then
      error(('%s: %s must be an integer in [%d, %s], got %s'):format(fn, what, lo, hi, tostring(v)), 3)
    end
    return v
  end

  local POLICIES = { imagenet = 0, cifar10 = 1, svhn = 2 }
  local AA_OPTS = { policy = 'string', interpolation = 'string', fill = 'number|table' }
  function M.AutoAugment(...)
    local fn = 'AutoAugment'
    local opts = options.check(fn, options.positional(fn, { 'policy', 'interpolation', 'fill' }, ...), AA_OPTS) or {}
    local policy = options.one_of(fn, 'policy', opts.policy, { 'imagenet', 'cifar10', 'svhn' }) or 'imagenet'
    local interp, fill = geometry(fn, opts)
    return new('AutoAugment', { mode = 0, policy = policy, interp = interp, fill = fill })
  end
  local RA_OPTS = { num_ops = 'number', magnitude = 'number', num_magnitude_bins = 'number', interpolation = 'string',
    fill = 'number|table' }
  function M.RandAugment(...)
    local fn = 'RandAugment'
    local opts = options.check(fn, options.positional(fn, { 'num_ops', 'magnitude', 'num_magnitude_bins',
      'interpolation', 'fill' }, ...), RA_OPTS) or {}
    local bins = int_in(fn, 'num_magnitude_bins', opts.num_magnitude_bins or 31, 2, 2 ^ 31 - 1)
    local interp, fill = geometry(fn, opts)
    return new('RandAugment', { mode = 1, num_ops = int_in(fn, 'num_ops', opts.num_ops or 2, 0, C.LN_AUG_MAX_NUM_OPS),
      magnitude = int_in(fn, 'magnitude', opts.magnitude or 9, 0, bins - 1), bins = bins, interp = interp, fill = fill })
  end
  function M.TrivialAugmentWide(...)
    local fn = 'TrivialAugmentWide'
    local opts = options.check(fn, options.positional(fn, { 'num_magnitude_bins', 'interpolation', 'fill' }, ...),
      { num_magnitude_bins = 'number', interpolation = 'string', fill = 'number|table' }) or {}
    local interp, fill = geometry(fn, opts)
    return new('TrivialAugmentWide', { mode = 2, bins = int_in(fn, 'num_magnitude_bins', opts.num_magnitude_bins or 31,
      2, 2 ^ 31 - 1), interp = interp, fill = fill })
  end
  -- F._apply_op(x, op_name, magnitude[, {interpolation, fill}]): torchvision's
  -- autoaugment._apply_op, one op of the policies at a fixed magnitude
  function F._apply_op(x, name, magnitude, opts)
    local fn = '_apply_op'
    if OP_ID[name] == nil then error(('_apply_op: unknown op %s (one of %s)'):format(tostring(name), table.concat(OP_NAMES, ', ')), 2) end
    if type(magnitude) ~= 'number' or not (magnitude > -math.huge and magnitude < math.huge) then
      error('_apply_op: magnitude must be a finite number, got ' .. tostring(magnitude), 2)
    end
    if name == 'Posterize' then bits_of(fn, magnitude - magnitude % 1) end
    if name == 'Brightness' or name == 'Color' or name == 'Contrast' or name == 'Sharpness' then
      if not (magnitude >= -1) then error(('_apply_op: %s magnitude must be >= -1, got %g'):format(name, magnitude), 2) end
    end
    local interp, fill = geometry(fn, options.check(fn, opts, { interpolation = 'string', fill = 'number|table' }) or {})
    return new('AugOp', { mode = 3, op = OP_ID[name], name = name, magnitude = magnitude, interp = interp, fill = fill })(x)
  end

  local function compile_policy(o, u)
    o.kind, o.mode, o.interp = C.LN_OP_AUTOAUG, u.mode, u.interp == 'bilinear' and 1 or 0
    if u.mode == 0 then o.i = POLICIES[u.policy]
    elseif u.mode == 1 then o.i, o.j, o.bh = u.num_ops, u.magnitude, u.bins
    elseif u.mode == 2 then o.bh = u.bins
    else o.j, o.a[0] = u.op, u.magnitude end
    o.flags = h.put_fill(o, u.fill)
  end
  local tail = h.geometry_repr
  add('AutoAugment', compile_policy, function(t) return ('AutoAugment{policy = %q, %s}'):format(t.policy, tail(t)) end)
  add('RandAugment', compile_policy, function(t)
    return ('RandAugment{num_ops = %d, magnitude = %d, num_magnitude_bins = %d, %s}'):format(t.num_ops, t.magnitude,
      t.bins, tail(t))
  end)
  add('TrivialAugmentWide', compile_policy, function(t)
    return ('TrivialAugmentWide{num_magnitude_bins = %d, %s}'):format(t.bins, tail(t))
  end)
  add('AugOp', compile_policy, function(t) return ('_apply_op(%q, %g)'):format(t.name, t.magnitude) end)

  -- policy:choices(h, w[, {key = 1, seed = 0, epoch = 0}]): the op names and
  -- signed magnitudes the policy (alone, or first in its Compose) applies to
  -- an h x w sample with that key, in order (to check its choices)
  local ops_buf, mags_buf = ffi.new('int32_t[?]', C.LN_AUG_MAX_NUM_OPS), ffi.new('double[?]', C.LN_AUG_MAX_NUM_OPS)
  function M.policy_choices(t, hh, ww, opts)
    opts = options.check('policy_choices', opts, { key = 'number', seed = 'number', epoch = 'number' }) or {}
    local tf = M.compile(t, 'float32')
    local k = -1
    for q = 0, tf.nops - 1 do if tf.ops[q].kind == C.LN_OP_AUTOAUG then k = q break end end
    if k < 0 then error('policy_choices: no AutoAugment, RandAugment or TrivialAugmentWide in the transform', 2) end
    local n = C.ln_autoaug_choices(tf.ops[k], k, hh, ww, opts.seed or 0, opts.epoch or 0, (opts.key or 1) - 1, ops_buf,
      mags_buf, C.LN_AUG_MAX_NUM_OPS)
    if n < 0 then core.raise() end
    local names, mags = {}, {}
    for q = 0, n - 1 do names[q + 1], mags[q + 1] = OP_NAMES[ops_buf[q] + 1], mags_buf[q] end
    return names, mags
  end
end
