-- lunet.nn.functional's interpolate as PyTorch 1.13's: modes 'nearest',
-- 'nearest-exact' and 'area' on 3-, 4- and 5-d input, 'linear' (3-d),
-- 'bilinear' and 'bicubic' (4-d), 'trilinear' (5-d). The interpolating modes
-- are separable: dim by dim (last first, as PyTorch sums), each output row
-- blends its 2 (cubic: 4, clamped at the borders) source rows (index_select)
-- with per-row weights, so autograd differentiates it as it does those ops.
-- 'area' is adaptive_avg_pool to the output size; antialias (bilinear,
-- bicubic) a matmul per dim with a dense weight matrix. The per-size index
-- and weight tensors are cached. Float32/64 input in the other modes runs the
-- C kernels instead (c/nn/interp.c; same sums, same order, and a recorded
-- backward kernel): the composition stays for antialias, area, the other
-- dtypes, and as the reference the kernels' spec compares with.
-- Installed into F by lunet.nn.functional, which hands over its helpers;
-- returns interp_geometry and interpolate, the forms nn.Upsample calls.
local ffi = require 'ffi'
local core = require 'lunet.core'
local options = require 'lunet.options'
local is_table, typename = core.is_table, core.typename
local raise, check_options = options.raise, options.check
local C = core.C
local T = require 'lunet.tensor'

