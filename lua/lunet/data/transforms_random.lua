-- lunet.data.transforms, continued: torchvision 0.14's RandomApply,
-- RandomChoice and RandomOrder (their lists run as C ops too: a GROUP op and
-- its items' ops), RandomPerspective with F.perspective, and
-- ElasticTransform with F.elastic_transform (tensor path). Every op draws
-- from its own keyed stream (its position in the Compose), so the same
-- transform at another position makes other choices. In a batch, items that
-- may be skipped or reordered must keep the image's size, and RandomChoice's
-- items must all give one size (torchvision's collate would fail too).
local ffi = require 'ffi'
local core = require 'lunet.core'
local options = require 'lunet.options'
local is_table = core.is_table
local C = core.C

return function(M, h)
  local new, values, F = h.new, h.values, M.functional
  local function add(kind, compile, tostr) h.OPS[kind], h.COMPILE[kind], h.tostr[kind] = true, compile, tostr end
  local function list_str(t)
    local parts = {}
    for i, u in ipairs(t.list) do parts[i] = tostring(u) end
    return '{' .. table.concat(parts, ', ') .. '}'
  end

  local function transform_list(fn, list)
    if h.is_transform(list) and list.kind == 'Compose' then list = list.list end
    if not is_table(list) or h.is_transform(list) or #list == 0 then
      error(fn .. ': expects a non-empty list of transforms', 3)
    end
    for i, t in ipairs(list) do
      if not h.is_transform(t) then error(('%s: item %d is not a lunet.data.transforms transform'):format(fn, i), 3) end
    end
    return list
  end
  h.GROUP.RandomApply, h.GROUP.RandomChoice, h.GROUP.RandomOrder = 0, 1, 2

  -- RandomApply(transforms[, {p = 0.5}]): all of them in order, with probability p
  function M.RandomApply(list, ...)
    local fn = 'RandomApply'
    list = transform_list(fn, list)
    local opts = options.check(fn, options.positional(fn, { 'p' }, ...), { p = 'number' }) or {}
    local p = opts.p == nil and 0.5 or opts.p
    if not (p >= 0 and p <= 1) then error('RandomApply: p must be in [0, 1], got ' .. tostring(p), 2) end
    return new('RandomApply', { list = list, p = p })
  end
  -- RandomChoice(transforms[, {p = weights}]): one of them (random.choices' weights, default equal)
  function M.RandomChoice(list, ...)
    local fn = 'RandomChoice'
    list = transform_list(fn, list)
    local opts = options.check(fn, options.positional(fn, { 'p' }, ...), { p = 'table' }) or {}
    local wts = opts.p or {}
    if opts.p then
      if #wts ~= #list then error(('RandomChoice: p has %d weights for %d transforms'):format(#wts, #list), 2) end
      local sum = 0
      for i = 1, #wts do
        if type(wts[i]) ~= 'number' or not (wts[i] >= 0 and wts[i] < math.huge) then
          error(('RandomChoice: p[%d] must be a finite number >= 0'):format(i), 2)
        end
        sum = sum + wts[i]
      end
      if not (sum > 0) then error('RandomChoice: the weights p must have a positive sum', 2) end
    else
      for i = 1, #list do wts[i] = 1 end
    end
    return new('RandomChoice', { list = list, weights = wts })
  end
  -- RandomOrder(transforms): all of them, in a random order
  function M.RandomOrder(list, ...)
    if select('#', ...) > 0 then error('RandomOrder: takes only the list of transforms', 2) end
    return new('RandomOrder', { list = transform_list('RandomOrder', list) })
  end
  h.tostr.RandomApply = function(t) return ('RandomApply(%s, {p = %g})'):format(list_str(t), t.p) end
  h.tostr.RandomChoice = function(t)
    return ('RandomChoice(%s, {p = {%s}})'):format(list_str(t), table.concat(t.weights, ', '))
  end
  h.tostr.RandomOrder = function(t) return ('RandomOrder(%s)'):format(list_str(t)) end
  add('Group', function(o, u)
    o.kind, o.mode, o.w, o.i, o.p = C.LN_OP_GROUP, u.mode, u.span, u.count, u.p or 1
    if u.count > C.LN_TF_MAX_OPS - 1 then error('transform: too many items in a group', 5) end
    for t, v in ipairs(u.weights or {}) do o.a[t - 1] = v end
  end)

  local function geometry(fn, opts, default_fill)
    local interp = options.one_of(fn, 'interpolation', opts.interpolation, { 'nearest', 'bilinear' }) or 'bilinear'
    local fill = opts.fill ~= nil and values(fn, 'fill', opts.fill) or default_fill
    for _, v in ipairs(fill or {}) do
      if not (v > -math.huge and v < math.huge) then error(fn .. ': fill must be finite', 3) end
    end
    return interp, fill
  end
  local function put_geometry(o, u)
    o.interp = u.interp == 'bilinear' and 1 or 0
    o.flags = h.put_fill(o, u.fill)
  end
  local tail = h.geometry_repr

  -- RandomPerspective([distortion_scale = 0.5, {p = 0.5, interpolation = 'bilinear', fill = 0}])
  function M.RandomPerspective(d, ...)
    local fn = 'RandomPerspective'
    d = d == nil and 0.5 or d
    if type(d) ~= 'number' or not (d >= 0 and d <= 1) then
      error('RandomPerspective: distortion_scale must be in [0, 1], got ' .. tostring(d), 2)
    end
    local opts = options.check(fn, options.positional(fn, { 'p', 'interpolation', 'fill' }, ...),
      { p = 'number', interpolation = 'string', fill = 'number|table' }) or {}
    local p = opts.p == nil and 0.5 or opts.p
    if not (p >= 0 and p <= 1) then error('RandomPerspective: p must be in [0, 1], got ' .. tostring(p), 2) end
    local interp, fill = geometry(fn, opts, { 0 })
    return new('RandomPerspective', { d = d, p = p, interp = interp, fill = fill })
  end
  add('RandomPerspective', function(o, u)
    o.kind, o.mode, o.p, o.a[0] = C.LN_OP_PERSPECTIVE, 0, u.p, u.d
    put_geometry(o, u)
  end, function(t) return ('RandomPerspective(%g, {p = %g, %s})'):format(t.d, t.p, tail(t)) end)

  -- F.perspective(x, startpoints, endpoints[, {interpolation = 'bilinear', fill}]):
  -- points {{x, y} x 4} (top-left, top-right, bottom-right, bottom-left, 0-based pixels)
  local sp_buf, ep_buf, cf_buf = ffi.new('double[8]'), ffi.new('double[8]'), ffi.new('double[8]')
  local function points(what, pts, buf)
    if not (is_table(pts) and #pts == 4) then error(('perspective: %s must be 4 points {x, y}'):format(what), 3) end
    for i = 1, 4 do
      local q = pts[i]
      if not (is_table(q) and #q == 2 and type(q[1]) == 'number' and type(q[2]) == 'number'
          and q[1] > -math.huge and q[1] < math.huge and q[2] > -math.huge and q[2] < math.huge) then
        error(('perspective: %s[%d] must be {x, y} of finite numbers'):format(what, i), 3)
      end
      buf[2 * i - 2], buf[2 * i - 1] = q[1], q[2]
    end
  end
  function F.perspective(x, startpoints, endpoints, ...)
    local fn = 'perspective'
    points('startpoints', startpoints, sp_buf)
    points('endpoints', endpoints, ep_buf)
    local opts = options.check(fn, options.positional(fn, { 'interpolation', 'fill' }, ...),
      { interpolation = 'string', fill = 'number|table' }) or {}
    local interp, fill = geometry(fn, opts, nil)
    if C.ln_perspective_coeffs(sp_buf, ep_buf, cf_buf) ~= 0 then core.raise() end
    local cf = {}
    for q = 1, 8 do cf[q] = cf_buf[q - 1] end
    return new('PerspectiveFixed', { coeffs = cf, interp = interp, fill = fill })(x)
  end
  add('PerspectiveFixed', function(o, u)
    o.kind, o.mode, o.p = C.LN_OP_PERSPECTIVE, 1, 1
    for q = 1, 8 do o.a[q - 1] = u.coeffs[q] end
    put_geometry(o, u)
  end, function(t) return ('perspective(%s)'):format(tail(t)) end)

  -- ElasticTransform([alpha = 50, sigma = 5, {interpolation = 'bilinear', fill = 0}]):
  -- alpha, sigma a number or {x, y}
  local function pair(fn, what, v, default)
    v = v == nil and default or v
    if type(v) == 'number' then v = { v, v } end
    if not (is_table(v) and (#v == 2 or #v == 1) and type(v[1]) == 'number' and type(v[#v]) == 'number'
        and v[1] >= 0 and v[#v] >= 0 and v[1] < math.huge and v[#v] < math.huge) then
      error(('%s: %s must be a number >= 0 or {x, y} of them'):format(fn, what), 3)
    end
    return { v[1], v[#v] }
  end
  function M.ElasticTransform(alpha, sigma, ...)
    local fn = 'ElasticTransform'
    local a, s = pair(fn, 'alpha', alpha, 50), pair(fn, 'sigma', sigma, 5)
    if (s[1] > 0) ~= (s[2] > 0) then error('ElasticTransform: sigma must be both 0 or both > 0 (torchvision blurs with both)', 2) end
    local opts = options.check(fn, options.positional(fn, { 'interpolation', 'fill' }, ...),
      { interpolation = 'string', fill = 'number' }) or {}
    local interp, fill = geometry(fn, opts, { 0 })
    return new('ElasticTransform', { alpha = a, sigma = s, interp = interp, fill = fill })
  end
  add('ElasticTransform', function(o, u)
    o.kind, o.mode = C.LN_OP_ELASTIC, 0
    o.a[0], o.a[1], o.a[2], o.a[3] = u.alpha[1], u.alpha[2], u.sigma[1], u.sigma[2]
    put_geometry(o, u)
  end, function(t)
    return ('ElasticTransform({%g, %g}, {%g, %g}, {%s})'):format(t.alpha[1], t.alpha[2], t.sigma[1], t.sigma[2], tail(t))
  end)

  -- T.elastic_displacement(tf, h, w[, {key = 1, seed = 0, epoch = 0}]): the
  -- (1, h, w, 2) displacement the first ElasticTransform of tf draws for that
  -- sample, and the uniform noise (2, h, w) it blurred (to check it)
  function M.elastic_displacement(t, hh, ww, opts)
    opts = options.check('elastic_displacement', opts, { key = 'number', seed = 'number', epoch = 'number' }) or {}
    local tf = M.compile(t, 'float32')
    local k = -1
    for q = 0, tf.nops - 1 do if tf.ops[q].kind == C.LN_OP_ELASTIC then k = q break end end
    if k < 0 then error('elastic_displacement: no ElasticTransform in the transform', 2) end
    local L = require 'lunet'
    local disp, noise = L.zeros(1, hh, ww, 2), L.zeros(2, hh, ww)
    if C.ln_elastic_displacement(tf.ops[k], k, hh, ww, opts.seed or 0, opts.epoch or 0, (opts.key or 1) - 1,
        ffi.cast('float *', disp:data_ptr()), ffi.cast('float *', noise:data_ptr())) ~= 0 then
      core.raise()
    end
    return disp, noise
  end

  -- F.elastic_transform(x, displacement[, {interpolation = 'bilinear', fill}]):
  -- displacement (1, H, W, 2) as torchvision's; composed of tensor ops
  -- (identity grid + displacement, grid_sample, the fill mask), any backend
  function F.elastic_transform(x, disp, ...)
    local fn = 'elastic_transform'
    options.need_tensor(fn, x)
    options.need_tensor(fn, disp, 'displacement')
    local opts = options.check(fn, options.positional(fn, { 'interpolation', 'fill' }, ...),
      { interpolation = 'string', fill = 'number|table' }) or {}
    local interp, fill = geometry(fn, opts, nil)
    if x:dim() ~= 3 and x:dim() ~= 4 then error(('elastic_transform: input must be (C,H,W) or (N,C,H,W), got %d-d'):format(x:dim()), 2) end
    local single = x:dim() == 3
    local xb = single and x:unsqueeze(1) or x
    if xb.dtype == 'uint8' then xb = xb:float() / 255 elseif xb.dtype ~= 'float32' then
      error('elastic_transform: input must be uint8 or float32, got ' .. xb.dtype, 2)
    end
    local n, c, hh, ww = xb:size(1), xb:size(2), xb:size(3), xb:size(4)
    if disp:dim() ~= 4 or disp:size(1) ~= 1 or disp:size(2) ~= hh or disp:size(3) ~= ww or disp:size(4) ~= 2 then
      error(('elastic_transform: displacement must be (1, %d, %d, 2), got (%s)'):format(hh, ww,
        table.concat(disp:size(), ', ')), 2)
    end
    if fill and #fill ~= 1 and #fill ~= c then error(('elastic_transform: fill has %d values for %d channels'):format(#fill, c), 2) end
    local T = require 'lunet'   -- (the tensor functions; required late: lunet loads this file)
    local gy = (T.arange(0, hh):float() * 2 + (1 - hh)) / hh
    local gx = (T.arange(0, ww):float() * 2 + (1 - ww)) / ww
    local grid = T.stack({ gx:view(1, ww):expand(hh, ww), gy:view(hh, 1):expand(hh, ww) }, 3):unsqueeze(1)
    grid = (grid:to(xb.device) + disp:to(xb.device):float()):expand(n, hh, ww, 2)
    local nnF = require('lunet.nn').functional
    if fill then xb = T.cat({ xb, T.ones(n, 1, hh, ww):to(xb.device) }, 2) end
    if n == 0 then return single and x:float():select(1, 1) or xb:narrow(2, 1, c):clone() end
    local out = nnF.grid_sample(xb, grid, { mode = interp, padding_mode = 'zeros', align_corners = false })
    if fill then
      local mask = out:narrow(2, c + 1, 1):expand(n, c, hh, ww)
      out = out:narrow(2, 1, c)
      local fv = T.tensor(#fill == 1 and { fill[1] } or fill):float():to(xb.device):view(1, #fill, 1, 1):expand(n, c, hh, ww)
      if interp == 'nearest' then
        out = T.where(mask:lt(0.5), fv, out)
      else
        out = out * mask + (1 - mask) * fv
      end
    end
    return single and out:select(1, 1) or out:contiguous()
  end
end
