-- lunet.nn.functional's padding and reshaping of values: pad (constant,
-- reflect, replicate, circular), dropout, dropout2d, flatten, unflatten,
-- pixel_shuffle, pixel_unshuffle, embedding.
-- Installed into F by lunet.nn.functional, which hands over its helpers;
-- returns embedding(fn, ...), the form nn.Embedding calls, and the dropout
-- helpers (functional_dropout_lp's).
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local C, is_table, typename = core.C, core.is_table, core.typename
local Tensor, check, is_tensor = T.Tensor, T.check, T.is_tensor
local recorder, records = A.recorder, A.records
local raise = options.raise
local check_options, positional = options.check, options.positional

return function(F, h)
  local need, new, new_like, NO_OPTS, in_place = h.need, h.new, h.new_like, h.NO_OPTS, h.in_place

  -- pad the last two dims of x (N,C,H,W) with zeros: {left, right, top, bottom}
  -- (each layer calls its recorder as a statement, then returns: a tail call
  -- into the recorder made LuaJIT's traces keep fewer allocations sunk)
  local record_pad = recorder('pad')
  -- F.pad(x, {left, right[, top, bottom[, front, back, ...]]}[, mode = 'constant'[, value = 0]])
  -- or F.pad(x, pad, {mode = ..., value = ...}): mode 'constant' fills with
  -- value, 'reflect' mirrors without repeating the edge (each pad below the
  -- dim's size), 'replicate' repeats the edge, 'circular' wraps around (each
  -- pad at most the dim's size), as torch.nn.functional.pad.
  local PAD_OPTS, PAD_POSITIONAL = { mode = 'string', value = 'number' }, { 'mode', 'value' }
  local PAD_MODES = { constant = true, reflect = true, replicate = true, circular = true }

  -- the 1-based source index of each output position along a dim of size n
  -- padded by lo and hi in mode
  local function pad_index(mode, n, lo, hi)
    local idx = {}
    for j = -lo, n - 1 + hi do
      local k
      if mode == 'reflect' then k = j < 0 and -j or j >= n and 2 * (n - 1) - j or j
      elseif mode == 'replicate' then k = math.min(math.max(j, 0), n - 1)
      else k = j % n end
      idx[#idx + 1] = k + 1
    end
    return require('lunet.factory').tensor(idx, { dtype = 'int64' })
  end

  -- x (A, B, H, W) padded by l, r (W) and t, b (H), the arguments checked
  local function pad4(x, l, r, t, b, mode, value)
    local s = x:size()
    if mode ~= 'constant' then
      local out = x
      if l + r > 0 then out = out:index_select(4, pad_index(mode, s[4], l, r)) end
      if t + b > 0 then out = out:index_select(3, pad_index(mode, s[3], t, b)) end
      return out == x and x:clone() or out
    end
    local out = new(x, s[1], s[2], s[3] + t + b, s[4] + l + r)
    C.ln_fill_(out.p, value or 0)
    local inner = A.raw.narrow(A.raw.narrow(out, 3, t + 1, s[3]), 4, l + 1, s[4])
    check(C.ln_copy_(inner.p, x.p))
    record_pad(out, x, t, l, s[3], s[4])
    return out
  end

  local SIDES = { 'left', 'right', 'top', 'bottom', 'front', 'back' }
  local function product(s, from, to)
    local n = 1
    for i = from, to do n = n * s[i] end
    return n
  end

  -- F.pad(x, {left, right[, top, bottom[, front, back, ...]]}[, mode[, value]]):
  -- a pair per padded dim from the last one back, any rank; a 4-d input
  -- padded in its last two dims at once, others through 4-d views.
  function F.pad(x, p, ...)
    need('pad', x, 'input')
    local nd = x.p.ndim
    if not is_table(p) or #p == 0 or #p % 2 ~= 0 or #p / 2 > nd then
      raise(('pad: padding must be a list {left, right[, top, bottom[, front, back, ...]]} of integers, a pair ' ..
        'per padded dim of the %d-d input, got %s'):format(nd, is_table(p) and #p .. ' values' or typename(p)))
    end
    for k = 1, #p do   -- (not ipairs: it stopped at a nil, unchecked)
      local v = p[k]
      if type(v) ~= 'number' or v % 1 ~= 0 or v < 0 or v > 2 ^ 31 then
        local shown = {}
        for i = 1, #p do shown[i] = tostring(p[i]) end
        raise(('pad: padding must be integers in 0..2^31, got {%s}'):format(table.concat(shown, ', ')))
      end
    end
    local opts = check_options('pad', positional('pad', PAD_POSITIONAL, ...), PAD_OPTS) or NO_OPTS
    local mode, value = opts.mode or 'constant', opts.value
    if not PAD_MODES[mode] then
      raise(("pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '%s'"):format(mode))
    end
    if value ~= nil and mode ~= 'constant' then raise(("pad: value is for mode 'constant', not '%s'"):format(mode)) end
    local s = x:size()
    if mode ~= 'constant' then
      -- (reflect: below the size; circular: at most it; replicate: any, of a non-empty dim)
      local limit = mode == 'circular' and 0 or 1
      for k = 1, #p do
        local n = s[nd - math.floor((k - 1) / 2)]
        if mode ~= 'replicate' and p[k] > n - limit or (mode == 'replicate' and p[k] > 0 and n == 0) then
          raise(("pad: %s padding %d is too large for mode '%s' on a dim of size %d"):format(
            SIDES[k] or ('dim ' .. (nd - math.floor((k - 1) / 2)) .. (k % 2 == 1 and ' start' or ' end')), p[k], mode, n))
        end
      end
    elseif value ~= nil and value % 1 ~= 0 and not x:is_floating_point() then   -- (NaN and inf too)
      raise(('pad: value %s does not fit a %s input'):format(tostring(value), x.dtype))
    end
    if nd == 4 and #p <= 4 then return pad4(x, p[1], p[2], p[3] or 0, p[4] or 0, mode, value) end
    local out, k = x, 1
    while k <= #p / 2 do
      local d = nd - k + 1
      local size = out:size()
      if k == 1 and #p >= 4 then   -- (the last two dims at once)
        out = pad4(out:reshape(product(size, 1, d - 2), 1, size[d - 1], size[d]), p[1], p[2], p[3], p[4], mode, value)
        size[d - 1], size[d] = size[d - 1] + p[3] + p[4], size[d] + p[1] + p[2]
        k = k + 2
      else
        out = pad4(out:reshape(product(size, 1, d - 1), 1, size[d], product(size, d + 1, nd)), 0, 0,
          p[2 * k - 1], p[2 * k], mode, value)
        size[d] = size[d] + p[2 * k - 1] + p[2 * k]
        k = k + 1
      end
      out = out:view(size)
    end
    return out
  end

  -- the p, training, inplace of dropout(x, p, training, inplace) or of its
  -- options form (x[, p...], {p, training, inplace}); the plain positional
  -- call builds no table
  local DROPOUT_OPTS = { p = 'number', training = 'boolean', inplace = 'boolean' }
  local DROPOUT_POSITIONAL = { 'p', 'training', 'inplace' }
  local function dropout_positional(fn, p, training, inplace, more)
    -- (positional takes its last argument for the options table: the trailing nils left out)
    if more ~= nil then return positional(fn, DROPOUT_POSITIONAL, p, training, inplace, more) end
    if inplace ~= nil then return positional(fn, DROPOUT_POSITIONAL, p, training, inplace) end
    if training ~= nil then return positional(fn, DROPOUT_POSITIONAL, p, training) end
    return positional(fn, DROPOUT_POSITIONAL, p)
  end
  local function dropout_args(fn, p, training, inplace, more)
    if type(p) == 'table' or type(training) == 'table' or type(inplace) == 'table' or more ~= nil then
      local o = check_options(fn, dropout_positional(fn, p, training, inplace, more), DROPOUT_OPTS) or NO_OPTS
      p, training, inplace = o.p, o.training, o.inplace
    end
    p = p or 0.5
    if type(p) ~= 'number' or not (p >= 0 and p <= 1) then raise(fn .. ': p must be in [0, 1], got ' .. tostring(p)) end
    if training ~= nil and type(training) ~= 'boolean' then
      raise(('%s: training must be a boolean, got %s'):format(fn, typename(training)))
    end
    if inplace ~= nil and type(inplace) ~= 'boolean' then
      raise(('%s: inplace must be a boolean, got %s'):format(fn, typename(inplace)))
    end
    return p, training ~= false, inplace == true
  end

  -- x times the mask m (a number, or a tensor broadcast to x); in place, x
  -- overwritten and returned as torch's dropout_ (mul_ when nothing is
  -- recorded; else the shared helper, which refuses a leaf that requires grad)
  local function times(x, m) return x * m end
  local function apply_mask(fn, x, m, inplace)
    if not inplace then return x * m end
    if records(x) then return in_place(fn, x, times, m) end
    return x:mul_(m)
  end

  -- dropout(x, p=0.5, training=true, inplace=false): zeroes with probability
  -- p, scales the rest by 1/(1-p); x itself when not training or p = 0 (as
  -- torch, in place or not)
  function F.dropout(x, p, training, inplace, more)
    need('dropout', x, 'input')
    p, training, inplace = dropout_args('dropout', p, training, inplace, more)
    if not training or p == 0 then return x end
    if p == 1 then return apply_mask('dropout', x, 0, inplace) end
    local mask = new_like(x)
    check(C.ln_bernoulli_(mask.p, 1 - p))
    check(C.ln_binary_scalar_(C.LN_MUL, mask.p, 1 / (1 - p)))
    return apply_mask('dropout', x, mask, inplace)
  end

  function F.flatten(x, s, e) return need('flatten', x, 'input'):flatten(s or 2, e or -1) end

  -- unflatten(x, dim, sizes): dim (1-based, negative from the end) split
  -- into sizes (one entry may be -1, inferred), as torch's Tensor.unflatten
  function F.unflatten(x, dim, sizes)
    need('unflatten', x, 'input')
    local d = T.cdim('unflatten', x, dim) + 1
    local s = x:size()
    if not is_table(sizes) or #sizes == 0 then
      raise('unflatten: sizes must be a non-empty list of integers, got ' .. typename(sizes))
    end
    local prod, infer = 1, nil
    for i = 1, #sizes do
      local v = sizes[i]
      if type(v) ~= 'number' or v % 1 ~= 0 or v < -1 or v >= 2 ^ 53 or (v == -1 and infer) then
        raise(('unflatten: sizes must be integers >= 0 with at most one -1, got {%s}'):format(
          table.concat((function() local t = {} for j = 1, #sizes do t[j] = tostring(sizes[j]) end return t end)(), ', ')))
      end
      if v == -1 then infer = i else prod = prod * v end
    end
    local shape = {}
    for i = 1, d - 1 do shape[#shape + 1] = s[i] end
    for i = 1, #sizes do shape[#shape + 1] = sizes[i] end
    if infer and prod > 0 and s[d] % prod == 0 then shape[d - 1 + infer] = s[d] / prod end
    if (infer and (prod == 0 or s[d] % prod ~= 0)) or (not infer and prod ~= s[d]) then
      raise(('unflatten: sizes {%s} do not multiply up to the size %d of dim %d'):format(
        table.concat(sizes, ', '), s[d], dim))
    end
    for i = d + 1, #s do shape[#shape + 1] = s[i] end
    return x:reshape(shape)
  end

  -- x (*, C, H, W), its dims before the last three as one
  local function lead3(fn, x, factor, what)
    need(fn, x, 'input')
    if type(factor) ~= 'number' or factor % 1 ~= 0 or factor < 1 or factor >= 2 ^ 31 then
      raise(('%s: %s must be an integer >= 1, got %s'):format(fn, what, tostring(factor)))
    end
    local s = x:size()
    local nd = #s
    if nd < 3 then
      raise(('%s: input must have at least 3 dims (*, C, H, W), got %d-d {%s}'):format(fn, nd, table.concat(s, ',')))
    end
    local n = 1
    for i = 1, nd - 3 do n = n * s[i] end
    return s, nd, n, s[nd - 2], s[nd - 1], s[nd]
  end

  -- pixel_shuffle(x (*, C*r^2, H, W), r) -> (*, C, H*r, W*r), as torch's
  -- (a view, a permute and a copy: differentiable through them)
  function F.pixel_shuffle(x, r)
    local s, nd, n, c, h, w = lead3('pixel_shuffle', x, r, 'upscale_factor')
    if c % (r * r) ~= 0 then
      raise(('pixel_shuffle: input has %d channels (dim %d), not divisible by upscale_factor^2 = %d'):format(c, nd - 2, r * r))
    end
    local oc = c / (r * r)
    s[nd - 2], s[nd - 1], s[nd] = oc, h * r, w * r
    return x:reshape(n, oc, r, r, h, w):permute({ 1, 2, 5, 3, 6, 4 }):reshape(s)
  end

  -- pixel_unshuffle(x (*, C, H*r, W*r), r) -> (*, C*r^2, H, W), pixel_shuffle's inverse
  function F.pixel_unshuffle(x, r)
    local s, nd, n, c, h, w = lead3('pixel_unshuffle', x, r, 'downscale_factor')
    if h % r ~= 0 or w % r ~= 0 then
      raise(('pixel_unshuffle: input height %d and width %d must be divisible by downscale_factor %d'):format(h, w, r))
    end
    s[nd - 2], s[nd - 1], s[nd] = c * r * r, h / r, w / r
    return x:reshape(n, c, h / r, r, w / r, r):permute({ 1, 2, 4, 6, 3, 5 }):reshape(s)
  end

  -- dropout2d(x (N, C, H, W), p = 0.5, training = true, inplace = false):
  -- zeroes whole channels with probability p, scales the kept ones by
  -- 1/(1-p); x itself when not training or p = 0
  function F.dropout2d(x, p, training, inplace, more)
    need('dropout2d', x, 'input')
    if x.p.ndim ~= 4 then
      raise(('dropout2d: input must be 4-d (N, C, H, W), got %d-d {%s}'):format(x.p.ndim, table.concat(x:size(), ',')))
    end
    p, training, inplace = dropout_args('dropout2d', p, training, inplace, more)
    if not training or p == 0 then return x end
    if p == 1 then return apply_mask('dropout2d', x, 0, inplace) end
    local mask = new(x, tonumber(x.p.shape[0]), tonumber(x.p.shape[1]), 1, 1)
    check(C.ln_bernoulli_(mask.p, 1 - p))
    check(C.ln_binary_scalar_(C.LN_MUL, mask.p, 1 / (1 - p)))
    return apply_mask('dropout2d', x, mask, inplace)
  end

  -- embedding(input (int64 1-based indices, any shape), weight (num, dim)[, padding_idx]):
  -- the rows of weight, shaped input's shape .. {dim}; padding_idx's row (1-based,
  -- negative from the end) passes no gradient to weight. fn names the caller in errors.
  -- (F.embedding, with its options, is functional_embedding's, over this one)
  local function embedding(fn, input, weight, padding_idx)
    need(fn, input, 'input')
    need(fn, weight, 'weight', 2)
    local dt = input.p.dtype_id
    if dt ~= 3 and dt ~= 2 then raise(('%s: input must be an int64 (or int32) tensor of 1-based indices, got %s'):format(fn, input.dtype)) end
    local num, dim = tonumber(weight.p.shape[0]), tonumber(weight.p.shape[1])
    local s = input:size()
    local flat = input:reshape(input:numel())
    local ok, out = pcall(Tensor.index_select, weight, 1, flat)
    if not ok then
      local bad = tostring(out):match('index (%-?%d+) is out of range')
      if not bad then error(out, 0) end
      raise(('%s: index %s is out of range for %d embeddings (indices are 1-based: 1..%d)'):format(fn, bad, num, num))
    end
    if padding_idx ~= nil then
      if padding_idx < 0 then padding_idx = num + padding_idx + 1 end
      out = out:where(flat:ne(padding_idx):unsqueeze(2), out:detach())
    end
    s[#s + 1] = dim
    return out:view(s)
  end
  return { embedding = embedding, dropout_args = dropout_args, apply_mask = apply_mask }
end
