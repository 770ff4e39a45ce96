-- lunet.data.transforms, continued: Grayscale, RandomGrayscale,
-- RandomRotation, RandomAffine, GaussianBlur and Pad (torchvision 0.14's
-- tensor path), and their fixed-parameter forms F.rgb_to_grayscale,
-- F.adjust_hue, F.rotate, F.affine, F.gaussian_blur, F.pad. They run as C
-- ops (ln_transform_op kinds GRAY, AFFINE, BLUR, PAD) in a Compose's order;
-- fill values are in the float image's units (uint8 images: [0, 1]).
local core = require 'lunet.core'
local options = require 'lunet.options'
local is_table = core.is_table
local C = core.C

return function(M, h)
  local new, values, range, F = h.new, h.values, h.range, M.functional
  local function add(kind, compile, tostr)
    h.OPS[kind], h.COMPILE[kind], h.tostr[kind] = true, compile, tostr
  end
  local function fmt_list(t) return '{' .. table.concat(t, ', ') .. '}' end

  -- Grayscale(num_output_channels = 1); RandomGrayscale(p = 0.1) keeps the channels
  function M.Grayscale(n)
    n = n == nil and 1 or n
    if n ~= 1 and n ~= 3 then error('Grayscale: num_output_channels must be 1 or 3, got ' .. tostring(n), 2) end
    return new('Grayscale', { n = n, p = 1 })
  end
  function M.RandomGrayscale(p)
    p = p == nil and 0.1 or p
    if type(p) ~= 'number' or not (p >= 0 and p <= 1) then error('RandomGrayscale: p must be in [0, 1], got ' .. tostring(p), 2) end
    return new('RandomGrayscale', { p = p })
  end
  local function gray(o, u) o.kind, o.p, o.mode = C.LN_OP_GRAY, u.p, u.n == 1 and 1 or 0 end
  add('Grayscale', gray, function(t) return ('Grayscale(%d)'):format(t.n) end)
  add('RandomGrayscale', gray, function(t) return ('RandomGrayscale(%g)'):format(t.p) end)
  function F.rgb_to_grayscale(x, n) return M.Grayscale(n)(x) end
  function F.adjust_hue(x, f)
    if type(f) ~= 'number' or not (f >= -0.5 and f <= 0.5) then
      error('adjust_hue: hue_factor must be in [-0.5, 0.5], got ' .. tostring(f), 2)
    end
    return new('JitterFactors', { hue = { f, f } })(x)
  end

  -- rotation and affine: one AFFINE op (torchvision's inverse matrix, grid_sample)
  local function num_pair(fn, what, v, lo, hi)
    if not (is_table(v) and #v == 2 and type(v[1]) == 'number' and type(v[2]) == 'number'
        and v[1] >= lo and v[1] <= hi and v[2] >= lo and v[2] <= hi) then
      error(('%s: %s must be {a, b} with values in [%g, %g]'):format(fn, what, lo, hi), 3)
    end
    return { v[1], v[2] }
  end
  local function geometry(fn, opts, fill_default)
    local interp = options.one_of(fn, 'interpolation', opts.interpolation, { 'nearest', 'bilinear' }) or 'nearest'
    local center = opts.center and num_pair(fn, 'center', opts.center, -math.huge, math.huge)
    local fill = opts.fill ~= nil and values(fn, 'fill', opts.fill) or fill_default
    for _, v in ipairs(fill or {}) do
      if not (v > -math.huge and v < math.huge) then error(fn .. ': fill must be finite', 3) end
    end
    return interp, center, fill
  end
  local function degrees_of(fn, d)
    if type(d) == 'number' then
      if not (d >= 0 and d < math.huge) then error(fn .. ': degrees must be a number >= 0 or {min, max}, got ' .. d, 3) end
      return { -d, d }
    end
    return range(fn, 'degrees', d, -math.huge)
  end
  local function compile_affine(o, u)
    o.kind, o.interp = C.LN_OP_AFFINE, u.interp == 'bilinear' and 1 or 0
    o.mode = u.angle and 1 or 0
    if u.angle then
      o.a[0], o.a[2], o.a[3], o.a[4], o.a[6], o.a[8] = u.angle, u.translate[1], u.translate[2], u.scale, u.shear[1], u.shear[2]
    else
      o.a[0], o.a[1] = u.degrees[1], u.degrees[2]
      o.a[2], o.a[3] = u.translate[1], u.translate[2]
      o.a[4], o.a[5] = u.scale[1], u.scale[2]
      for q = 1, 4 do o.a[5 + q] = u.shear[q] end
    end
    local flags = u.expand and C.LN_TF_EXPAND or 0
    if u.center then flags, o.a[10], o.a[11] = flags + C.LN_TF_CENTER, u.center[1], u.center[2] end
    o.flags = flags + h.put_fill(o, u.fill)
  end

  -- RandomRotation(degrees[, {interpolation = 'nearest', expand = false, center, fill = 0}])
  local ROT_OPTS = { interpolation = 'string', expand = 'boolean', center = 'table', fill = 'number|table' }
  local ROT_POS = { 'interpolation', 'expand', 'center', 'fill' }
  function M.RandomRotation(degrees, ...)
    local fn = 'RandomRotation'
    local opts = options.check(fn, options.positional(fn, ROT_POS, ...), ROT_OPTS) or {}
    local d = degrees_of(fn, degrees)
    local interp, center, fill = geometry(fn, opts, { 0 })
    if opts.expand and d[1] ~= d[2] then
      error('RandomRotation: expand = true changes the size with the angle: a batch needs one angle (degrees = {a, a})', 2)
    end
    -- (rotate turns by -angle in torchvision's affine matrix)
    local u = { degrees = { -d[1], -d[2] }, translate = { 0, 0 }, scale = { 1, 1 }, shear = { 0, 0, 0, 0 },
      interp = interp, center = center, fill = fill, expand = opts.expand, deg = d }
    if opts.expand then u.angle, u.scale, u.shear = -d[1], 1, { 0, 0 } end
    return new('RandomRotation', u)
  end
  add('RandomRotation', compile_affine, function(t)
    return ('RandomRotation({%g, %g}, {interpolation = %q, expand = %s, fill = %s})'):format(t.deg[1], t.deg[2],
      t.interp, tostring(t.expand or false), fmt_list(t.fill))
  end)
  function F.rotate(x, angle, ...)
    local fn = 'rotate'
    if type(angle) ~= 'number' or not (angle > -math.huge and angle < math.huge) then
      error('rotate: angle must be a finite number, got ' .. tostring(angle), 2)
    end
    local opts = options.check(fn, options.positional(fn, ROT_POS, ...), ROT_OPTS) or {}
    local interp, center, fill = geometry(fn, opts, nil)
    return new('Affine', { angle = -angle, translate = { 0, 0 }, scale = 1, shear = { 0, 0 }, interp = interp,
      center = center, fill = fill, expand = opts.expand })(x)
  end

  -- RandomAffine(degrees[, {translate, scale, shear, interpolation = 'nearest', fill = 0, center}])
  local AFF_OPTS = { translate = 'table', scale = 'table', shear = 'number|table', interpolation = 'string',
    fill = 'number|table', center = 'table' }
  function M.RandomAffine(degrees, ...)
    local fn = 'RandomAffine'
    local opts = options.check(fn, options.positional(fn, { 'translate', 'scale', 'shear', 'interpolation', 'fill',
      'center' }, ...), AFF_OPTS) or {}
    local interp, center, fill = geometry(fn, opts, { 0 })
    local sh = opts.shear or 0
    if type(sh) == 'number' then
      if not (sh >= 0 and sh < math.huge) then error('RandomAffine: shear must be a number >= 0 or a list', 2) end
      sh = { -sh, sh, 0, 0 }
    elseif #sh == 2 or #sh == 4 then
      local x, y = range(fn, 'shear', { sh[1], sh[2] }, -math.huge), #sh == 4 and range(fn, 'shear', { sh[3], sh[4] }, -math.huge)
      sh = { x[1], x[2], y and y[1] or 0, y and y[2] or 0 }
    else
      error('RandomAffine: shear must be a number, {min, max} or {xmin, xmax, ymin, ymax}', 2)
    end
    return new('RandomAffine', { degrees = degrees_of(fn, degrees), interp = interp, center = center, fill = fill,
      translate = opts.translate and num_pair(fn, 'translate', opts.translate, 0, 1) or { 0, 0 },
      scale = opts.scale and range(fn, 'scale', opts.scale, 1e-300) or { 1, 1 }, shear = sh })
  end
  add('RandomAffine', compile_affine, function(t)
    return ('RandomAffine({%g, %g}, {translate = %s, scale = %s, shear = %s, interpolation = %q, fill = %s})')
      :format(t.degrees[1], t.degrees[2], fmt_list(t.translate), fmt_list(t.scale), fmt_list(t.shear), t.interp,
        fmt_list(t.fill))
  end)
  -- F.affine(x, angle, translate, scale, shear[, {interpolation, fill, center}])
  function F.affine(x, angle, translate, scale, shear, opts)
    local fn = 'affine'
    if type(angle) ~= 'number' or not (angle > -math.huge and angle < math.huge) then
      error('affine: angle must be a finite number, got ' .. tostring(angle), 2)
    end
    translate = num_pair(fn, 'translate', translate, -math.huge, math.huge)
    if type(scale) ~= 'number' or not (scale > 0 and scale < math.huge) then
      error('affine: scale must be a positive number, got ' .. tostring(scale), 2)
    end
    if type(shear) == 'number' then shear = { shear, 0 } end
    if is_table(shear) and #shear == 1 then shear = { shear[1], shear[1] } end
    shear = num_pair(fn, 'shear', shear, -math.huge, math.huge)
    opts = options.check(fn, opts, { interpolation = 'string', fill = 'number|table', center = 'table' }) or {}
    local interp, center, fill = geometry(fn, opts, nil)
    return new('Affine', { angle = angle, translate = translate, scale = scale, shear = shear, interp = interp,
      center = center, fill = fill })(x)
  end
  add('Affine', compile_affine, function(t) return ('affine(%g)'):format(t.angle) end)

  -- GaussianBlur(kernel_size[, {sigma = {0.1, 2}}]): kernel_size n or {x, y}
  -- (odd), one sigma uniform in the range for both axes, reflect padding
  local function ksize(fn, k)
    local kx, ky = k, k
    if is_table(k) then kx, ky = k[1], k[2] end
    local function odd(v) return type(v) == 'number' and v % 2 == 1 and v < 2 ^ 31 end
    if not (odd(kx) and odd(ky)) or is_table(k) and #k ~= 2 then
      error(fn .. ': kernel_size must be an odd positive integer or {x, y} of them', 3)
    end
    return kx, ky
  end
  function M.GaussianBlur(kernel_size, ...)
    local fn = 'GaussianBlur'
    local kx, ky = ksize(fn, kernel_size)
    local opts = options.check(fn, options.positional(fn, { 'sigma' }, ...), { sigma = 'number|table' }) or {}
    local s = opts.sigma or { 0.1, 2 }
    if type(s) == 'number' then
      if not (s > 0 and s < math.huge) then error('GaussianBlur: sigma must be a positive number or {min, max}', 2) end
      s = { s, s }
    end
    return new('GaussianBlur', { kx = kx, ky = ky, sigma = range(fn, 'sigma', s, 1e-300) })
  end
  local function compile_blur(o, u)
    o.kind, o.w, o.h, o.mode = C.LN_OP_BLUR, u.kx, u.ky, u.fixed and 1 or 0
    o.a[0], o.a[1] = u.sigma[1], u.sigma[2]
  end
  add('GaussianBlur', compile_blur, function(t)
    return ('GaussianBlur({%d, %d}, {sigma = {%g, %g}})'):format(t.kx, t.ky, t.sigma[1], t.sigma[2])
  end)
  add('BlurFixed', compile_blur, function(t) return ('gaussian_blur({%d, %d})'):format(t.kx, t.ky) end)
  function F.gaussian_blur(x, kernel_size, sigma)
    local kx, ky = ksize('gaussian_blur', kernel_size)
    if sigma == nil then sigma = { kx * 0.15 + 0.35, ky * 0.15 + 0.35 } end
    if type(sigma) == 'number' then sigma = { sigma, sigma } end
    if is_table(sigma) and #sigma == 1 then sigma = { sigma[1], sigma[1] } end
    sigma = num_pair('gaussian_blur', 'sigma', sigma, 1e-300, math.huge)
    return new('BlurFixed', { kx = kx, ky = ky, sigma = sigma, fixed = true })(x)
  end

  -- Pad(padding[, {fill = 0, padding_mode = 'constant'}]): padding n, {lr, tb} or {l, t, r, b}
  local PAD_MODES = { constant = 0, edge = 1, reflect = 2, symmetric = 3 }
  function M.Pad(padding, ...)
    local fn = 'Pad'
    local opts = options.check(fn, options.positional(fn, { 'fill', 'padding_mode' }, ...),
      { fill = 'number', padding_mode = 'string' }) or {}
    local p = is_table(padding) and padding or { padding }
    local function int(v) return type(v) == 'number' and v % 1 == 0 and v >= 0 and v < 2 ^ 31 end
    if not (#p == 1 or #p == 2 or #p == 4) or not (int(p[1]) and int(p[2] or 0) and int(p[3] or 0) and int(p[4] or 0)) then
      error('Pad: padding must be an integer >= 0, {left/right, top/bottom} or {left, top, right, bottom}', 2)
    end
    if #p == 1 then p = { p[1], p[1], p[1], p[1] } elseif #p == 2 then p = { p[1], p[2], p[1], p[2] } end
    local mode = options.one_of(fn, 'padding_mode', opts.padding_mode, { 'constant', 'edge', 'reflect', 'symmetric' })
    local fill = opts.fill or 0
    if not (fill > -math.huge and fill < math.huge) then error('Pad: fill must be finite', 2) end
    return new('Pad', { pad = { p[1], p[2], p[3], p[4] }, fill = fill, mode = mode or 'constant' })
  end
  add('Pad', function(o, u)
    o.kind, o.mode, o.nv, o.v[0] = C.LN_OP_PAD, PAD_MODES[u.mode], 1, u.fill
    o.i, o.j, o.bw, o.bh = u.pad[1], u.pad[2], u.pad[3], u.pad[4]
  end, function(t)
    return ('Pad(%s, {fill = %g, padding_mode = %q})'):format(fmt_list(t.pad), t.fill, t.mode)
  end)
  function F.pad(x, padding, fill, mode) return M.Pad(padding, { fill = fill, padding_mode = mode })(x) end
end
