-- lunet.nn.functional's interpolate, modes 'nearest' and 'bilinear', as
-- PyTorch 1.13's. Bilinear is separable: along W, then along H, each output
-- row blends its two source rows (index_select) with per-row weights, so
-- autograd differentiates it as it does those tensor ops.
-- Installed into F by lunet.nn.functional, which hands over its helpers;
-- returns interp_geometry and interpolate, the forms nn.Upsample calls.
local ffi = require 'ffi'
local core = require 'lunet.core'
local options = require 'lunet.options'
local is_table, typename = core.is_table, core.typename
local raise, check_options = options.raise, options.check

return function(F, h)
  local need, NO_OPTS = h.need, h.NO_OPTS

  local f32 = ffi.new('float[1]')
  local nearest_cache, nearest_count = {}, 0

  -- the 1-based source rows of each of outsz output rows (torch 1.13's nearest_idx:
  -- the scale in float, 1/scale_factor when one was given), as an int64 tensor
  -- on device, and k when they are each row repeated k times (or nil)
  local function nearest_index(insz, outsz, scale, device)
    local key = insz .. ':' .. outsz .. ':' .. tostring(scale) .. ':' .. device
    local c = nearest_cache[key]
    if c then return c[1], c[2] end
    local idx = {}
    if outsz == insz then for j = 0, outsz - 1 do idx[j + 1] = j + 1 end
    elseif outsz == 2 * insz then for j = 0, outsz - 1 do idx[j + 1] = math.floor(j / 2) + 1 end
    else
      f32[0] = (scale and scale > 0) and 1 / scale or insz / outsz
      local sc = f32[0]
      for j = 0, outsz - 1 do
        f32[0] = j * sc
        idx[j + 1] = math.min(math.floor(f32[0]), insz - 1) + 1
      end
    end
    local k = insz > 0 and outsz % insz == 0 and outsz / insz or nil
    if k then
      for j = 1, outsz do if idx[j] ~= math.floor((j - 1) / k) + 1 then k = nil; break end end
    end
    local t = require('lunet.factory').tensor(idx, { dtype = 'int64' })
    if device ~= 'cpu:0' then t = t:to(device) end
    if nearest_count >= 256 then nearest_cache, nearest_count = {}, 0 end
    nearest_cache[key], nearest_count = { t, k }, nearest_count + 1
    return t, k
  end

  local linear_cache, linear_count = {}, 0

  -- along a dim (3 or 4) of x from insz to outsz rows: the 1-based source rows
  -- i0, i1 of each output row and their weights w0, w1 (torch 1.13's
  -- compute_source_index_and_lambda; nil when the sizes agree, which it
  -- copies), the weights shaped to broadcast along dim, in x's dtype
  local function linear_index(x, dim, insz, outsz, scale, align)
    if outsz == insz then return nil end
    local key = table.concat({ dim, insz, outsz, tostring(scale), tostring(align), x.dtype, x.device }, ':')
    local c = linear_cache[key]
    if c then return c end
    local ratio
    if align then ratio = outsz > 1 and (insz - 1) / (outsz - 1) or 0
    else ratio = (scale and scale > 0) and 1 / scale or insz / outsz end
    local i0, i1, w0, w1 = {}, {}, {}, {}
    for j = 0, outsz - 1 do
      local src = align and ratio * j or math.max(ratio * (j + 0.5) - 0.5, 0)
      local k = math.min(math.floor(src), insz - 1)
      local l = math.min(math.max(src - k, 0), 1)
      i0[j + 1], i1[j + 1] = k + 1, k < insz - 1 and k + 2 or k + 1
      w0[j + 1], w1[j + 1] = 1 - l, l
    end
    local factory = require 'lunet.factory'
    local shape = dim == 3 and { outsz, 1 } or { outsz }
    c = { factory.tensor(i0, { dtype = 'int64' }), factory.tensor(i1, { dtype = 'int64' }),
      factory.tensor(w0, { dtype = x.dtype }):view(shape), factory.tensor(w1, { dtype = x.dtype }):view(shape) }
    if x.device ~= 'cpu:0' then
      for i = 1, 4 do c[i] = c[i]:to(x.device) end
    end
    if linear_count >= 256 then linear_cache, linear_count = {}, 0 end
    linear_cache[key], linear_count = c, linear_count + 1
    return c
  end

  local function blend(y, dim, c)
    return y:index_select(dim, c[1]) * c[3] + y:index_select(dim, c[2]) * c[4]
  end

  -- bilinear resizing of x (N, C, H, W) to out {H', W'}; sc: the scale factors
  -- that give the source coordinates (nil: in/out)
  local function bilinear(x, s, out, sc, align)
    if not x:is_floating_point() then
      raise(("interpolate: mode 'bilinear' needs a floating-point input, got %s"):format(x.dtype))
    end
    local cw = linear_index(x, 4, s[4], out[2], sc[2], align)
    local ch = linear_index(x, 3, s[3], out[1], sc[1], align)
    if not cw and not ch then return x:clone() end
    local y = x
    if cw then y = blend(y, 4, cw) end   -- (W first, then H: PyTorch's order of the sums)
    if ch then y = blend(y, 3, ch) end
    return y
  end

  local INTERP_OPTS = { size = 'number|table', scale_factor = 'number|table', mode = 'string',
    align_corners = 'boolean', recompute_scale_factor = 'boolean' }
  local MODES = { nearest = true, bilinear = true }

  -- the checked {size = {H, W}} or {scale_factor = {sh, sw}} of interpolate's
  -- options, with mode, align_corners and recompute_scale_factor
  local function interp_geometry(fn, opts)
    check_options(fn, opts, INTERP_OPTS)
    local mode = opts.mode or 'nearest'
    if not MODES[mode] then
      raise(("%s: mode must be 'nearest' or 'bilinear', got '%s'"):format(fn, tostring(mode)))
    end
    if opts.align_corners ~= nil and mode == 'nearest' then   -- (as PyTorch, which refuses even false)
      raise(("%s: align_corners is for mode 'bilinear', not 'nearest'"):format(fn))
    end
    if (opts.size == nil) == (opts.scale_factor == nil) then
      raise(fn .. ': give either size or scale_factor (one of them)')
    end
    if opts.recompute_scale_factor and opts.size ~= nil then
      raise(fn .. ': recompute_scale_factor is for scale_factor, not an explicit size')
    end
    local function two(what, v, int)
      if type(v) == 'number' then v = { v, v } end
      if not is_table(v) or #v ~= 2 then
        raise(('%s: %s must be a number or {h, w}, got %s'):format(fn, what, is_table(v) and #v .. ' values' or typename(v)))
      end
      for i = 1, 2 do
        local a = v[i]
        if type(a) ~= 'number' or not (a > 0 and a < math.huge) or int and a % 1 ~= 0 then
          raise(('%s: %s must be %s, got %s'):format(fn, what, int and 'integers >= 1' or 'finite numbers > 0', tostring(a)))
        end
      end
      return { v[1], v[2] }
    end
    local g = { mode = mode, align_corners = opts.align_corners or false,
      recompute_scale_factor = opts.recompute_scale_factor or false }
    if opts.size ~= nil then g.size = two('size', opts.size, true)
    else g.scale_factor = two('scale_factor', opts.scale_factor, false) end
    return g
  end

  -- interpolate(x (N, C, H, W), {size = {H', W'} | scale_factor = s or {sh, sw}[, mode = 'nearest' |
  -- 'bilinear'][, align_corners = false][, recompute_scale_factor = false]}): resizing as
  -- torch.nn.functional.interpolate; the output size from a scale factor is floor(in * scale)
  local function interpolate(x, g)
    local s = x:size()
    local out, sc = {}, {}
    for i = 1, 2 do
      if g.size then out[i] = g.size[i]
      else
        sc[i] = g.scale_factor[i]
        out[i] = math.floor(s[i + 2] * sc[i])
        if out[i] < 1 then
          raise(('interpolate: scale_factor %s gives an empty output for a dim of size %d'):format(tostring(sc[i]), s[i + 2]))
        end
      end
    end
    if g.recompute_scale_factor then sc = {} end   -- (the source coordinates from in/out)
    if g.mode == 'bilinear' then return bilinear(x, s, out, sc, g.align_corners) end
    local dev = x.device
    local ih, kh = nearest_index(s[3], out[1], sc[1], dev)
    local iw, kw = nearest_index(s[4], out[2], sc[2], dev)
    if kh and kw then   -- each row and column repeated: one copy of an expanded view
      if kh == 1 and kw == 1 then return x:clone() end
      return x:view(s[1], s[2], s[3], 1, s[4], 1):expand(s[1], s[2], s[3], kh, s[4], kw):reshape(s[1], s[2], out[1], out[2])
    end
    local y = x
    if kw ~= 1 then y = y:index_select(4, iw) end
    if kh ~= 1 then y = y:index_select(3, ih) end
    return y
  end
  function F.interpolate(x, opts)
    need('interpolate', x, 'input', 4)
    return interpolate(x, interp_geometry('interpolate', opts or NO_OPTS))
  end

  return { interp_geometry = interp_geometry, interpolate = interpolate }
end
