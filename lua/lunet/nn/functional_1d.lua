-- lunet.nn.functional's 1-d layers: conv1d, max_pool1d, avg_pool1d,
-- adaptive_avg_pool1d, adaptive_max_pool1d, as PyTorch 1.13's. Each runs
-- its 2-d form on the input with a unit height (unsqueeze, the 2-d op,
-- select): the same kernels, autograd and backends. Input (N, C, L) or
-- unbatched (C, L); indices are 1-based positions along L (int64).
-- Installed into F by lunet.nn.functional, which hands over its helpers.
local is_table = require('lunet.core').is_table
local options = require 'lunet.options'
local raise, check_options, positional, single = options.raise, options.check, options.positional, options.single
local NO = setmetatable({}, { __newindex = function() error('functional: internal table is read-only', 2) end })

return function(F, h)
  local need = h.need

  -- x (N, C, L) or (C, L), floating point; returns x as (N, C, 1, L) and whether it was batched
  local function as_2d(fn, x)
    need(fn, x, 'input')
    local nd = x.p.ndim
    if nd ~= 2 and nd ~= 3 then
      raise(('%s: input must be 2-d (C, L) or 3-d (N, C, L), got %d-d {%s}'):format(fn, nd,
        table.concat(x:size(), ',')))
    end
    if not x:is_floating_point() then raise(('%s: input must be a floating-point tensor, got %s'):format(fn, x.dtype)) end
    if nd == 2 then x = x:unsqueeze(1) end
    return x:unsqueeze(3), nd == 3
  end
  -- the 2-d op's (N, C, 1, OL) result back to the input's rank
  local function back(y, batched)
    y = y:select(3, 1)
    if batched then return y end
    return y:select(1, 1)
  end
  local function too_small(fn, x, what, k, o)
    if o < 1 then
      raise(('%s: input {%s} is too small for a %s of %d (output length %d)'):format(fn,
        table.concat(x:size(), ','), what, k, o))
    end
  end

  -- ---- conv1d ---------------------------------------------------------------------------

  local CONV_OPTS = { stride = 'number|table', padding = 'number|table|string', dilation = 'number|table',
    groups = 'number' }
  local CONV_POS = { 'stride', 'padding', 'dilation', 'groups' }

  -- conv1d(x (N,C,L) or (C,L), w (O,C/groups,K), b (O) or nil, {stride = 1,
  -- padding = 0 | 'same' | 'valid', dilation = 1, groups = 1}), or PyTorch's
  -- positional conv1d(x, w, b, stride, padding, dilation, groups)
  function F.conv1d(x, w, b, opts, padding, dilation, groups)
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or padding ~= nil or dilation ~= nil
        or groups ~= nil then
      opts = positional('conv1d', CONV_POS, opts, padding, dilation, groups)
    end
    opts = opts and check_options('conv1d', opts, CONV_OPTS) or NO
    local x4, batched = as_2d('conv1d', x)
    need('conv1d', w, 'weight', 3)
    local s = single('conv1d', 'stride', opts.stride, 1) or 1
    local d = single('conv1d', 'dilation', opts.dilation, 1) or 1
    local g = single('conv1d', 'groups', opts.groups, 1) or 1
    local p = opts.padding or 0
    if type(p) == 'string' then
      if p ~= 'same' and p ~= 'valid' then
        raise(("conv1d: padding must be a number, 'same' or 'valid', got '%s'"):format(p))
      end
      if p == 'same' and s ~= 1 then raise("conv1d: padding='same' needs stride 1") end
    else p = single('conv1d', 'padding', p, 0) end
    local O, K = w:size(1), w:size(3)
    local Cin, L = x:size(x:dim() - 1), x:size(x:dim())
    if O % g ~= 0 then raise(('conv1d: weight has %d output channels, not divisible by groups %d'):format(O, g)) end
    if Cin ~= w:size(2) * g then
      raise(('conv1d: input has %d channels, weight {%s} with groups %d expects %d'):format(Cin,
        table.concat(w:size(), ','), g, w:size(2) * g))
    end
    if b ~= nil then
      need('conv1d', b, 'bias', 1)
      if b:size(1) ~= O then raise(('conv1d: bias has %d elements, weight has %d outputs'):format(b:size(1), O)) end
    end
    if type(p) == 'number' then
      too_small('conv1d', x, 'kernel', K, math.floor((L + 2 * p - d * (K - 1) - 1) / s) + 1)
    end
    local y = F.conv2d(x4, w:unsqueeze(3), b, { stride = { 1, s }, dilation = { 1, d }, groups = g,
      padding = type(p) == 'string' and p or { 0, p } })
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
  -- k, s, p, d checked, and the output length checked
  local function pool_geometry(fn, x, k, opts)
    if k == nil then raise(fn .. ': expected kernel_size (a number or {n})') end
    k = single(fn, 'kernel_size', k, 1)
    local s = single(fn, 'stride', opts.stride, 1) or k
    local p = single(fn, 'padding', opts.padding, 0) or 0
    local d = single(fn, 'dilation', opts.dilation, 1) or 1
    if p > k / 2 then raise(('%s: padding %d must be at most half the kernel %d'):format(fn, p, k)) end
    too_small(fn, x, 'window', k, pool_len(x:size(x:dim()), k, s, p, d, opts.ceil_mode))
    return k, s, p, d
  end

  local MAX_OPTS = { stride = 'number|table', padding = 'number|table', dilation = 'number|table',
    ceil_mode = 'boolean', return_indices = 'boolean' }
  local MAX_POS = { 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices' }

  -- max_pool1d(x, kernel_size, {stride = kernel_size, padding = 0, dilation = 1,
  -- ceil_mode = false, return_indices = false}), or PyTorch's positional
  -- max_pool1d(x, k, stride, padding, dilation, ceil_mode, return_indices)
  function F.max_pool1d(x, k, opts, padding, dilation, ceil_mode, return_indices)
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or padding ~= nil or dilation ~= nil
        or ceil_mode ~= nil or return_indices ~= nil then
      opts = positional('max_pool1d', MAX_POS, opts, padding, dilation, ceil_mode, return_indices)
    end
    opts = opts and check_options('max_pool1d', opts, MAX_OPTS) or NO
    local x4, batched = as_2d('max_pool1d', x)
    local s, p, d
    k, s, p, d = pool_geometry('max_pool1d', x, k, opts)
    local y, idx = F.max_pool2d(x4, { 1, k }, { stride = { 1, s }, padding = { 0, p }, dilation = { 1, d },
      ceil_mode = opts.ceil_mode, return_indices = opts.return_indices })
    -- (a unit height: the 2-d index h*W + w + 1 is w + 1)
    if opts.return_indices then return back(y, batched), back(idx, batched) end
    return back(y, batched)
  end

  local AVG_OPTS = { stride = 'number|table', padding = 'number|table', ceil_mode = 'boolean',
    count_include_pad = 'boolean' }
  local AVG_POS = { 'stride', 'padding', 'ceil_mode', 'count_include_pad' }

  -- avg_pool1d(x, kernel_size, {stride = kernel_size, padding = 0, ceil_mode = false,
  -- count_include_pad = true}), or PyTorch's positional
  -- avg_pool1d(x, k, stride, padding, ceil_mode, count_include_pad)
  function F.avg_pool1d(x, k, opts, padding, ceil_mode, count_include_pad)
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or padding ~= nil or ceil_mode ~= nil
        or count_include_pad ~= nil then
      opts = positional('avg_pool1d', AVG_POS, opts, padding, ceil_mode, count_include_pad)
    end
    opts = opts and check_options('avg_pool1d', opts, AVG_OPTS) or NO
    local x4, batched = as_2d('avg_pool1d', x)
    local s, p
    k, s, p = pool_geometry('avg_pool1d', x, k, opts)
    return back(F.avg_pool2d(x4, { 1, k }, { stride = { 1, s }, padding = { 0, p }, ceil_mode = opts.ceil_mode,
      count_include_pad = opts.count_include_pad }), batched)
  end

  local function output_size(fn, x, n)
    if n == nil then raise(fn .. ': expected output_size (a number or {n})') end
    n = single(fn, 'output_size', n, 1)
    if x:size(x:dim()) < 1 then raise(('%s: input {%s} is empty'):format(fn, table.concat(x:size(), ','))) end
    return n
  end

  -- adaptive_avg_pool1d(x, output_size): output_size a number or {n}
  function F.adaptive_avg_pool1d(x, n)
    local x4, batched = as_2d('adaptive_avg_pool1d', x)
    n = output_size('adaptive_avg_pool1d', x, n)
    return back(F.adaptive_avg_pool2d(x4, { 1, n }), batched)
  end

  -- adaptive_max_pool1d(x, output_size[, return_indices = false])
  function F.adaptive_max_pool1d(x, n, return_indices)
    local x4, batched = as_2d('adaptive_max_pool1d', x)
    n = output_size('adaptive_max_pool1d', x, n)
    if return_indices ~= nil and type(return_indices) ~= 'boolean' then
      raise('adaptive_max_pool1d: return_indices must be a boolean, got ' .. tostring(return_indices))
    end
    local y, idx = F.adaptive_max_pool2d(x4, { 1, n }, return_indices)
    if return_indices then return back(y, batched), back(idx, batched) end
    return back(y, batched)
  end
end