return function(F, h)
  local NO_OPTS = h.NO_OPTS
  local f32 = ffi.new('float[1]')
  local function float(v) f32[0] = v; return f32[0] end

  local cache, count = {}, 0
  local function cached(key, make)
    local c = cache[key]
    if c then return c end
    c = make()
    if count >= 512 then cache, count = {}, 0 end
    cache[key], count = c, count + 1
    return c
  end
  local function on(t, dev) return dev ~= 'cpu:0' and t:to(dev) or t end
  local function index(t, dev) return on(require('lunet.factory').tensor(t, { dtype = 'int64' }), dev) end
  -- weights of the rows along dim of an nd-d x, shaped to broadcast there
  local function weights(t, x, dim)
    local shape = { #t }
    for i = dim + 1, x:dim() do shape[#shape + 1] = 1 end
    return on(require('lunet.factory').tensor(t, { dtype = x.dtype }):view(shape), x.device)
  end

  -- the 1-based source rows of each of outsz output rows (torch 1.13's
  -- nearest_idx and nearest_exact_idx: the scale in float, 1/scale_factor when
  -- one was given) and k when they are each row repeated k times (or nil)
  local function nearest_index(insz, outsz, scale, exact, dev)
    return cached(table.concat({ 'n', insz, outsz, tostring(scale), tostring(exact), dev }, ':'), function()
      local idx = {}
      local sc = float((scale and scale > 0) and 1 / scale or insz / outsz)
      for j = 0, outsz - 1 do
        local s
        if not exact and outsz == insz then s = j
        elseif not exact and outsz == 2 * insz then s = math.floor(j / 2)
        else s = math.min(math.floor(float((exact and j + 0.5 or j) * sc)), insz - 1) end
        idx[j + 1] = s + 1
      end
      local k = insz > 0 and outsz % insz == 0 and outsz / insz or nil
      if k then
        for j = 1, outsz do if idx[j] ~= math.floor((j - 1) / k) + 1 then k = nil; break end end
      end
      return { index(idx, dev), k }
    end)
  end

  local A = -0.75   -- (PyTorch's bicubic coefficient)
  local function cc1(t) return ((A + 2) * t - (A + 3)) * t * t + 1 end
  local function cc2(t) return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A end

  -- along dim of x from insz to outsz rows: the source rows of each output row
  -- and their weights, {i1, w1, i2, w2, ...} (torch 1.13's area_pixel_compute_scale
  -- and _source_index; cubic: 4 taps, clamped to the input); nil for a copy
  local function blend_index(x, dim, insz, outsz, scale, align, cubic)
    local ratio
    if align then ratio = outsz > 1 and (insz - 1) / (outsz - 1) or 0
    else ratio = (scale and scale > 0) and 1 / scale or insz / outsz end
    -- (torch 1.13 copies a kept size in the linear modes; bicubic blends unless the step is 1)
    if outsz == insz and (not cubic or ratio == 1) then return nil end
    local key = table.concat({ 'l', dim, x:dim(), insz, outsz, tostring(scale), tostring(align),
      tostring(cubic), x.dtype, x.device }, ':')
    return cached(key, function()
      local n = cubic and 4 or 2
      local ii, ww = {}, {}
      for m = 1, n do ii[m], ww[m] = {}, {} end
      for j = 0, outsz - 1 do
        local src = align and ratio * j or ratio * (j + 0.5) - 0.5
        if cubic then
          local k = math.floor(src)
          local t = src - k
          local w = { cc2(t + 1), cc1(t), cc1(1 - t), cc2(2 - t) }
          for m = 1, 4 do
            ii[m][j + 1] = math.min(math.max(k + m - 2, 0), insz - 1) + 1
            ww[m][j + 1] = w[m]
          end
        else
          src = math.max(src, 0)
          local k = math.min(math.floor(src), insz - 1)
          local l = math.min(math.max(src - k, 0), 1)
          ii[1][j + 1], ii[2][j + 1] = k + 1, k < insz - 1 and k + 2 or k + 1
          ww[1][j + 1], ww[2][j + 1] = 1 - l, l
        end
      end
      local c = {}
      for m = 1, n do c[2 * m - 1], c[2 * m] = index(ii[m], x.device), weights(ww[m], x, dim) end
      return c
    end)
  end

  -- antialias (torch 1.13's _compute_weights_aa, Pillow's filters): the (insz, outsz)
  -- matrix whose column j holds output row j's normalized weights over the input
  -- rows; its support widens with the downscaling factor, so it is dense here
  local function aa_filter(t, cubic)
    t = math.abs(t)
    if not cubic then return math.max(0, 1 - t) end
    local a = -0.5   -- (Pillow's bicubic, not interpolate's -0.75)
    if t < 1 then return ((a + 2) * t - (a + 3)) * t * t + 1 end
    if t < 2 then return (((t - 5) * t + 8) * t - 4) * a end
    return 0
  end
  local function aa_matrix(x, insz, outsz, scale, align, cubic)
    local key = table.concat({ 'aa', insz, outsz, tostring(scale), tostring(align), tostring(cubic), x.dtype, x.device }, ':')
    return cached(key, function()
      local ratio
      if align then ratio = outsz > 1 and (insz - 1) / (outsz - 1) or 0
      else ratio = (scale and scale > 0) and 1 / scale or insz / outsz end
      local half = cubic and 2 or 1
      local support = ratio >= 1 and half * ratio or half
      local inv = ratio >= 1 and 1 / ratio or 1
      local m = {}
      for r = 1, insz do m[r] = {} for j = 1, outsz do m[r][j] = 0 end end
      for i = 0, outsz - 1 do
        local center = ratio * (i + 0.5)
        local lo = math.max(math.floor(center - support + 0.5), 0)   -- (torch truncates, then takes >= 0)
        local hi = math.min(math.floor(center + support + 0.5), insz)
        local total = 0
        for r = lo, hi - 1 do
          local w = aa_filter((r - center + 0.5) * inv, cubic)
          m[r + 1][i + 1], total = w, total + w
        end
        if total ~= 0 then for r = lo, hi - 1 do m[r + 1][i + 1] = m[r + 1][i + 1] / total end end
      end
      return on(require('lunet.factory').tensor(m, { dtype = x.dtype }), x.device)
    end)
  end

  -- the C kernels: mode ids (lunet.h's LN_INTERP_*) and the recorded call
  local KERNEL_MODE = { nearest = 0, ['nearest-exact'] = 1, linear = 2, bilinear = 2, trilinear = 2, bicubic = 3 }
  local use_kernels = true
  local record_interpolate = require('lunet.autograd').recorder('interpolate')
  local shape5 = ffi.new('int64_t[5]')
  local function kernel_interp(x, mode, out, sc, align)
    local s = x:size()
    shape5[0], shape5[1] = s[1], s[2]
    for i = 1, #out do shape5[i + 1] = out[i] end
    local y = T.wrap(C.ln_empty(#s, shape5, x.p.dtype_id, x.p.device_id))
    local scales = ffi.new('double[3]', sc[1] or 0, sc[2] or 0, sc[3] or 0)
    local id, al = KERNEL_MODE[mode], align and 1 or 0
    T.check(C.ln_interpolate_forward(y.p, x.p, id, al, scales))
    return record_interpolate(y, x, id, al, scales, s)
  end

  local function blend(y, dim, c)
    local r = y:index_select(dim, c[1]) * c[2]
    for m = 3, #c, 2 do r = r + y:index_select(dim, c[m]) * c[m + 1] end
    return r
  end

  local INTERP_OPTS = { size = 'number|table', scale_factor = 'number|table', mode = 'string',
    align_corners = 'boolean', recompute_scale_factor = 'boolean', antialias = 'boolean' }
  -- the input dims each mode takes (nil: 3, 4 or 5) and whether it interpolates
  local MODE_DIMS = { nearest = false, ['nearest-exact'] = false, area = false,
    linear = 3, bilinear = 4, bicubic = 4, trilinear = 5 }

  -- the checked size or scale_factor of interpolate's options (a number, or a
  -- table of one per spatial dim, matched to the input later), with mode,
  -- align_corners and recompute_scale_factor
  local function interp_geometry(fn, opts)
    check_options(fn, opts, INTERP_OPTS)
    local mode = opts.mode or 'nearest'
    if MODE_DIMS[mode] == nil then
      raise(("%s: mode must be 'nearest', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area' or 'nearest-exact', got '%s'")
        :format(fn, tostring(mode)))
    end
    if opts.align_corners ~= nil and not MODE_DIMS[mode] then   -- (as PyTorch, which refuses even false)
      raise(("%s: align_corners is for the modes linear, bilinear, bicubic and trilinear, not '%s'"):format(fn, mode))
    end
    if opts.antialias and mode ~= 'bilinear' and mode ~= 'bicubic' then   -- (as PyTorch 1.13)
      raise(("%s: antialias is for the modes bilinear and bicubic, not '%s'"):format(fn, mode))
    end
    if (opts.size == nil) == (opts.scale_factor == nil) then
      raise(fn .. ': give either size or scale_factor (one of them)')
    end
    if opts.recompute_scale_factor and opts.size ~= nil then
      raise(fn .. ': recompute_scale_factor is for scale_factor, not an explicit size')
    end
    local function values(what, v, int)
      local t = type(v) == 'number' and { v } or v
      if not is_table(t) or #t < 1 or #t > 3 then
        raise(('%s: %s must be a number or a table of 1 to 3 numbers, got %s'):format(fn, what,
          is_table(v) and #v .. ' values' or typename(v)))
      end
      for i = 1, #t do
        local a = t[i]
        if type(a) ~= 'number' or not (a > 0 and a < math.huge) or int and a % 1 ~= 0 then
          raise(('%s: %s must be %s, got %s'):format(fn, what, int and 'integers >= 1' or 'finite numbers > 0', tostring(a)))
        end
      end
      return type(v) == 'number' and v or { unpack(t) }
    end
    local g = { mode = mode, align_corners = opts.align_corners or false, antialias = opts.antialias or false,
      recompute_scale_factor = opts.recompute_scale_factor or false }
    if opts.size ~= nil then g.size = values('size', opts.size, true)
    else g.scale_factor = values('scale_factor', opts.scale_factor, false) end
    return g
  end

  -- size or scale_factor given as one value per spatial dim of x
  local function per_dim(fn, what, v, sd)
    if type(v) == 'number' then
      local t = {}
      for i = 1, sd do t[i] = v end
      return t
    end
    if #v ~= sd then
      raise(('%s: %s must be a number or %d values for %d-d input, got %d values'):format(fn, what, sd, sd + 2, #v))
    end
    return v
  end

  -- interpolate(x, geometry[, fn]): resizing as torch.nn.functional.interpolate;
  -- the output size from a scale factor is floor(in * scale)
  local function interpolate(x, g, fn)
    fn = fn or 'interpolate'
    if not T.is_tensor(x) then raise(fn .. ': input must be a tensor, got ' .. typename(x)) end
    local nd, mode = x:dim(), g.mode
    if nd < 3 or nd > 5 then raise(('%s: input must be 3-d, 4-d or 5-d (N, C, ...), got %d-d'):format(fn, nd)) end
    if MODE_DIMS[mode] and MODE_DIMS[mode] ~= nd then
      raise(("%s: mode '%s' needs %d-d input, got %d-d"):format(fn, mode, MODE_DIMS[mode], nd))
    end
    if (MODE_DIMS[mode] or mode == 'area') and not x:is_floating_point() then
      raise(("%s: mode '%s' needs a floating-point input, got %s"):format(fn, mode, x.dtype))
    end
    local s, sd = x:size(), nd - 2
    local out, sc = {}, {}
    if g.size then out = per_dim(fn, 'size', g.size, sd)
    else
      local f = per_dim(fn, 'scale_factor', g.scale_factor, sd)
      for i = 1, sd do
        sc[i], out[i] = f[i], math.floor(s[i + 2] * f[i])
        if out[i] < 1 then
          raise(('%s: scale_factor %s gives an empty output for a dim of size %d'):format(fn, tostring(f[i]), s[i + 2]))
        end
      end
    end
    for i = 1, sd do   -- (the index tables below are built per output row: 2^62 of them ran out of memory)
      if out[i] >= 2 ^ 31 then raise(('%s: output size %.17g in dim %d is too large'):format(fn, out[i], i + 2)) end
    end
    if g.recompute_scale_factor then sc = {} end   -- (the source coordinates from in/out)
    if mode == 'area' then return F['adaptive_avg_pool' .. sd .. 'd'](x, sd == 1 and out[1] or out) end
    if use_kernels and not g.antialias and (x.p.dtype_id == C.LN_FLOAT32 or x.p.dtype_id == C.LN_FLOAT64) then
      return kernel_interp(x, mode, out, sc, g.align_corners)
    end
    local y = x
    if mode == 'nearest' or mode == 'nearest-exact' then
      local idx, all_k, rep = {}, true, {}
      for i = 1, sd do
        local c = nearest_index(s[i + 2], out[i], sc[i], mode == 'nearest-exact', x.device)
        idx[i], rep[i] = c[1], c[2]
        all_k = all_k and c[2] ~= nil
      end
      if all_k then   -- each row repeated: one copy of an expanded view
        local v, e = { s[1], s[2] }, { s[1], s[2] }
        for i = 1, sd do
          v[#v + 1], v[#v + 2], e[#e + 1], e[#e + 2] = s[i + 2], 1, s[i + 2], rep[i]
        end
        return x:view(v):expand(e):reshape(s[1], s[2], unpack(out))
      end
      for i = sd, 1, -1 do
        if rep[i] ~= 1 then y = y:index_select(i + 2, idx[i]) end
      end
      return y
    end
    local changed = false
    if g.antialias then   -- (4-d: along W, then H, each a matmul with the weights)
      for i = 2, 1, -1 do
        if out[i] ~= s[i + 2] then
          local m = aa_matrix(x, s[i + 2], out[i], sc[i], g.align_corners, mode == 'bicubic')
          y = i == 2 and y:matmul(m) or y:transpose(3, 4):matmul(m):transpose(3, 4)
          changed = true
        end
      end
      return changed and y or x:clone()
    end
    for i = sd, 1, -1 do
      local c = blend_index(x, i + 2, s[i + 2], out[i], sc[i], g.align_corners, mode == 'bicubic')
      if c then y, changed = blend(y, i + 2, c), true end
    end
    return changed and y or x:clone()
  end
  function F.interpolate(x, opts)
    return interpolate(x, interp_geometry('interpolate', opts or NO_OPTS))
  end

  -- kernels(false): the composed path for the float types too (the kernels' spec compares them)
  local function kernels(on) use_kernels = on end
  return { interp_geometry = interp_geometry, interpolate = interpolate, kernels = kernels }
end
