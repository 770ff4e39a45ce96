-- lunet.nn.functional's softmax, log_softmax and losses nll_loss, cross_entropy,
-- mse_loss, binary_cross_entropy_with_logits (softmax and NLL on C kernels,
-- the rest composed of them and of tensor ops). Installed into F by
-- lunet.nn.functional, which hands over its helpers; returns the checks the
-- other losses share (same_shape, reduction).
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local C = core.C
local check, is_tensor = T.check, T.is_tensor
local recorder = A.recorder
local raise, check_options = options.raise, options.check

return function(F, h)
  local need, new, new_like, kernel, sum_all, NO_OPTS = h.need, h.new, h.new_like, h.kernel, h.sum_all, h.NO_OPTS

  local record_softmax = { [0] = recorder('softmax'), [1] = recorder('log_softmax') }
  local function softmax(fn, x, dim, log)
    need(fn, x, 'input')
    kernel(fn, 'ln_softmax_forward')
    local d = T.cdim(fn, x, dim or -1)
    local out = new_like(x)
    check(C.ln_softmax_forward(out.p, x.p, d, log))
    record_softmax[log](out, x, d, log)
    return out
  end
  function F.softmax(x, dim) return softmax('softmax', x, dim, 0) end
  function F.log_softmax(x, dim) return softmax('log_softmax', x, dim, 1) end

  local reductions = { none = 0, mean = 1, sum = 2 }
  local function reduction(fn, r)
    local v = reductions[r or 'mean']
    if not v then raise(("%s: reduction must be 'none', 'mean' or 'sum', got %s"):format(fn, tostring(r))) end
    return v
  end

  local function check_target(fn, x, target)
    need(fn, target, 'target', 1)
    if target.p.shape[0] ~= x.p.shape[0] then
      raise(('%s: input has batch size %d, target has %d'):format(fn, tonumber(x.p.shape[0]), tonumber(target.p.shape[0])))
    end
    if target.p.dtype_id ~= C.LN_INT64 then
      if target:is_floating_point() then
        raise(('%s: target must hold class indices (an integer tensor), got %s'):format(fn, target.dtype))
      end
      target = target:to('int64')
    end
    return target
  end

  -- (N, C, d1, ...) and target (N, d1, ...) -> (N*d1*..., C) and (N*d1*...), and
  -- the shape to give back a reduction = 'none' result
  local function flatten_spatial(fn, x, target)
    local nd = x.p.ndim
    if not is_tensor(target) or target.p.ndim ~= nd - 1 then
      raise(('%s: a %d-d input (N, C, d1, ...) needs a %d-d target (N, d1, ...)'):format(fn, nd, nd - 1))
    end
    local perm = { 1 }
    for i = 3, nd do perm[#perm + 1] = i end
    perm[#perm + 1] = 2
    local shape = target:size()
    return x:permute(perm):reshape(-1, x:size(2)), target:reshape(-1), shape
  end

  local function spatial(fn, f, x, target, opts)
    local x2, t2, shape = flatten_spatial(fn, x, target)
    local r = f(x2, t2, opts)
    if opts and opts.reduction == 'none' then r = r:reshape(shape) end
    return r
  end

  local NLL_OPTS = { weight = 'tensor', reduction = 'string', ignore_index = 'number' }
  local CE_OPTS = { weight = 'tensor', reduction = 'string', ignore_index = 'number', label_smoothing = 'number' }
  local REDUCE_OPTS = { reduction = 'string' }
  local BCE_OPTS = { weight = 'tensor', pos_weight = 'tensor', reduction = 'string' }

  -- nll_loss(logp (N,C) or (N,C,d1,...), target (N) or (N,d1,...) int64 in 1..C,
  --          {weight, reduction='mean', ignore_index=-100})
  local record_nll_loss = recorder('nll_loss')
  local function nll_loss(logp, target, opts)
    need('nll_loss', logp, 'input')
    if logp.p.ndim > 2 then return spatial('nll_loss', F.nll_loss, logp, target, opts) end
    need('nll_loss', logp, 'input', 2)
    kernel('nll_loss', 'ln_nll_loss_forward')
    target = check_target('nll_loss', logp, target)
    opts = opts or NO_OPTS
    local red = reduction('nll_loss', opts.reduction)
    local ignore = opts.ignore_index or -100
    -- (2.5, NaN or 2^70 were converted to some integer, silently)
    if not (ignore % 1 == 0 and ignore >= -2 ^ 63 and ignore < 2 ^ 63) then
      raise('nll_loss: ignore_index must be an integer, got ' .. tostring(ignore))
    end
    local out = red == 0 and new(logp, tonumber(logp.p.shape[0])) or new(logp)
    check(C.ln_nll_loss_forward(out.p, logp.p, target.p, opts.weight and opts.weight.p, red, ignore, 1))
    record_nll_loss(out, logp, target, opts.weight, red, ignore)
    return out
  end

  function F.nll_loss(logp, target, opts)
    if opts ~= nil then check_options('nll_loss', opts, NLL_OPTS) end
    return nll_loss(logp, target, opts)
  end

  -- cross_entropy(logits (N,C) or (N,C,d1,...), target (N) or (N,d1,...) in 1..C,
  --               {weight, reduction, ignore_index, label_smoothing})
  function F.cross_entropy(x, target, opts)
    if opts ~= nil then check_options('cross_entropy', opts, CE_OPTS) end
    need('cross_entropy', x, 'input')
    if x.p.ndim > 2 then return spatial('cross_entropy', F.cross_entropy, x, target, opts) end
    need('cross_entropy', x, 'input', 2)
    opts = opts or NO_OPTS
    local eps = opts.label_smoothing or 0
    local logp = F.log_softmax(x, 2)
    local loss = nll_loss(logp, target, opts)
    if eps == 0 then return loss end
    -- (a NaN passed a '< 0 or > 1' test and made the loss NaN)
    if not (eps >= 0 and eps <= 1) then raise('cross_entropy: label_smoothing must be in [0, 1], got ' .. eps) end
    target = check_target('cross_entropy', x, target)
    local N, Cc = tonumber(x.p.shape[0]), tonumber(x.p.shape[1])
    local red = opts.reduction or 'mean'
    local ignore = opts.ignore_index or -100
    local w = opts.weight and opts.weight:reshape(Cc, 1) or nil
    if not w then w = new(x, Cc, 1); C.ln_fill_(w.p, 1) end
    local keep = target:ne(ignore):to(x.dtype):reshape(N, 1)
    local smooth = -(logp:matmul(w) * keep)     -- (N, 1)
    local s
    if red == 'none' then s = smooth:reshape(N)
    elseif red == 'sum' then s = sum_all(smooth)
    elseif opts.weight then
      -- sum of the target weights over kept samples: an NLL of all -1s
      local m1 = new(x, N, Cc)
      C.ln_fill_(m1.p, -1)
      local denom = A.no_grad(F.nll_loss, m1, target, { weight = opts.weight, reduction = 'sum', ignore_index = ignore })
      s = sum_all(smooth) / denom
    else s = sum_all(smooth) / sum_all(keep) end   -- mean over the targets not ignored
    return loss * (1 - eps) + s * (eps / Cc)
  end

  local function reduce(fn, l, r)
    reduction(fn, r)
    if r == 'none' then return l end
    local s = sum_all(l)
    if r == 'sum' then return s end
    return s / l:numel()
  end

  local function same_shape(fn, a, b)
    need(fn, a, 'input'); need(fn, b, 'target')
    if table.concat(a:size(), ',') ~= table.concat(b:size(), ',') then
      raise(('%s: input {%s} and target {%s} must have the same shape'):format(fn,
        table.concat(a:size(), ','), table.concat(b:size(), ',')))
    end
  end

  function F.mse_loss(a, b, opts)
    if opts ~= nil then check_options('mse_loss', opts, REDUCE_OPTS) end
    same_shape('mse_loss', a, b)
    local d = a - b
    return reduce('mse_loss', d * d, opts and opts.reduction or 'mean')
  end

  -- (1-y)*x + lw*(log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight-1)*y
  function F.binary_cross_entropy_with_logits(x, y, opts)
    if opts ~= nil then check_options('binary_cross_entropy_with_logits', opts, BCE_OPTS) end
    same_shape('binary_cross_entropy_with_logits', x, y)
    opts = opts or NO_OPTS
    local soft = (-x:abs()):exp():log1p() + (-x):clamp(0)
    local l
    if opts.pos_weight then
      l = (1 - y) * x + ((opts.pos_weight - 1) * y + 1) * soft
    else
      l = (1 - y) * x + soft
    end
    if opts.weight then l = l * opts.weight end
    return reduce('binary_cross_entropy_with_logits', l, opts.reduction or 'mean')
  end

  return { same_shape = same_shape, reduction = reduction }
end
