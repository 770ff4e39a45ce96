-- lunet.nn.functional's 3-d layers: conv3d, max_pool3d, avg_pool3d,
-- adaptive_avg_pool3d, as PyTorch 1.13's, composed from the 2-d ops and
-- tensor ops (the same kernels, autograd and backends). Input (N, C, D, H, W)
-- or unbatched (C, D, H, W).
--  conv3d: the depth taps are gathered (strided views, one stack) and folded,
--    depth into the batch and the kD taps into the channels, so one conv2d with
--    weight (O, C/groups * kD, kH, kW) computes every output plane.
--  pooling: max, average (both count_include_pad modes: torch's divisor is a
--    product of per-dim factors) and adaptive average are separable: a 2-d
--    pool over (H, W) with depth in the channels, then one over depth.
-- Installed into F by lunet.nn.functional, which hands over its helpers.
local is_table = require('lunet.core').is_table
local Tensor = require('lunet.tensor').Tensor
local options = require 'lunet.options'
local raise, check_options, positional = options.raise, options.check, options.positional
local single, triple = options.single, options.triple
local NO = setmetatable({}, { __newindex = function() error('functional: internal table is read-only', 2) end })

return function(F, h)
  local need = h.need

  -- x (N, C, D, H, W) or (C, D, H, W), floating point; returns x 5-d and whether it was batched
  local function as_5d(fn, x)
    need(fn, x, 'input')
    local nd = x.p.ndim
    if nd ~= 4 and nd ~= 5 then
      raise(('%s: input must be 4-d (C, D, H, W) or 5-d (N, C, D, H, W), got %d-d {%s}'):format(fn, nd,
        table.concat(x:size(), ',')))
    end
    if not x:is_floating_point() then raise(('%s: input must be a floating-point tensor, got %s'):format(fn, x.dtype)) end
    if nd == 4 then x = x:unsqueeze(1) end
    return x, nd == 5
  end
  local function back(y, batched) return batched and y or y:select(1, 1) end
  local function too_small(fn, x, what, k, o)
    if o[1] < 1 or o[2] < 1 or o[3] < 1 then
      raise(('%s: input {%s} is too small for a %s of %dx%dx%d (output %dx%dx%d)'):format(fn,
        table.concat(x:size(), ','), what, k[1], k[2], k[3], o[1], o[2], o[3]))
    end
  end
  -- positional arguments (PyTorch's order in names) or an options table
  local function args(fn, names, known, opts, ...)
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or select('#', ...) > 0 then
      opts = positional(fn, names, opts, ...)
    end
    return opts and check_options(fn, opts, known) or NO
  end

  -- ---- conv3d ---------------------------------------------------------------------------

  local CONV_OPTS = { stride = 'number|table', padding = 'number|table|string', dilation = 'number|table',
    groups = 'number' }
  local CONV_POS = { 'stride', 'padding', 'dilation', 'groups' }

  -- conv3d(x (N,C,D,H,W) or (C,D,H,W), w (O,C/groups,kD,kH,kW), b (O) or nil,
  -- {stride = 1, padding = 0 | {d, h, w} | 'same' | 'valid', dilation = 1,
  -- groups = 1}), or PyTorch's positional conv3d(x, w, b, stride, padding, dilation, groups)
  function F.conv3d(x, w, b, opts, ...)
    opts = args('conv3d', CONV_POS, CONV_OPTS, opts, ...)
    local x5, batched = as_5d('conv3d', x)
    need('conv3d', w, 'weight', 5)
    local s = { triple('conv3d', 'stride', opts.stride or 1, 1) }
    local d = { triple('conv3d', 'dilation', opts.dilation or 1, 1) }
    local g = single('conv3d', 'groups', opts.groups, 1) or 1
    local O, Cg, kD, kH, kW = w:size(1), w:size(2), w:size(3), w:size(4), w:size(5)
    local N, Cin, D, H, W = x5:size(1), x5:size(2), x5:size(3), x5:size(4), x5:size(5)
    if O % g ~= 0 then raise(('conv3d: weight has %d output channels, not divisible by groups %d'):format(O, g)) end
    if Cin ~= Cg * g then
      raise(('conv3d: input has %d channels, weight {%s} with groups %d expects %d'):format(Cin,
        table.concat(w:size(), ','), g, Cg * g))
    end
    if b ~= nil then
      need('conv3d', b, 'bias', 1)
      if b:size(1) ~= O then raise(('conv3d: bias has %d elements, weight has %d outputs'):format(b:size(1), O)) end
    end
    -- depth padding before/after (PyTorch's 'same' puts an odd extra plane at the end); (H, W) go to conv2d
    local p, pd0, pd1, phw = opts.padding or 0
    if p == 'same' or p == 'valid' then
      if p == 'same' and (s[1] ~= 1 or s[2] ~= 1 or s[3] ~= 1) then raise("conv3d: padding='same' needs stride 1") end
      local t = p == 'same' and d[1] * (kD - 1) or 0
      pd0, pd1, phw = math.floor(t / 2), t - math.floor(t / 2), p
    elseif type(p) == 'string' then
      raise(("conv3d: padding must be a number, {d, h, w}, 'same' or 'valid', got '%s'"):format(p))
    else
      local ph, pw
      pd0, ph, pw = triple('conv3d', 'padding', p, 0)
      pd1, phw = pd0, { ph, pw }
    end
    local k = { kD, kH, kW }
    local out = { math.floor((D + pd0 + pd1 - d[1] * (kD - 1) - 1) / s[1]) + 1 }
    for i = 2, 3 do
      local pi = phw == 'same' and (d[i] * (k[i] - 1)) / 2 or phw == 'valid' and 0 or phw[i - 1]
      out[i] = math.floor((x5:size(i + 2) + 2 * pi - d[i] * (k[i] - 1) - 1) / s[i]) + 1
    end
    too_small('conv3d', x, 'kernel', k, out)
    local OD, HW = out[1], H * W
    -- (N, C, D, H*W), zero planes around the depth: pd0 before, pd1 after, and past them
    -- as many as the last tap's strided span reaches (never read: they keep narrow in range)
    local xp = x5:reshape(N, Cin, D, HW)
    local extra = math.max(0, (kD - 1) * d[1] + OD * s[1] - (D + pd0 + pd1))
    if pd0 + pd1 + extra > 0 then xp = F.pad(xp, { 0, 0, pd0, pd1 + extra }) end
    -- tap kd reads planes kd * dD + od * sD: a strided view per tap (narrow, split off the
    -- stride, select), stacked as (N, OD, C, kD, H*W) and read as (N*OD, C*kD, H, W): each
    -- group's channels stay together, in the order of the weight's (C/groups, kD). (Views and
    -- one stack: index_select's backward, a scatter, took twice as long.)
    local taps = {}
    for kd = 0, kD - 1 do
      local t = xp:narrow(3, kd * d[1] + 1, OD * s[1])
      if s[1] > 1 then t = t:view(N, Cin, OD, s[1], HW):select(4, 1) end
      taps[kd + 1] = t:permute(1, 3, 2, 4)
    end
    local cols = Tensor.stack(taps, 4):view(N * OD, Cin * kD, H, W)
    local y = F.conv2d(cols, w:reshape(O, Cg * kD, kH, kW), b,
      { stride = { s[2], s[3] }, padding = phw, dilation = { d[2], d[3] }, groups = g })
    y = y:view(N, OD, O, y:size(3), y:size(4)):permute(1, 3, 2, 4, 5):contiguous()
    return back(y, batched)
  end

  -- ---- pooling --------------------------------------------------------------------------

  -- the pooled length (PyTorch's, ceil_mode's last window starting inside the input or left padding)
  local function pool_len(L, k, s, p, d, ceil_mode)
    local num = L + 2 * p - d * (k - 1) - 1
    local o = (ceil_mode and math.ceil(num / s) or math.floor(num / s)) + 1
    if ceil_mode and (o - 1) * s >= L + p then o = o - 1 end
    return o
  end
  -- k, s, p, d as {d, h, w} lists, checked, and the output size checked
  local function pool_geometry(fn, x5, x, k, opts)
    if k == nil then raise(fn .. ': expected kernel_size (a number or {d, h, w})') end
    k = { triple(fn, 'kernel_size', k, 1) }
    local s = opts.stride ~= nil and { triple(fn, 'stride', opts.stride, 1) } or k
    local p = { triple(fn, 'padding', opts.padding or 0, 0) }
    local d = { triple(fn, 'dilation', opts.dilation or 1, 1) }
    local o = {}
    for i = 1, 3 do
      if p[i] > k[i] / 2 then
        raise(('%s: padding {%d, %d, %d} must be at most half the kernel {%d, %d, %d}'):format(fn, p[1], p[2], p[3],
          k[1], k[2], k[3]))
      end
      o[i] = pool_len(x5:size(i + 2), k[i], s[i], p[i], d[i], opts.ceil_mode)
    end
    too_small(fn, x, 'window', k, o)
    return k, s, p, d, o
  end
  -- pool2d over (H, W) with depth in the channels, then over depth with (H*W) as the width
  local function separable(pool2d, x5, k, s, p, o, extra, d)
    local N, Cc, D = x5:size(1), x5:size(2), x5:size(3)
    local o1, o2 = { stride = { s[2], s[3] }, padding = { p[2], p[3] } }, { stride = { s[1], 1 }, padding = { p[1], 0 } }
    if d then o1.dilation, o2.dilation = { d[2], d[3] }, { d[1], 1 } end
    for key, v in pairs(extra) do o1[key], o2[key] = v, v end
    local y = pool2d(x5:reshape(N, Cc * D, x5:size(4), x5:size(5)), { k[2], k[3] }, o1)
    y = pool2d(y:view(N, Cc, D, o[2] * o[3]), { k[1], 1 }, o2)
    return y:view(N, Cc, o[1], o[2], o[3])
  end

  local MAX_OPTS = { stride = 'number|table', padding = 'number|table', dilation = 'number|table',
    ceil_mode = 'boolean', return_indices = 'boolean' }
  local MAX_POS = { 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices' }

  -- max_pool3d(x, kernel_size, {stride = kernel_size, padding = 0, dilation = 1,
  -- ceil_mode = false}), or PyTorch's positional max_pool3d(x, k, stride,
  -- padding, dilation, ceil_mode); each a number or {d, h, w}
  function F.max_pool3d(x, k, opts, ...)
    opts = args('max_pool3d', MAX_POS, MAX_OPTS, opts, ...)
    if opts.return_indices then raise('max_pool3d: return_indices is not supported') end
    local x5, batched = as_5d('max_pool3d', x)
    local s, p, d, o
    k, s, p, d, o = pool_geometry('max_pool3d', x5, x, k, opts)
    return back(separable(F.max_pool2d, x5, k, s, p, o, { ceil_mode = opts.ceil_mode }, d), batched)
  end

  local AVG_OPTS = { stride = 'number|table', padding = 'number|table', ceil_mode = 'boolean',
    count_include_pad = 'boolean', divisor_override = 'number' }
  local AVG_POS = { 'stride', 'padding', 'ceil_mode', 'count_include_pad', 'divisor_override' }

  -- avg_pool3d(x, kernel_size, {stride = kernel_size, padding = 0, ceil_mode = false,
  -- count_include_pad = true}), or PyTorch's positional
  -- avg_pool3d(x, k, stride, padding, ceil_mode, count_include_pad)
  function F.avg_pool3d(x, k, opts, ...)
    opts = args('avg_pool3d', AVG_POS, AVG_OPTS, opts, ...)
    if opts.divisor_override ~= nil then raise('avg_pool3d: divisor_override is not supported') end
    local x5, batched = as_5d('avg_pool3d', x)
    local s, p, _, o
    k, s, p, _, o = pool_geometry('avg_pool3d', x5, x, k, opts)
    return back(separable(F.avg_pool2d, x5, k, s, p, o, { ceil_mode = opts.ceil_mode,
      count_include_pad = opts.count_include_pad }), batched)
  end

  -- adaptive_avg_pool3d(x, output_size): a number or {d, h, w}, an entry false
  -- keeping the input's size (PyTorch's None)
  function F.adaptive_avg_pool3d(x, size)
    local x5, batched = as_5d('adaptive_avg_pool3d', x)
    if size == nil then raise('adaptive_avg_pool3d: expected output_size (a number or {d, h, w})') end
    local o = size
    if is_table(size) and #size == 3 then
      o = {}
      for i = 1, 3 do o[i] = size[i] == false and x5:size(i + 2) or size[i] end
    end
    o = { triple('adaptive_avg_pool3d', 'output_size', o, 1) }
    local N, Cc, D, H, W = x5:size(1), x5:size(2), x5:size(3), x5:size(4), x5:size(5)
    if D * H * W == 0 then raise(('adaptive_avg_pool3d: input {%s} is empty'):format(table.concat(x:size(), ','))) end
    local y = F.adaptive_avg_pool2d(x5:reshape(N, Cc * D, H, W), { o[2], o[3] })
    y = F.adaptive_avg_pool2d(y:view(N, Cc, D, o[2] * o[3]), { o[1], o[2] * o[3] })
    return back(y:view(N, Cc, o[1], o[2], o[3]), batched)
  end
end
