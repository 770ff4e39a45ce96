-- lunet.nn.functional's dropout1d, dropout3d, alpha_dropout,
-- feature_alpha_dropout, lp_pool1d, lp_pool2d and adaptive_max_pool3d, as
-- PyTorch 1.13's, composed from tensor ops and the pooling kernels.
--  dropouts: a Bernoulli(1 - p) mask per element, or per channel (broadcast
--    over the rest) for the feature forms; the alpha forms keep SELU's
--    mean and variance: x*a*m + a*alpha'*(m - 1 + p) (ATen's Dropout.cpp).
--  lp_pool: (avg_pool(x^p) * area)^(1/p), torch's sign(out)*relu(|out|) kept.
--  adaptive_max_pool3d: separable, (H, W) then depth; its indices are
--    1-based positions d*H*W + h*W + w + 1 within each volume.
-- Installed into F by lunet.nn.functional, which hands over its helpers.
local core = require 'lunet.core'
local factory = require 'lunet.factory'
local options = require 'lunet.options'
local C, is_table = core.C, core.is_table
local check = require('lunet.tensor').check
local raise, single, triple = options.raise, options.single, options.triple

local ALPHA = 1.7580993408473766   -- SELU's -alpha' = scale * alpha

return function(F, h, shape)
  local need, new, in_place = h.need, h.new, h.in_place
  local dropout_args, apply_mask = shape.dropout_args, shape.apply_mask
  local function size_of(t) return '{' .. table.concat(t:size(), ',') .. '}' end

  -- a Bernoulli(1 - p) mask: x's shape (keep nil), or x's first `keep` dims and
  -- 1 over the rest (broadcast on x: whole channels)
  local function bernoulli(x, keep, p)
    local s = x:size()
    local m
    if keep == nil then m = factory.empty(s, { dtype = x.dtype, device = x.device })
    else
      m = keep == 1 and new(x, s[1]) or new(x, s[1], s[2])
      for i = keep + 1, #s do s[i] = 1 end
    end
    check(C.ln_bernoulli_(m.p, 1 - p))
    return keep == nil and m or m:view(s)
  end
  local function affine(x, m, b) return x * m + b end

  -- the dropouts' common body: keep the dims of x the mask spans (nil: all)
  local function drop(fn, x, p, training, inplace, keep, alpha)
    if not training or p == 0 or x:numel() == 0 then return x end
    if p == 1 then return apply_mask(fn, x, 0, inplace) end
    if keep == 2 and x:dim() < 2 then
      raise(('%s: feature dropout needs at least 2 dims (N, C, ...), got %d-d %s'):format(fn, x:dim(), size_of(x)))
    end
    local m = bernoulli(x, keep, p)
    if not alpha then return apply_mask(fn, x, m:mul_(1 / (1 - p)), inplace) end
    local a = 1 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
    local b = (m - 1):mul_(ALPHA * a):add_(ALPHA * a * p)
    m:mul_(a)
    if inplace then return in_place(fn, x, affine, m, b) end
    return affine(x, m, b)
  end

  -- dropout1d(x (N, C, L) or (C, L), p = 0.5, training = true, inplace = false):
  -- zeroes whole channels with probability p, scales the rest by 1/(1-p)
  function F.dropout1d(x, p, training, inplace, more)
    need('dropout1d', x, 'input')
    local nd = x.p.ndim
    if nd ~= 2 and nd ~= 3 then
      raise(('dropout1d: input must be 2-d (C, L) or 3-d (N, C, L), got %d-d %s'):format(nd, size_of(x)))
    end
    p, training, inplace = dropout_args('dropout1d', p, training, inplace, more)
    return drop('dropout1d', x, p, training, inplace, nd - 1)
  end

  -- dropout3d(x (N, C, D, H, W) or (C, D, H, W), p, training, inplace): as dropout1d.
  -- (torch 1.13 only warns for another rank, and drops dim 1's slices: so does this)
  function F.dropout3d(x, p, training, inplace, more)
    need('dropout3d', x, 'input')
    local nd = x.p.ndim
    p, training, inplace = dropout_args('dropout3d', p, training, inplace, more)
    -- (a 0-d input is torch's 1-d after its unsqueeze: feature dropout refuses it)
    return drop('dropout3d', x, p, training, inplace, (nd == 5 or nd == 0) and 2 or 1)
  end

  -- alpha_dropout(x, p = 0.5, training = false, inplace = false): SELU's dropout
  -- (dropped values set to its negative saturation, then an affine map keeping
  -- mean 0 and variance 1). Its training defaults to false, as torch's.
  function F.alpha_dropout(x, p, training, inplace, more)
    need('alpha_dropout', x, 'input')
    if training == nil then training = false end
    p, training, inplace = dropout_args('alpha_dropout', p, training, inplace, more)
    return drop('alpha_dropout', x, p, training, inplace, nil, true)
  end

  -- feature_alpha_dropout(x (N, C, ...), p = 0.5, training = false, inplace = false):
  -- alpha_dropout of whole channels
  function F.feature_alpha_dropout(x, p, training, inplace, more)
    need('feature_alpha_dropout', x, 'input')
    if training == nil then training = false end
    p, training, inplace = dropout_args('feature_alpha_dropout', p, training, inplace, more)
    return drop('feature_alpha_dropout', x, p, training, inplace, 2, true)
  end

  -- ---- lp_pool ------------------------------------------------------------------------

  local LP_OPTS = { stride = 'number|table', ceil_mode = 'boolean' }
  local LP_POS = { 'stride', 'ceil_mode' }
  local function lp_args(fn, norm, k, opts, ...)
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or select('#', ...) > 0 then
      opts = options.positional(fn, LP_POS, opts, ...)
    end
    opts = opts and options.check(fn, opts, LP_OPTS) or {}
    if type(norm) ~= 'number' or norm == 0 or norm ~= norm or norm == math.huge or norm == -math.huge then
      raise(('%s: norm_type must be a finite nonzero number, got %s'):format(fn, tostring(norm)))
    end
    if k == nil then raise(fn .. ': expected kernel_size') end
    return opts
  end
  -- torch's tail: (sign(out) * relu(|out|) * area)^(1/p)
  local function root(out, norm, area) return (out:sign() * out:abs():relu()):mul(area):pow(1 / norm) end

  -- lp_pool1d(x (N, C, L) or (C, L), norm_type, kernel_size[, {stride = kernel_size,
  -- ceil_mode = false}]), or PyTorch's positional lp_pool1d(x, p, k, stride, ceil_mode)
  function F.lp_pool1d(x, norm, k, opts, ...)
    opts = lp_args('lp_pool1d', norm, k, opts, ...)
    need('lp_pool1d', x, 'input')
    if x.p.ndim ~= 2 and x.p.ndim ~= 3 then
      raise(('lp_pool1d: input must be 2-d (C, L) or 3-d (N, C, L), got %d-d %s'):format(x.p.ndim, size_of(x)))
    end
    k = single('lp_pool1d', 'kernel_size', k, 1)
    local out = F.avg_pool1d(x:pow(norm), k, { stride = opts.stride, ceil_mode = opts.ceil_mode })
    return root(out, norm, k)
  end

  -- lp_pool2d(x (N, C, H, W) or (C, H, W), norm_type, kernel_size[, {stride = kernel_size,
  -- ceil_mode = false}]), or PyTorch's positional lp_pool2d(x, p, k, stride, ceil_mode)
  function F.lp_pool2d(x, norm, k, opts, ...)
    opts = lp_args('lp_pool2d', norm, k, opts, ...)
    need('lp_pool2d', x, 'input')
    local nd = x.p.ndim
    if nd ~= 3 and nd ~= 4 then
      raise(('lp_pool2d: input must be 3-d (C, H, W) or 4-d (N, C, H, W), got %d-d %s'):format(nd, size_of(x)))
    end
    if not x:is_floating_point() then raise('lp_pool2d: input must be a floating-point tensor, got ' .. x.dtype) end
    options.pair('lp_pool2d', 'kernel_size', k, 1)
    local kh, kw = k, k
    if is_table(k) then kh, kw = k[1], k[2] end
    local x4 = nd == 3 and x:unsqueeze(1) or x
    local out = F.avg_pool2d(x4:pow(norm), { kh, kw }, { stride = opts.stride, ceil_mode = opts.ceil_mode })
    out = root(out, norm, kh * kw)
    return nd == 3 and out:select(1, 1) or out
  end

  -- ---- adaptive_max_pool3d ---------------------------------------------------------------

  -- adaptive_max_pool3d(x (N, C, D, H, W) or (C, D, H, W), output_size[, return_indices = false]):
  -- output_size a number or {d, h, w}, an entry false keeping the input's size
  function F.adaptive_max_pool3d(x, size, return_indices)
    local fn = 'adaptive_max_pool3d'
    need(fn, x, 'input')
    local nd = x.p.ndim
    if nd ~= 4 and nd ~= 5 then
      raise(('%s: input must be 4-d (C, D, H, W) or 5-d (N, C, D, H, W), got %d-d %s'):format(fn, nd, size_of(x)))
    end
    if return_indices ~= nil and type(return_indices) ~= 'boolean' then
      raise(fn .. ': return_indices must be a boolean, got ' .. tostring(return_indices))
    end
    if not x:is_floating_point() then raise(fn .. ': input must be a floating-point tensor, got ' .. x.dtype) end
    local x5 = nd == 4 and x:unsqueeze(1) or x
    local N, Cc, D, H, W = x5:size(1), x5:size(2), x5:size(3), x5:size(4), x5:size(5)
    if size == nil then raise(fn .. ': expected output_size (a number or {d, h, w})') end
    local o = size
    if is_table(size) and #size <= 3 and (size[1] ~= nil or size[2] ~= nil or size[3] ~= nil) then
      o = { size[1], size[2], size[3] }
      for i = 1, 3 do if o[i] == false then o[i] = x5:size(i + 2) end end
    end
    o = { triple(fn, 'output_size', o, 1) }
    if D * H * W * Cc == 0 then raise(('%s: input %s is empty'):format(fn, size_of(x))) end
    local M = o[2] * o[3]
    local y1, i1 = F.adaptive_max_pool2d(x5:reshape(N, Cc * D, H, W), { o[2], o[3] }, true)
    local y, i2 = F.adaptive_max_pool2d(y1:view(N, Cc, D, M), { o[1], false }, true)
    y = y:view(N, Cc, o[1], o[2], o[3])
    if nd == 4 then y = y:select(1, 1) end
    if not return_indices then return y end
    -- i2 (1-based within the D x M plane) picks the plane d and (h, w)'s index in it
    local flat = i2:reshape(N * Cc, o[1] * M)
    local hw = i1:reshape(N * Cc, D * M):gather(2, flat)
    local dev = { device = x.device }
    local plane = (factory.arange(0, D, dev) * (H * W)):view(D, 1):expand(D, M):reshape(D * M)
    local idx = (hw + plane:index_select(1, flat:view(N * Cc * o[1] * M)):view(N * Cc, o[1] * M))
      :view(N, Cc, o[1], o[2], o[3])
    if nd == 4 then idx = idx:select(1, 1) end
    return y, idx
  end
end
