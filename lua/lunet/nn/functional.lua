-- lunet.nn.functional: the layers as functions. Padding, convolution,
-- pooling, batch norm, softmax, NLL and linear call the C kernels of lunet.h
-- ("Neural-network kernels") and hand their results to the autograd recorder
-- of their formula (lunet.autograd.formulas.nn holds their derivatives); the
-- rest are compositions of differentiable tensor ops. Class labels are 1-based.
-- This file holds the shared helpers and the core (conv2d and its fused
-- forms); the other kinds live in functional_*.lua, installed into F below.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local C = core.C
local Tensor, wrap, check, is_tensor = T.Tensor, T.wrap, T.check, T.is_tensor
local node_owned = T.node_owned
local eager = require 'lunet.nn.eager'
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

-- x overwritten with fwd(x, a, b) and returned, as PyTorch's in-place
-- activations (inplace = true, hardtanh_, ...): a leaf that requires grad, or
-- a view of one, is refused (named here: copy_ would name itself); when
-- recording, the result is computed from a copy (its backward may have saved
-- the input) and copy_ moves its history onto x
local inplace_refused = A.inplace_refused
local function in_place(fn, x, fwd, a, b)
  if records(x) then
    local why = inplace_refused(x)
    if why then
      raise(fn .. (why == 'view' and ': a view of a leaf tensor' or ': a leaf tensor')
        .. ' that requires grad cannot be changed in place (inplace = true); use the out-of-place form, or lunet.no_grad')
    end
    local c = x:clone()
    local r = fwd(c, a, b)
    x:copy_(r)
    -- (the copy and the result are this function's own: lunet.nn.eager)
    if eager.active() then
      eager.consumed(r, x)
      eager.consumed(c, x)
    end
    return x
  end
  return x:copy_(fwd(x, a, b))
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

-- conv2d(x (N,C,H,W) or (C,H,W), w (O,C/groups,KH,KW), b (O) or nil,
--        {stride=1, padding=0 | {h,w} | 'same' | 'valid', dilation=1, groups=1}),
-- or PyTorch's positional conv2d(x, w, b, stride, padding, dilation, groups)
local record_conv2d = recorder('conv2d')
function F.conv2d(x, w, b, opts, padding, dilation, groups)
  if is_tensor(x) and x.p.ndim == 3 then   -- (an unbatched (C, H, W), as torch's)
    return F.conv2d(x:unsqueeze(1), w, b, opts, padding, dilation, groups):squeeze(1)
  end
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
  if saved then
    check(C.ln_conv2d_forward_saving(out.p, saved.p, x.p, w.p, b and b.p, params))
    saved = node_owned(saved)   -- (freed with the node: lunet.nn.eager)
  else
    check(C.ln_conv2d_forward(out.p, x.p, w.p, b and b.p, params))
  end
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

-- the other kinds, each in a file of its own, installed into F with the helpers above
local h = { need = need, pair = pair, new = new, new_like = new_like, kernel = kernel, sum_all = sum_all,
  shape_buf = shape_buf, NO_OPTS = NO_OPTS, in_place = in_place }
local shape = require('lunet.nn.functional_shape')(F, h)             -- pad, dropout, dropout2d, flatten, embedding
require('lunet.nn.functional_pool')(F, h)                            -- max/avg/adaptive pooling
require('lunet.nn.functional_1d')(F, h)                              -- conv1d and the 1-d pooling
require('lunet.nn.functional_3d')(F, h)                              -- conv3d and the 3-d pooling, over the 2-d ops
require('lunet.nn.functional_conv_transpose_nd')(F, h)               -- conv_transpose1d/3d, over conv_transpose2d
local norm = require('lunet.nn.functional_norm')(F, h)               -- batch/layer/group norm
local loss = require('lunet.nn.functional_loss')(F, h)               -- softmax, nll, cross entropy, mse, bce
require('lunet.nn.functional_linear_act')(F, h)                      -- linear, relu, sigmoid, tanh, ...
local same_shape, reduction = loss.same_shape, loss.reduction

-- silu, hardswish, hardsigmoid, relu6, softplus, mish, prelu; l1_loss,
-- smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div
require('lunet.nn.functional_act_loss')(F, { need = need, same_shape = same_shape, sum_all = sum_all,
  reduction = reduction, in_place = in_place })

local interp = require('lunet.nn.functional_interp')(F, h)           -- interpolate
require('lunet.nn.functional_grid')(F, h)                            -- grid_sample, affine_grid

-- hardtanh, selu, celu, threshold (and their in-place forms), logsigmoid, softsign,
-- tanhshrink, glu, softmin, hardshrink, softshrink
require('lunet.nn.functional_more_acts')(F, h)
-- cosine_similarity, pairwise_distance; triplet_margin, cosine_embedding, margin_ranking,
-- soft_margin, multilabel_soft_margin, multi_margin, poisson_nll, gaussian_nll losses
local distance = require('lunet.nn.functional_distance')(F, { need = need, sum_all = sum_all })
local more_loss = require('lunet.nn.functional_more_loss')(F, distance)
-- hinge_embedding, multilabel_margin, triplet_margin_with_distance losses; ctc_loss
local margin_more = require('lunet.nn.functional_margin_more')(F, distance, distance)
local ctc = require('lunet.nn.functional_ctc')(F, distance)
-- one_hot (1-based labels), bilinear
require('lunet.nn.functional_bilinear')(F, h)
-- unfold, fold, normalize, local_response_norm, channel_shuffle
require('lunet.nn.functional_fold')(F, h)
-- dropout1d/3d, alpha_dropout, feature_alpha_dropout, lp_pool1d/2d, adaptive_max_pool3d
require('lunet.nn.functional_dropout_lp')(F, h, shape)
-- embedding (max_norm, scale_grad_by_freq), embedding_bag
local emb = require('lunet.nn.functional_embedding')(F, h, shape)

-- max_unpool1d/2d/3d, fractional_max_pool2d/3d; rrelu, gumbel_softmax, pdist, *_with_indices, upsample*
local unpool = require('lunet.nn.functional_unpool')(F, h)
require('lunet.nn.functional_gaps')(F, h, unpool, interp)

-- for the layers (nn.LayerNorm, ...): their checks and forms that name them
-- (a table, so the API checks that call every function of F pass it over)
F._internal = { norm_shape = norm.norm_shape, need_eps = norm.need_eps, embedding = emb.embedding, emb = emb,
  interp_geometry = interp.interp_geometry, interpolate = interp.interpolate, interp_kernels = interp.kernels,
  distance = distance, more_loss = more_loss, ctc = ctc, margin_more = margin_more, unpool = unpool }

return F
