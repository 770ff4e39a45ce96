-- lunet.nn.functional's max_unpool1d/2d/3d and fractional_max_pool2d/3d, as
-- PyTorch 1.13's, composed from tensor ops (every backend, autograd).
--  max_unpool: a scatter of the input into zeros at its indices (1-based
--    positions within each output plane/volume, as max_pool's return_indices
--    give them); its gradient is the gather of the output's.
--  fractional_max_pool: torch's intervals (Graham 2014, ATen's
--    generate_intervals) from one uniform sample per plane and dim, computed
--    in the input's dtype as ATen does (so a float32 input picks the same
--    windows); the windows' rows (and columns, planes) are gathered, then a
--    max over each window gives the value and its first position.
-- Installed into F by lunet.nn.functional, which hands over its helpers.
local factory = require 'lunet.factory'
local Tensor = require('lunet.tensor').Tensor
local options = require 'lunet.options'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename
local is_tensor = require('lunet.tensor').is_tensor
local raise, check_options, positional = options.raise, options.check, options.positional
local NO = setmetatable({}, { __newindex = function() error('functional: internal table is read-only', 2) end })
local DIMS = { '(N, C, L) or (C, L)', '(N, C, H, W) or (C, H, W)', '(N, C, D, H, W) or (C, D, H, W)' }

