-- lunet.nn.functional's interpolate (mode 'nearest'), as PyTorch 1.13's.
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

  local INTERP_OPTS = { size = 'number|table', scale_factor = 'number|table', mode = 'string' }

  -- the checked {size = {H, W}} or {scale_factor = {sh, sw}} of interpolate's options
  local function interp_geometry(fn, opts)
    check_options(fn, opts, INTERP_OPTS)
    local mode = opts.mode or 'nearest'
    if mode ~= 'nearest' then
      raise(("%s: mode '%s' is not supported; lunet has mode 'nearest' only"):format(fn, tostring(mode)))
    end
    if (opts.size == nil) == (opts.scale_factor == nil) then
      raise(fn .. ': give either size or scale_factor (one of them)')
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
    if opts.size ~= nil then return { size = two('size', opts.size, true) } end
    return { scale_factor = two('scale_factor', opts.scale_factor, false) }
  end

  -- interpolate(x (N, C, H, W), {size = {H', W'} | scale_factor = s or {sh, sw}, mode = 'nearest'}):
  -- nearest-neighbour upsampling (or downsampling) as torch.nn.functional.interpolate
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
