-- lunet.nn.functional: the layers as functions. Padding, convolution,
-- pooling, batch norm, softmax, NLL and linear call the C kernels of lunet.h
-- ("Neural-network kernels") and hand their results to the autograd recorder
-- of their formula (lunet.autograd.formulas.nn holds their derivatives); the
-- rest are compositions of differentiable tensor ops. Class labels are 1-based.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local C = core.C
local Tensor, wrap, check, is_tensor = T.Tensor, T.wrap, T.check, T.is_tensor
local recorder, records = A.recorder, A.records
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, also when a layer called this)
local check_options, positional = options.check, options.positional
local NO_OPTS = setmetatable({}, { __newindex = function() error('functional: internal options table is read-only', 2) end })

local F = {}

local shape_buf = ffi.new('int64_t[8]')

-- a new tensor shaped {...} with like's dtype and device
local function new(like, s1, s2, s3, s4)
  local n = 0
  if s1 then n = 1; shape_buf[0] = s1 end
  if s2 then n = 2; shape_buf[1] = s2 end
  if s3 then n = 3; shape_buf[2] = s3 end
  if s4 then n = 4; shape_buf[3] = s4 end
  return wrap(C.ln_empty(n, shape_buf, like.p.dtype_id, like.p.device_id))
end
local function new_like(x) return wrap(C.ln_empty(x.p.ndim, x.p.shape, x.p.dtype_id, x.p.device_id)) end
F._new = new

-- checked once per symbol: a closure and a pcall per call kept the layers'
-- calls out of LuaJIT's compiled traces
local have_kernel = {}
local function index_C(sym) return C[sym] end
local function kernel(fn, sym)
  if have_kernel[sym] then return end
  if not pcall(index_C, sym) then
    raise(('%s: the C kernel %s is not in this liblunet.so (rebuild with make)'):format(fn, sym))
  end
  have_kernel[sym] = true
end

local function need(fn, x, what, nd)
  if not is_tensor(x) then raise(('%s: %s must be a tensor, got %s'):format(fn, what, typename(x))) end
  if nd and x.p.ndim ~= nd then
    raise(('%s: %s must be %d-d, got %d-d {%s}'):format(fn, what, nd, x.p.ndim, table.concat(x:size(), ',')))
  end
  return x
end

-- the least value each geometry argument may take (a 0 stride divided by zero)
local pair_min = { stride = 1, dilation = 1, kernel_size = 1, padding = 0, output_size = 1 }
local function pair(fn, v, what, default)
  if v == nil then v = default end
  local a, b
  if type(v) == 'number' then a, b = v, v
  elseif is_table(v) and #v == 2 then a, b = v[1], v[2]
  else raise(('%s: %s must be a number or {h, w}, got %s'):format(fn, what, tostring(v))) end
  local lo = pair_min[what]
  if lo and not (type(a) == 'number' and type(b) == 'number' and a % 1 == 0 and b % 1 == 0 and a >= lo and b >= lo) then
    raise(('%s: %s must be integers >= %d, got %s'):format(fn, what, lo,
      is_table(v) and ('{' .. tostring(a) .. ', ' .. tostring(b) .. '}') or tostring(v)))
  end
  return a, b
end

-- sum of all elements as a 0-d tensor (differentiable)
local function sum_all(x)
  need('sum_all', x, 'input')
  if Tensor.sum then return x:sum() end
  local n = x:numel()
  local ones = new(x, n, 1)
  C.ln_fill_(ones.p, 1)
  return x:reshape(1, n):matmul(ones):reshape({})
end
F.sum_all = sum_all

-- ---- padding ----------------------------------------------------------------------------