return function(F, h)
  local need = h.need
  local function size_of(t) return '{' .. table.concat(t:size(), ',') .. '}' end

  -- v a number or a list of nd numbers, each an integer >= min (real numbers when min is nil)
  local function tuple(fn, what, v, nd)
    local t = is_table(v) and v or { v, v, v }
    local ok = (not is_table(v) or #v == nd) and type(v) ~= 'nil'
    for i = 1, nd do ok = ok and type(t[i]) == 'number' and t[i] % 1 == 0 and t[i] >= 0 and t[i] < 2 ^ 31 end
    if not ok then
      local shown = tostring(v)
      if is_table(v) then
        local s = {}
        for i = 1, #v do s[i] = tostring(v[i]) end
        shown = '{' .. table.concat(s, ', ') .. '}'
      end
      raise(('%s: %s must be an integer >= 0 or a list of %d of them, got %s'):format(fn, what, nd, shown))
    end
    return { t[1], t[2], t[3] }
  end

  -- x with a batch dim (nd spatial dims), and whether it had one
  local function batched(fn, x, nd)
    need(fn, x, 'input')
    local d = x.p.ndim
    if d ~= nd + 1 and d ~= nd + 2 then
      raise(('%s: input must be %s, got %d-d %s'):format(fn, DIMS[nd], d, size_of(x)))
    end
    if not x:is_floating_point() then raise(('%s: input must be a floating-point tensor, got %s'):format(fn, x.dtype)) end
    if d == nd + 1 then return x:unsqueeze(1), false end
    return x, true
  end

  -- the options of a *_with_indices alias (either form), return_indices set
  local function with_indices(fn, names, opts, ...)
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or select('#', ...) > 0 then
      opts = positional(fn, names, opts, ...)
    end
    local o = {}
    if opts ~= nil then
      if not is_table(opts) then raise(('%s: expected an options table, got %s'):format(fn, typename(opts))) end
      for key, v in pairs(opts) do o[key] = v end
    end
    o.return_indices = true
    return o
  end

  local function args(fn, names, known, opts, ...)
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or select('#', ...) > 0 then
      opts = positional(fn, names, opts, ...)
    end
    return opts and check_options(fn, opts, known) or NO
  end

  -- ---- max_unpool -----------------------------------------------------------------------

  local UNPOOL_OPTS = { stride = 'number|table', padding = 'number|table', output_size = 'table' }
  local UNPOOL_POS = { 'stride', 'padding', 'output_size' }

  local function max_unpool(fn, nd, x, idx, k, opts, ...)
    opts = args(fn, UNPOOL_POS, UNPOOL_OPTS, opts, ...)
    local xb, was_batched = batched(fn, x, nd)
    need(fn, idx, 'indices')
    if idx.dtype ~= 'int64' then raise(('%s: indices must be int64 (max_pool\'s), got %s'):format(fn, idx.dtype)) end
    if not idx:is_same_size(x) then
      raise(('%s: indices %s must have the input\'s shape %s'):format(fn, size_of(idx), size_of(x)))
    end
    local ks = tuple(fn, 'kernel_size', k, nd)
    local st = opts.stride ~= nil and tuple(fn, 'stride', opts.stride, nd) or ks
    local pd = tuple(fn, 'padding', opts.padding or 0, nd)
    local s, out, plane, L = xb:size(), {}, 1, 1
    for i = 1, nd do
      if ks[i] < 1 or st[i] < 1 then raise(('%s: kernel_size and stride must be >= 1'):format(fn)) end
      out[i] = (s[i + 2] - 1) * st[i] + ks[i] - 2 * pd[i]
    end
    local want = opts.output_size
    if want ~= nil then
      local w = {}
      for i = 1, #want do w[i] = want[i] end
      if #w == nd + 2 then w = { w[3], w[4], w[5] } end
      if #w ~= nd and #want ~= nd + 2 then
        raise(('%s: output_size must have %d or %d entries, got %d'):format(fn, nd, nd + 2, #want))
      end
      for i = 1, nd do
        local lo, hi = out[i] - st[i], out[i] + st[i]
        if type(w[i]) ~= 'number' or w[i] % 1 ~= 0 or not (lo < w[i] and w[i] < hi) then
          raise(('%s: output_size entry %d must be an integer between %d and %d (exclusive), got %s'):format(
            fn, i, lo, hi, tostring(w[i])))
        end
        out[i] = w[i]
      end
    end
    for i = 1, nd do
      if out[i] < 1 then raise(('%s: output size %d in dim %d must be >= 1'):format(fn, out[i], i)) end
      plane, L = plane * out[i], L * s[i + 2]
    end
    local N, Cc = s[1], s[2]
    if idx:numel() > 0 then
      local lo, hi = idx:min():item(), idx:max():item()
      if lo < 1 or hi > plane then
        raise(('%s: index %d is out of range for an output of %d per plane (indices are 1-based)'):format(
          fn, lo < 1 and lo or hi, plane))
      end
    end
    local i3, x3 = idx:reshape(N, Cc, L), xb:reshape(N, Cc, L)
    local y = xb:new_zeros(N, Cc, plane)
    local count = y:scatter_add(3, i3, x3:detach() * 0 + 1)
    if x3:numel() > 0 and count:max():item() > 1 then
      -- overlapping windows name a maximum twice (the same value): torch keeps
      -- one, and its gradient is the output's gathered at every index
      local sum = y:scatter_add(3, i3, x3)
      y = sum - sum:detach() + sum:detach() / count:clamp_min(1)
    else
      y = y:scatter(3, i3, x3)
    end
    local shape = { N, Cc, out[1], out[2], out[3] }
    if not was_batched then table.remove(shape, 1) end
    return y:view(shape)
  end

  -- max_unpool2d(input, indices, kernel_size[, {stride = kernel_size, padding = 0,
  -- output_size}]) or torch's positional (input, indices, kernel_size, stride, padding, output_size)
  function F.max_unpool1d(x, idx, k, ...) return max_unpool('max_unpool1d', 1, x, idx, k, ...) end
  function F.max_unpool2d(x, idx, k, ...) return max_unpool('max_unpool2d', 2, x, idx, k, ...) end
  function F.max_unpool3d(x, idx, k, ...) return max_unpool('max_unpool3d', 3, x, idx, k, ...) end

  -- ---- fractional_max_pool ----------------------------------------------------------------

  local FRAC_OPTS = { output_size = 'number|table', output_ratio = 'number|table', return_indices = 'boolean',
    _random_samples = 'tensor' }
  local FRAC_POS = { 'output_size', 'output_ratio', 'return_indices', '_random_samples' }
  -- which of a plane's samples each dim uses (ATen: 2-d {w, h}, 3-d {t, h, w})
  local SAMPLE_COL = { [2] = { 2, 1 }, [3] = { 1, 2, 3 } }

  -- the 0-based first row of each of o windows of k over n, (N, C, o) int64
  local function intervals(u, n, o, k, dtype)
    local last = u:new_zeros(u:size(1), u:size(2), 1) + (n - k)
    if o == 1 then return last:to('int64') end
    -- alpha rounded to the input's dtype, as ATen's scalar_t arithmetic
    local alpha = factory.tensor({ (n - k) / (o - 1) }, { dtype = dtype }):item()
    local i = factory.arange(0, o - 1, { dtype = dtype, device = u.device }):view(1, 1, o - 1)
    local seq = ((i + u) * alpha):trunc() - (u * alpha):trunc()
    return Tensor.cat({ seq, last }, 3):to('int64')
  end

  local function fractional(fn, nd, x, k, opts, ...)
    opts = args(fn, FRAC_POS, FRAC_OPTS, opts, ...)
    local xb, was_batched = batched(fn, x, nd)
    local ks = tuple(fn, 'kernel_size', k, nd)
    local s = xb:size()
    local N, Cc, os = s[1], s[2], nil
    if opts.output_size ~= nil then os = tuple(fn, 'output_size', opts.output_size, nd)
    elseif opts.output_ratio ~= nil then
      local r = opts.output_ratio
      r = is_table(r) and r or { r, r, r }
      os = {}
      for i = 1, nd do
        if type(r[i]) ~= 'number' or not (r[i] > 0 and r[i] <= 1) then
          raise(('%s: output_ratio must be a number in (0, 1] or a list of %d of them, got %s'):format(fn, nd,
            tostring(r[i])))
        end
        os[i] = math.floor(s[i + 2] * r[i])
      end
    else raise(fn .. ': requires output_size or output_ratio') end
    for i = 1, nd do
      if ks[i] < 1 or os[i] < 1 then
        raise(('%s: kernel_size and output size must be >= 1, got %d and %d in dim %d'):format(fn, ks[i], os[i], i))
      end
      -- (torch 1.13's 3-d check is strict, its 2-d one not)
      if os[i] + ks[i] - 1 > s[i + 2] - (nd == 3 and 1 or 0) then
        raise(('%s: kernel %d with output %d is too large for input size %d in dim %d (output + kernel - 1 must be %s input)')
          :format(fn, ks[i], os[i], s[i + 2], i, nd == 3 and '<' or '<='))
      end
    end
    local u = opts._random_samples
    if u == nil then
      u = factory.rand({ N, Cc, nd }, { dtype = x.dtype, device = x.device })
    else
      local us = u:size()
      if #us ~= 3 or us[1] ~= N or us[2] ~= Cc or us[3] ~= nd then
        raise(('%s: _random_samples must be {%d,%d,%d} (N, C, %d), got %s'):format(fn, N, Cc, nd, nd, size_of(u)))
      end
      if not u:is_floating_point() then raise(fn .. ': _random_samples must be floating point, got ' .. u.dtype) end
      u = u:detach():to(x.dtype)
    end
    -- each dim's window starts (N, C, o); the input gathered to (N, C, o1*k1, o2*k2, ...)
    local g, starts = xb, {}
    for i = 1, nd do
      local n = s[i + 2]
      starts[i] = intervals(u:select(3, SAMPLE_COL[nd][i]):unsqueeze(3), n, os[i], ks[i], x.dtype)
      local pos = (starts[i]:unsqueeze(4) + factory.arange(0, ks[i], { dtype = 'int64', device = x.device }))
        :reshape(N, Cc, os[i] * ks[i])
      local view, want = { N, Cc, 1, 1, 1 }, g:size()
      view[i + 2], want[i + 2] = os[i] * ks[i], os[i] * ks[i]
      for j = nd + 3, 5 do view[j] = nil end
      g = g:gather(i + 2, (pos + 1):view(view):expand(want):contiguous())   -- (gather's indices are 1-based)
    end
    -- (N, C, o1, k1, o2, k2, ...) -> (N, C, o1, o2, ..., k1*k2*...): one max per window
    local v, perm, K = { N, Cc }, { 1, 2 }, 1
    for i = 1, nd do
      v[#v + 1], v[#v + 2] = os[i], ks[i]
      perm[i + 2], perm[nd + 2 + i] = 2 * i + 1, 2 * i + 2
      K = K * ks[i]
    end
    local w = { N, Cc, os[1], os[2], os[3] }
    w[nd + 3] = K
    local out, j = g:view(v):permute(perm):reshape(w):max(nd + 3)
    if not was_batched then out = out:select(1, 1) end
    if not opts.return_indices then return out end
    -- the window's position (1-based, row-major) back to one in the input's plane / volume
    j = j - 1
    local idx, inner = nil, K
    for i = 1, nd do
      inner = inner / ks[i]
      local off = j:floor_divide(inner) % ks[i]
      local view = { N, Cc, 1, 1, 1 }
      view[i + 2] = os[i]
      for q = nd + 3, 5 do view[q] = nil end
      local coord = starts[i]:view(view) + off
      idx = idx and idx * s[i + 2] + coord or coord
    end
    idx = idx + 1
    if not was_batched then idx = idx:select(1, 1) end
    return out, idx
  end

  -- fractional_max_pool2d(input, kernel_size[, {output_size | output_ratio,
  -- return_indices = false, _random_samples (N, C, 2)}]) or torch's positional
  -- (input, kernel_size, output_size, output_ratio, return_indices, _random_samples)
  function F.fractional_max_pool2d(x, k, ...) return fractional('fractional_max_pool2d', 2, x, k, ...) end
  function F.fractional_max_pool3d(x, k, ...) return fractional('fractional_max_pool3d', 3, x, k, ...) end
  function F.fractional_max_pool2d_with_indices(x, k, opts, ...)
    return F.fractional_max_pool2d(x, k, with_indices('fractional_max_pool2d_with_indices', FRAC_POS, opts, ...))
  end
  function F.fractional_max_pool3d_with_indices(x, k, opts, ...)
    return F.fractional_max_pool3d(x, k, with_indices('fractional_max_pool3d_with_indices', FRAC_POS, opts, ...))
  end

  return { tuple = tuple, batched = batched, with_indices = with_indices }
end