-- pad the last two dims of x (N,C,H,W) with zeros: {left, right, top, bottom}
-- (each layer calls its recorder as a statement, then returns: a tail call
-- into the recorder made LuaJIT's traces keep fewer allocations sunk)
local record_pad = recorder('pad')
-- F.pad(x (N,C,H,W), {left, right[, top, bottom]}[, mode = 'constant'[, value = 0]])
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

function F.pad(x, p, ...)
  need('pad', x, 'input', 4)
  if not is_table(p) or (#p ~= 2 and #p ~= 4) then
    raise('pad: padding must be a list {left, right} or {left, right, top, bottom} of integers, got ' ..
      (is_table(p) and #p .. ' values' or typename(p)))
  end
  local l, r, t, b = p[1], p[2], p[3] or 0, p[4] or 0
  for k = 1, #p do   -- (not ipairs over {l, r, t, b}: it stopped at a nil, unchecked)
    local v = p[k]
    if type(v) ~= 'number' or v % 1 ~= 0 or v < 0 or v > 2 ^ 31 then
      raise(('pad: padding must be integers in 0..2^31, got {%s, %s, %s, %s}'):format(
        tostring(l), tostring(r), tostring(t), tostring(b)))
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
    local limit = mode == 'circular' and 0 or 1   -- (reflect: below the size; circular: at most it)
    for _, d in ipairs({ { 'left', l, 4 }, { 'right', r, 4 }, { 'top', t, 3 }, { 'bottom', b, 3 } }) do
      if d[2] > s[d[3]] - limit or (mode == 'replicate' and d[2] > 0 and s[d[3]] == 0) then
        raise(("pad: %s padding %d is too large for mode '%s' on a dim of size %d"):format(d[1], d[2], mode, s[d[3]]))
      end
    end
    local out = x
    if l + r > 0 then out = out:index_select(4, pad_index(mode, s[4], l, r)) end
    if t + b > 0 then out = out:index_select(3, pad_index(mode, s[3], t, b)) end
    return out == x and x:clone() or out
  end
  if value ~= nil and value % 1 ~= 0 and not x:is_floating_point() then   -- (NaN and inf too)
    raise(('pad: value %s does not fit a %s input'):format(tostring(value), x.dtype))
  end
  local out = new(x, s[1], s[2], s[3] + t + b, s[4] + l + r)
  C.ln_fill_(out.p, value or 0)
  local inner = A.raw.narrow(A.raw.narrow(out, 3, t + 1, s[3]), 4, l + 1, s[4])
  check(C.ln_copy_(inner.p, x.p))
  record_pad(out, x, t, l, s[3], s[4])
  return out
end

-- ---- convolution ----------------------------------------------------------------------

local CONV_OPTS = { stride = 'number|table', padding = 'number|table|string', dilation = 'number|table', groups = 'number' }
local CONV_POSITIONAL = { 'stride', 'padding', 'dilation', 'groups' }

-- the geometry of conv2d(x, w, b, opts): x (padded when 'same' needs an odd
-- extra row/col), params, and the output shape N, O, OH, OW
local function conv_setup(fn, x, w, b, opts)
  need(fn, x, 'input', 4)
  need(fn, w, 'weight', 4)
  if b ~= nil then need(fn, b, 'bias', 1) end
  if opts == nil then opts = NO_OPTS else check_options(fn, opts, CONV_OPTS) end
  local sh, sw = pair(fn, opts.stride, 'stride', 1)
  local dh, dw = pair(fn, opts.dilation, 'dilation', 1)
  local groups = opts.groups or 1
  local kh, kw = tonumber(w.p.shape[2]), tonumber(w.p.shape[3])
  local padding = opts.padding or 0
  local ph, pw
  if padding == 'valid' then ph, pw = 0, 0
  elseif padding == 'same' then
    if sh ~= 1 or sw ~= 1 then raise(fn .. ": padding='same' needs stride 1") end
    local th, tw = dh * (kh - 1), dw * (kw - 1)
    ph, pw = math.floor(th / 2), math.floor(tw / 2)
    if th % 2 == 1 or tw % 2 == 1 then  -- PyTorch puts the odd extra row/col at the end
      x = F.pad(x, { pw, tw - pw, ph, th - ph })
      ph, pw = 0, 0
    end
  else ph, pw = pair(fn, padding, 'padding') end
  local N, H, W = tonumber(x.p.shape[0]), tonumber(x.p.shape[2]), tonumber(x.p.shape[3])
  local O = tonumber(w.p.shape[0])
  local OH = math.floor((H + 2 * ph - dh * (kh - 1) - 1) / sh) + 1
  local OW = math.floor((W + 2 * pw - dw * (kw - 1) - 1) / sw) + 1
  if OH < 1 or OW < 1 then
    raise(('%s: input {%s} is too small for a %dx%d kernel (output %dx%d)'):format(
      fn, table.concat(x:size(), ','), kh, kw, OH, OW))
  end
  return x, ffi.new('ln_conv2d_params', sh, sw, ph, pw, dh, dw, groups), N, O, OH, OW
end

-- conv2d(x (N,C,H,W), w (O,C/groups,KH,KW), b (O) or nil,
--        {stride=1, padding=0 | {h,w} | 'same' | 'valid', dilation=1, groups=1}),
-- or PyTorch's positional conv2d(x, w, b, stride, padding, dilation, groups)
local record_conv2d = recorder('conv2d')
function F.conv2d(x, w, b, opts, padding, dilation, groups)
  if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or padding ~= nil then
    opts = positional('conv2d', CONV_POSITIONAL, opts, padding, dilation, groups)
  end
  kernel('conv2d', 'ln_conv2d_forward')
  local params, N, O, OH, OW
  x, params, N, O, OH, OW = conv_setup('conv2d', x, w, b, opts)
  local out = new(x, N, O, OH, OW)
  -- training a weight on oneDNN: the forward also keeps the input in its
  -- blocked layout, which the weight gradient reads (one reorder less)
  local saved
  if records(w) then
    local numel = tonumber(C.ln_conv2d_saved_numel(x.p, w.p, params))
    if numel > 0 then saved = new(x, numel) end
  end
  if saved then check(C.ln_conv2d_forward_saving(out.p, saved.p, x.p, w.p, b and b.p, params))
  else check(C.ln_conv2d_forward(out.p, x.p, w.p, b and b.p, params)) end
  record_conv2d(out, x, w, b, params, saved)
  return out
end

-- conv_transpose2d, on conv2d's kernels
require('lunet.nn.functional_conv_transpose')(F, { need = need, pair = pair, new = new, kernel = kernel })

local fuse = ffi.new('ln_conv2d_fuse')

-- conv2d_fused(x, w, b, opts, bn_weight, bn_bias, bn_mean, bn_var, bn_eps, residual, relu):
--   relu?(batch_norm_eval?(conv2d(x, w, b, opts)) + residual?)
-- bn_mean/bn_var (running statistics; nil: no batch norm), bn_weight/bn_bias
-- (nil: affine off), residual (N,O,OH,OW) or nil, relu a boolean. One fused
-- kernel (batch norm folded into the weights, add and relu as post-ops) when
-- no gradient is recorded; otherwise the same composition of differentiable
-- ops (conv2d, batch_norm in eval mode, add, relu).
function F.conv2d_fused(x, w, b, opts, bn_weight, bn_bias, bn_mean, bn_var, bn_eps, residual, relu)
  if bn_mean ~= nil or bn_var ~= nil then
    need('conv2d_fused', bn_mean, 'bn_mean')
    need('conv2d_fused', bn_var, 'bn_var')
  end
  if bn_weight ~= nil then need('conv2d_fused', bn_weight, 'bn_weight') end
  if bn_bias ~= nil then need('conv2d_fused', bn_bias, 'bn_bias') end
  if residual ~= nil then need('conv2d_fused', residual, 'residual') end
  if records(x, w, b, bn_weight, bn_bias, residual) then
    local y = F.conv2d(x, w, b, opts)
    if bn_mean ~= nil then y = F.batch_norm(y, bn_mean, bn_var, bn_weight, bn_bias, false, 0, bn_eps or 1e-5) end
    if residual ~= nil then y = y + residual end
    if relu then y = y:relu() end
    return y
  end
  kernel('conv2d_fused', 'ln_conv2d_forward_fused')
  local params, N, O, OH, OW
  x, params, N, O, OH, OW = conv_setup('conv2d_fused', x, w, b, opts)
  local out = new(x, N, O, OH, OW)
  fuse.bn_weight = bn_weight and bn_weight.p
  fuse.bn_bias = bn_bias and bn_bias.p
  fuse.bn_mean = bn_mean and bn_mean.p
  fuse.bn_var = bn_var and bn_var.p
  fuse.bn_eps = bn_eps or 1e-5
  fuse.residual = residual and residual.p
  fuse.relu = relu and 1 or 0
  local rc = C.ln_conv2d_forward_fused(out.p, x.p, w.p, b and b.p, fuse, params)
  -- drop the borrowed pointers before a possible error
  fuse.bn_weight, fuse.bn_bias, fuse.bn_mean, fuse.bn_var, fuse.residual = nil, nil, nil, nil, nil
  check(rc)
  return out
end

-- basic_block_eval(x, conv1, bn1, conv2, bn2, sconv, sbn): the eval forward
-- of nn.BasicBlock in one call (ln_basicblock_forward_fused), from its
-- modules (nn.Conv2d with numeric padding, nn.BatchNorm2d in eval mode;
-- sconv/sbn nil for the identity shortcut). basic_blocks_eval(x, blocks, n):
-- n such blocks in a row ({conv1, bn1, conv2, bn2, sconv, sbn} each, up to
-- 16), activations kept in oneDNN's blocked layout between them too. Both
-- record no gradient: callers use them only when none is needed (see
-- nn.BasicBlock, nn.Sequential).
local MAXB = 16
local cbn = ffi.new('ln_conv_bn[?]', 3 * MAXB)
local stem_cbn = ffi.new('ln_conv_bn[1]')
local function conv_params(conv)
  local p = rawget(conv, '_ln_params')
  if p then return p end
  local o = conv._opts
  local sh, sw = pair('conv2d', o.stride, 'stride', 1)
  local ph, pw = pair('conv2d', o.padding, 'padding', 0)
  local dh, dw = pair('conv2d', o.dilation, 'dilation', 1)
  p = ffi.new('ln_conv2d_params', sh, sw, ph, pw, dh, dw, o.groups or 1)
  rawset(conv, '_ln_params', p)
  return p
end
local function need_conv(fn, c, what)
  if not is_table(c) or not is_tensor(c.weight) or not is_table(c._opts) or not is_table(c.kernel_size) then
    raise(('%s: %s must be an nn.Conv2d, got %s'):format(fn, what, typename(c)))
  end
end
local function need_bn(fn, b, what)
  if not is_table(b) or not is_tensor(b.running_mean) or not is_tensor(b.running_var) then
    raise(('%s: %s must be an nn.BatchNorm2d with running statistics, got %s'):format(fn, what, typename(b)))
  end
end
local function fill_cbn(i, conv, bn, c)
  c = c or cbn[i]
  c.weight, c.bias = conv.weight.p, conv.bias and conv.bias.p
  c.bn_weight, c.bn_bias = bn.weight and bn.weight.p, bn.bias and bn.bias.p
  c.bn_mean, c.bn_var, c.bn_eps = bn.running_mean.p, bn.running_var.p, bn.eps
  c.p = conv_params(conv)
end
local function conv_out(H, W, p, k)
  return math.floor((H + 2 * p.pad_h - p.dil_h * (k[1] - 1) - 1) / p.stride_h) + 1,
    math.floor((W + 2 * p.pad_w - p.dil_w * (k[2] - 1) - 1) / p.stride_w) + 1
end
-- fills block i (0-based) of cbn; returns its output size
local function fill_block(fn, i, H, W, conv1, bn1, conv2, bn2, sconv, sbn)
  need_conv(fn, conv1, 'conv1'); need_bn(fn, bn1, 'bn1'); need_conv(fn, conv2, 'conv2'); need_bn(fn, bn2, 'bn2')
  fill_cbn(3 * i, conv1, bn1)
  fill_cbn(3 * i + 1, conv2, bn2)
  if sconv ~= nil then
    need_conv(fn, sconv, 'shortcut conv'); need_bn(fn, sbn, 'shortcut bn')
    fill_cbn(3 * i + 2, sconv, sbn)
  else
    cbn[3 * i + 2].weight = nil
  end
  H, W = conv_out(H, W, cbn[3 * i].p, conv1.kernel_size)
  return conv_out(H, W, cbn[3 * i + 1].p, conv2.kernel_size)
end
local function clear_cbn(n)
  for i = 0, 3 * n - 1 do
    local c = cbn[i]
    c.weight, c.bias, c.bn_weight, c.bn_bias, c.bn_mean, c.bn_var = nil, nil, nil, nil, nil, nil
  end
end
local function too_small(x, OH, OW)
  if OH < 1 or OW < 1 then raise(('basic_block_eval: input {%s} is too small'):format(table.concat(x:size(), ','))) end
end
function F.basic_block_eval(x, conv1, bn1, conv2, bn2, sconv, sbn)
  need('basic_block_eval', x, 'input', 4)
  kernel('basic_block_eval', 'ln_basicblock_forward_fused')
  local OH, OW = fill_block('basic_block_eval', 0, tonumber(x.p.shape[2]), tonumber(x.p.shape[3]), conv1, bn1, conv2, bn2, sconv, sbn)
  too_small(x, OH, OW)
  local out = new(x, tonumber(x.p.shape[0]), conv2.out_channels, OH, OW)
  local rc = C.ln_basicblock_forward_fused(out.p, x.p, cbn[0], cbn[1], sconv and cbn[2] or nil)
  clear_cbn(1)
  check(rc)
  return out
end
-- basic_blocks_eval(x, blocks, n[, stem_conv, stem_bn]): with a stem, x
-- first goes through relu(stem_bn(stem_conv(x))), kept blocked for the blocks
function F.basic_blocks_eval(x, blocks, n, stem_conv, stem_bn)
  need('basic_blocks_eval', x, 'input', 4)
  kernel('basic_blocks_eval', 'ln_basicblocks_forward_fused')
  if not is_table(blocks) then raise('basic_blocks_eval: blocks must be a list of {conv1, bn1, conv2, bn2[, sconv, sbn]}') end
  n = n or #blocks
  if type(n) ~= 'number' or n < 1 or n > MAXB or n % 1 ~= 0 then
    raise(('basic_blocks_eval: expected 1 to %d blocks, got %s'):format(MAXB, tostring(n)))
  end
  local H, W = tonumber(x.p.shape[2]), tonumber(x.p.shape[3])
  local O
  local stem = nil
  if stem_conv ~= nil then
    need_conv('basic_blocks_eval', stem_conv, 'stem conv')
    need_bn('basic_blocks_eval', stem_bn, 'stem bn')
    fill_cbn(0, stem_conv, stem_bn, stem_cbn[0])
    H, W = conv_out(H, W, stem_cbn[0].p, stem_conv.kernel_size)
    stem = stem_cbn
  end
  for i = 1, n do
    local b = blocks[i]
    if not is_table(b) then clear_cbn(MAXB); raise(('basic_blocks_eval: block %d must be a table'):format(i)) end
    local ok, e1, e2 = pcall(fill_block, 'basic_blocks_eval', i - 1, H, W, b[1], b[2], b[3], b[4], b[5], b[6])
    if not ok then clear_cbn(MAXB); error(e1, 0) end
    H, W = e1, e2
    O = b[3].out_channels
  end
  too_small(x, H, W)
  local out = new(x, tonumber(x.p.shape[0]), O, H, W)
  local rc = C.ln_basicblocks_forward_fused(out.p, x.p, stem, cbn, n)
  clear_cbn(n)
  local c = stem_cbn[0]
  c.weight, c.bias, c.bn_weight, c.bn_bias, c.bn_mean, c.bn_var = nil, nil, nil, nil, nil, nil
  check(rc)
  return out
end

-- ---- pooling ------------------------------------------------------------------------------

local function pool_size(H, k, s, p, d, ceil_mode)
  local num = H + 2 * p - d * (k - 1) - 1
  local o = (ceil_mode and math.ceil(num / s) or math.floor(num / s)) + 1
  if ceil_mode and (o - 1) * s >= H + p then o = o - 1 end
  return o
end

local function pool_params(fn, x, k, opts)
  local kh, kw = pair(fn, k, 'kernel_size')
  local sh, sw = pair(fn, opts.stride, 'stride', { kh, kw })
  local ph, pw = pair(fn, opts.padding, 'padding', 0)
  local dh, dw = pair(fn, opts.dilation, 'dilation', 1)
  if ph > kh / 2 or pw > kw / 2 then
    raise(('%s: padding %dx%d must be at most half the kernel %dx%d'):format(fn, ph, pw, kh, kw))
  end
  local cnt = opts.count_include_pad
  if cnt == nil then cnt = true end
  local p = ffi.new('ln_pool2d_params', kh, kw, sh, sw, ph, pw, dh, dw, opts.ceil_mode and 1 or 0, cnt and 1 or 0)
  local H, W = tonumber(x.p.shape[2]), tonumber(x.p.shape[3])
  local OH, OW = pool_size(H, kh, sh, ph, dh, opts.ceil_mode), pool_size(W, kw, sw, pw, dw, opts.ceil_mode)
  if OH < 1 or OW < 1 then
    raise(('%s: input {%s} is too small for a %dx%d window'):format(fn, table.concat(x:size(), ','), kh, kw))
  end
  return p, OH, OW
end

local MAXPOOL_OPTS = { stride = 'number|table', padding = 'number|table', dilation = 'number|table',
  ceil_mode = 'boolean', return_indices = 'boolean' }
local MAXPOOL_POSITIONAL = { 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices' }

-- max_pool2d(x, kernel_size, {stride=kernel_size, padding=0, dilation=1,
-- ceil_mode=false, return_indices=false}), or PyTorch's positional
-- max_pool2d(x, k, stride, padding, dilation, ceil_mode, return_indices);
-- indices are 0-based h*W+w
local record_max_pool2d = recorder('max_pool2d')
function F.max_pool2d(x, k, opts, padding, dilation, ceil_mode, return_indices)
  need('max_pool2d', x, 'input', 4)
  kernel('max_pool2d', 'ln_maxpool2d_forward')
  if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or padding ~= nil or dilation ~= nil
      or ceil_mode ~= nil or return_indices ~= nil then
    opts = positional('max_pool2d', MAXPOOL_POSITIONAL, opts, padding, dilation, ceil_mode, return_indices)
  end
  if opts == nil then opts = NO_OPTS else check_options('max_pool2d', opts, MAXPOOL_OPTS) end
  local p, OH, OW = pool_params('max_pool2d', x, k, opts)
  local N, Cc = tonumber(x.p.shape[0]), tonumber(x.p.shape[1])
  local out = new(x, N, Cc, OH, OW)
  shape_buf[0], shape_buf[1], shape_buf[2], shape_buf[3] = N, Cc, OH, OW
  local idx = wrap(C.ln_empty(4, shape_buf, C.LN_INT64, x.p.device_id))
  check(C.ln_maxpool2d_forward(out.p, idx.p, x.p, p))
  record_max_pool2d(out, x, idx, p)
  if opts.return_indices then return out, idx end
  return out
end

local AVGPOOL_OPTS = { stride = 'number|table', padding = 'number|table', ceil_mode = 'boolean',
  count_include_pad = 'boolean' }
local AVGPOOL_POSITIONAL = { 'stride', 'padding', 'ceil_mode', 'count_include_pad' }

-- avg_pool2d(x, kernel_size, {stride=kernel_size, padding=0, ceil_mode=false, count_include_pad=true}),
-- or PyTorch's positional avg_pool2d(x, k, stride, padding, ceil_mode, count_include_pad)
local record_avg_pool2d = recorder('avg_pool2d')
function F.avg_pool2d(x, k, opts, padding, ceil_mode, count_include_pad)
  need('avg_pool2d', x, 'input', 4)
  kernel('avg_pool2d', 'ln_avgpool2d_forward')
  if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or padding ~= nil or ceil_mode ~= nil
      or count_include_pad ~= nil then
    opts = positional('avg_pool2d', AVGPOOL_POSITIONAL, opts, padding, ceil_mode, count_include_pad)
  end
  if opts == nil then opts = NO_OPTS else check_options('avg_pool2d', opts, AVGPOOL_OPTS) end
  local p, OH, OW = pool_params('avg_pool2d', x, k, opts)
  local out = new(x, tonumber(x.p.shape[0]), tonumber(x.p.shape[1]), OH, OW)
  check(C.ln_avgpool2d_forward(out.p, x.p, p))
  record_avg_pool2d(out, x, p, tonumber(x.p.shape[2]), tonumber(x.p.shape[3]))
  return out
end

-- adaptive_avg_pool2d(x, output_size): a number or {oh, ow}
local record_adaptive_avg_pool2d = recorder('adaptive_avg_pool2d')
function F.adaptive_avg_pool2d(x, size)
  need('adaptive_avg_pool2d', x, 'input', 4)
  kernel('adaptive_avg_pool2d', 'ln_adaptive_avgpool2d_forward')
  local oh, ow = pair('adaptive_avg_pool2d', size, 'output_size')
  local n, c = tonumber(x.p.shape[0]), tonumber(x.p.shape[1])
  if n * c * oh * ow >= 2 ^ 62 then
    raise(('adaptive_avg_pool2d: output {%d,%d,%.17g,%.17g} is too large'):format(n, c, oh, ow))
  end
  local out = new(x, n, c, oh, ow)
  check(C.ln_adaptive_avgpool2d_forward(out.p, x.p))
  record_adaptive_avg_pool2d(out, x, tonumber(x.p.shape[2]), tonumber(x.p.shape[3]))
  return out
end

-- ---- batch norm ---------------------------------------------------------------------------

local record_bn = { [false] = recorder('batch_norm'), [true] = recorder('batch_norm_relu') }
local record_bn_add_relu = recorder('batch_norm_add_relu')

local function batch_norm(fn, relu, res, x, running_mean, running_var, weight, bias, training, momentum, eps)
  need(fn, x, 'input')
  if relu == 'add' then need(fn, res, 'residual') end
  if running_mean ~= nil then need(fn, running_mean, 'running_mean') end
  if running_var ~= nil then need(fn, running_var, 'running_var') end
  if weight ~= nil then need(fn, weight, 'weight') end
  if bias ~= nil then need(fn, bias, 'bias') end
  kernel(fn, relu == 'add' and 'ln_batchnorm_add_relu_forward' or relu and 'ln_batchnorm_relu_forward'
    or 'ln_batchnorm_forward')
  if x.p.ndim < 2 then raise(fn .. ': input must be at least 2-d (N, C, ...)') end
  -- (a negative eps took the square root of a negative variance: NaN; a momentum past 1 diverged)
  if eps ~= nil and (type(eps) ~= 'number' or not (eps >= 0 and eps < math.huge)) then
    raise(('%s: eps must be a finite number >= 0, got %s'):format(fn, tostring(eps)))
  end
  if momentum ~= nil and (type(momentum) ~= 'number' or not (momentum >= 0 and momentum <= 1)) then
    raise(('%s: momentum must be in [0, 1], got %s'):format(fn, tostring(momentum)))
  end
  local Cc = tonumber(x.p.shape[1])
  if not training and (running_mean == nil or running_var == nil) then
    raise(fn .. ': eval mode needs running_mean and running_var')
  end
  if training then
    local count = x:numel() / Cc
    if count <= 1 then
      raise(('%s: expected more than 1 value per channel when training, got input {%s}'):format(fn,
        table.concat(x:size(), ',')))
    end
  end
  local out = new_like(x)
  local mean, invstd = new(x, Cc), new(x, Cc)
  local rm, rv, w, b = running_mean and running_mean.p, running_var and running_var.p, weight and weight.p,
    bias and bias.p
  if relu == 'add' then
    check(C.ln_batchnorm_add_relu_forward(out.p, mean.p, invstd.p, x.p, res.p, w, b, rm, rv, training and 1 or 0,
      momentum or 0.1, eps or 1e-5))
  else
    check((relu and C.ln_batchnorm_relu_forward or C.ln_batchnorm_forward)(out.p, mean.p, invstd.p, x.p, w, b, rm,
      rv, training and 1 or 0, momentum or 0.1, eps or 1e-5))
  end
  if relu == 'add' then record_bn_add_relu(out, x, weight, bias, res, mean, invstd, training and 1 or 0)
  else record_bn[relu](out, x, weight, bias, mean, invstd, training and 1 or 0) end
  return out
end

-- batch_norm(x (N,C[,...]), running_mean, running_var, weight, bias, training, momentum, eps)
function F.batch_norm(...) return batch_norm('batch_norm', false, nil, ...) end
-- relu(batch_norm(...)) in one pass each way (same arguments): what
-- nn.BasicBlock and nn.Sequential run for BatchNorm2d -> ReLU in training
function F.batch_norm_relu(...) return batch_norm('batch_norm_relu', true, nil, ...) end
-- relu(batch_norm(x, ...) + residual) in one pass each way:
-- batch_norm_add_relu(x, residual, running_mean, running_var, weight, bias,
-- training, momentum, eps); nn.BasicBlock's tail in training
function F.batch_norm_add_relu(x, residual, ...) return batch_norm('batch_norm_add_relu', 'add', residual, x, ...) end

-- ---- softmax and losses ---------------------------------------------------------------------

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

-- ---- activations and the rest -----------------------------------------------------------

-- x (N, in) @ w (out, in)^T + b (out) -> (N, out) as one autograd node
-- (formulas.nn's linear)
local record_linear = recorder('linear')
local function linear2d(x, w, b)
  local wt = C.ln_transpose(w.p, 0, 1)
  local r = wt ~= nil and (b and C.ln_addmm(b.p, x.p, wt, 1, 1) or C.ln_matmul(x.p, wt)) or nil
  C.ln_tensor_free(wt)
  if r == nil then raise('linear: ' .. core.last_error()) end
  local y = wrap(r)
  record_linear(y, x, w, b)
  return y
end

function F.linear(x, w, b)
  need('linear', x, 'input'); need('linear', w, 'weight', 2)
  if x.p.ndim >= 1 and x.p.shape[x.p.ndim - 1] ~= w.p.shape[1] then
    raise(('linear: input has %d features, weight expects %d'):format(tonumber(x.p.shape[x.p.ndim - 1]),
      tonumber(w.p.shape[1])))
  end
  if b ~= nil then
    need('linear', b, 'bias', 1)
    if b.p.shape[0] ~= w.p.shape[0] then
      raise(('linear: bias has %d elements, weight has %d outputs'):format(tonumber(b.p.shape[0]),
        tonumber(w.p.shape[0])))
    end
  end
  if x.p.ndim == 2 then return linear2d(x, w, b) end
  local y = x:matmul(w:t())
  if b then y = y + b end
  return y
end

function F.relu(x) return need('relu', x, 'input'):relu() end
function F.sigmoid(x) return need('sigmoid', x, 'input'):sigmoid() end
function F.tanh(x) return need('tanh', x, 'input'):tanh() end

function F.leaky_relu(x, slope)
  need('leaky_relu', x, 'input')
  slope = slope or 0.01
  if type(slope) ~= 'number' then raise('leaky_relu: negative_slope must be a number, got ' .. typename(slope)) end
  return x:where(x:gt(0), x * slope)
end

function F.elu(x, alpha)
  need('elu', x, 'input')
  alpha = alpha or 1
  if type(alpha) ~= 'number' then raise('elu: alpha must be a number, got ' .. typename(alpha)) end
  return x:where(x:gt(0), x:clamp(nil, 0):expm1() * alpha)
end

function F.gelu(x, approximate)
  need('gelu', x, 'input')
  if approximate == 'tanh' then
    local inner = (x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)
    return x * 0.5 * (inner:tanh() + 1)
  end
  return x * 0.5 * ((x * (1 / math.sqrt(2))):erf() + 1)
end

-- dropout(x, p=0.5, training=true): zeroes with probability p, scales the rest by 1/(1-p)
function F.dropout(x, p, training)
  need('dropout', x, 'input')
  p = p or 0.5
  if type(p) ~= 'number' or not (p >= 0 and p <= 1) then raise('dropout: p must be in [0, 1], got ' .. tostring(p)) end
  if training == false or p == 0 then return x end
  if p == 1 then return x * 0 end
  local mask = new_like(x)
  check(C.ln_bernoulli_(mask.p, 1 - p))
  check(C.ln_binary_scalar_(C.LN_MUL, mask.p, 1 / (1 - p)))
  return x * mask
end

function F.flatten(x, s, e) return need('flatten', x, 'input'):flatten(s or 2, e or -1) end

-- silu, hardswish, hardsigmoid, relu6, softplus, mish, prelu; l1_loss,
-- smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div
require('lunet.nn.functional_act_loss')(F, { need = need, same_shape = same_shape, sum_all = sum_all,
  reduction = reduction })

-- ---- normalisation over a sample's own values ---------------------------------------------

-- the shape of normalized_shape (a number or a list of the trailing sizes) as a list
local function norm_shape(fn, ns)
  if type(ns) == 'number' then ns = { ns } end
  if not is_table(ns) or #ns == 0 or #ns > 8 then
    raise(('%s: normalized_shape must be a number or a list of 1 to 8 sizes, got %s'):format(fn,
      is_table(ns) and #ns .. ' sizes' or typename(ns)))
  end
  for i = 1, #ns do
    local v = ns[i]
    if type(v) ~= 'number' or v % 1 ~= 0 or v < 1 or v >= 2 ^ 53 then
      raise(('%s: normalized_shape must be integers >= 1, got %s'):format(fn, tostring(v)))
    end
  end
  return ns
end

local function need_eps(fn, eps)
  if eps == nil then return 1e-5 end
  if type(eps) ~= 'number' or not (eps >= 0 and eps < math.huge) then
    raise(('%s: eps must be a finite number >= 0, got %s'):format(fn, tostring(eps)))
  end
  return eps
end

-- x2 (rows, n) -> (x2 - mean) / sqrt(var + eps) along dim 2, var biased (PyTorch's)
local function normalize_rows(x2, eps, dim)
  local d = x2 - x2:mean(dim, true)
  return d * ((d * d):mean(dim, true) + eps):rsqrt()
end

-- layer_norm(x, normalized_shape[, weight[, bias[, eps = 1e-5]]]): normalises
-- over the trailing dims normalized_shape (mean and biased variance), then
-- y * weight + bias (each of normalized_shape), as torch.nn.functional.layer_norm
function F.layer_norm(x, normalized_shape, weight, bias, eps)
  need('layer_norm', x, 'input')
  local ns = norm_shape('layer_norm', normalized_shape)
  eps = need_eps('layer_norm', eps)
  local s, k = x:size(), #ns
  local nd = #s
  local m = 1
  for i = 1, k do
    if s[nd - k + i] ~= ns[i] then
      raise(('layer_norm: input of shape {%s} does not end in normalized_shape {%s}'):format(
        table.concat(s, ','), table.concat(ns, ',')))
    end
    m = m * ns[i]
  end
  local rows = 1
  for i = 1, nd - k do rows = rows * s[i] end
  local y = normalize_rows(x:reshape(rows, m), eps, 2):view(s)
  if weight ~= nil then y = y * need('layer_norm', weight, 'weight') end
  if bias ~= nil then y = y + need('layer_norm', bias, 'bias') end
  return y
end

-- group_norm(x (N, C, ...), num_groups[, weight (C)[, bias (C)[, eps = 1e-5]]]):
-- normalises each sample's C / num_groups channels of a group together (mean and
-- biased variance), then y * weight + bias per channel, as torch's group_norm
function F.group_norm(x, num_groups, weight, bias, eps)
  need('group_norm', x, 'input')
  eps = need_eps('group_norm', eps)
  local s = x:size()
  if #s < 2 then raise(('group_norm: input must be (N, C, ...), got %d-d {%s}'):format(#s, table.concat(s, ','))) end
  local G, N, Cn = num_groups, s[1], s[2]
  if type(G) ~= 'number' or G % 1 ~= 0 or G < 1 then
    raise('group_norm: num_groups must be an integer >= 1, got ' .. tostring(G))
  end
  if Cn % G ~= 0 then
    raise(('group_norm: input has %d channels, not divisible by num_groups %d'):format(Cn, G))
  end
  local rest = 1
  for i = 3, #s do rest = rest * s[i] end
  local y = normalize_rows(x:reshape(N, G, Cn / G * rest), eps, 3)
  if weight == nil and bias == nil then return y:view(s) end
  y = y:view(N, Cn, rest)
  if weight ~= nil then y = y * need('group_norm', weight, 'weight'):view(Cn, 1) end
  if bias ~= nil then y = y + need('group_norm', bias, 'bias'):view(Cn, 1) end
  return y:view(s)
end

-- dropout2d(x (N, C, H, W), p = 0.5, training = true): zeroes whole channels
-- with probability p, scales the kept ones by 1/(1-p); x itself when not training
function F.dropout2d(x, p, training)
  need('dropout2d', x, 'input')
  if x.p.ndim ~= 4 then
    raise(('dropout2d: input must be 4-d (N, C, H, W), got %d-d {%s}'):format(x.p.ndim, table.concat(x:size(), ',')))
  end
  p = p or 0.5
  if type(p) ~= 'number' or not (p >= 0 and p <= 1) then raise('dropout2d: p must be in [0, 1], got ' .. tostring(p)) end
  if training == false or p == 0 then return x end
  if p == 1 then return x * 0 end
  local mask = new(x, tonumber(x.p.shape[0]), tonumber(x.p.shape[1]), 1, 1)
  check(C.ln_bernoulli_(mask.p, 1 - p))
  check(C.ln_binary_scalar_(C.LN_MUL, mask.p, 1 / (1 - p)))
  return x * mask
end

-- embedding(input (int64 1-based indices, any shape), weight (num, dim)[, padding_idx]):
-- the rows of weight, shaped input's shape .. {dim}; padding_idx's row (1-based,
-- negative from the end) passes no gradient to weight. fn names the caller in errors.
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
function F.embedding(input, weight, padding_idx)
  if padding_idx ~= nil then
    local num = is_tensor(weight) and weight.p.ndim == 2 and tonumber(weight.p.shape[0])
    if type(padding_idx) ~= 'number' or padding_idx % 1 ~= 0 or padding_idx == 0
        or num and (padding_idx > num or padding_idx < -num) then
      raise(('embedding: padding_idx must be an integer in 1..%s or negative from the end, got %s'):format(
        tostring(num or 'num_embeddings'), tostring(padding_idx)))
    end
  end
  return embedding('embedding', input, weight, padding_idx)
end

-- ---- nearest upsampling -------------------------------------------------------------------

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

-- for the layers (nn.LayerNorm, ...): their checks and forms that name them
-- (a table, so the API checks that call every function of F pass it over)
F._internal = { norm_shape = norm_shape, need_eps = need_eps, embedding = embedding,
  interp_geometry = interp_geometry, interpolate = interpolate }

return F
