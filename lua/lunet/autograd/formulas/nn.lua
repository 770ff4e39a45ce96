-- lunet.autograd.formulas.nn: the layers of lunet.nn.functional (kind
-- 'layer', see lunet.autograd.record): padding, convolution, pooling, batch
-- norm and its fused forms, softmax, NLL, linear. Each backward calls the
-- layer's C backward kernel; n.a, n.b are the saved inputs, n.r the output
-- (save_out), n.x1..x4 what the forward handed over (named at each entry).
local ffi = require 'ffi'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local C = core.C
local wrap, check = T.wrap, T.check

local shape_buf = ffi.new('int64_t[4]')
local function new_like(x) return wrap(C.ln_empty(x.p.ndim, x.p.shape, x.p.dtype_id, x.p.device_id)) end
local function new1(like, n)
  shape_buf[0] = n
  return wrap(C.ln_empty(1, shape_buf, like.p.dtype_id, like.p.device_id))
end
-- (N, C) of g, (H, W) given: a pooling's input gradient
local function new_nchw(g, H, W)
  shape_buf[0], shape_buf[1], shape_buf[2], shape_buf[3] = g.p.shape[0], g.p.shape[1], H, W
  return wrap(C.ln_empty(4, shape_buf, g.p.dtype_id, g.p.device_id))
end

return function(def)
  -- pad(x, {l, r, t, b}): x1..x4 = top, left, and x's height and width
  def('pad', 'layer', { inputs = 1, args = 4, backward = function(n, g)
    local narrow = S.raw.narrow
    return narrow(narrow(g, 3, n.x1 + 1, n.x3), 4, n.x2 + 1, n.x4)
  end })

  -- conv2d(x, w, b): a = x, b = w; x1 the ln_conv2d_params, x2 the backend's
  -- saved state (or nil)
  def('conv2d', 'layer', { inputs = 3, args = 2, save_in = 2, backward = function(n, g)
    local x, w, st = n.a, n.b, n.x2
    local din = n[1] and new_like(x) or nil
    local dw = n[2] and new_like(w) or nil
    local db = n[3] and new1(g, w.p.shape[0]) or nil
    if st then
      check(C.ln_conv2d_backward_saved(din and din.p, dw and dw.p, db and db.p, g.p, x.p, w.p, st.p, n.x1))
    else
      check(C.ln_conv2d_backward(din and din.p, dw and dw.p, db and db.p, g.p, x.p, w.p, n.x1))
    end
    return din, dw, db
  end })

  -- conv_transpose2d(x, w, b): a = x, b = w; x1 the ln_conv2d_params of the
  -- convolution from the output back to x, x2, x3 the output rows and columns
  -- that convolution covers (fewer than the output's when output_padding >=
  -- stride: the rest got only the bias). Input gradient: that convolution of
  -- g; weight gradient: its weight gradient with g as its input and x as its
  -- output gradient; bias gradient: g summed over N, H, W.
  def('conv_transpose2d', 'layer', { inputs = 3, args = 3, save_in = 2, backward = function(n, g)
    local x, w, p = n.a, n.b, n.x1
    local gk = g
    if n.x2 ~= tonumber(g.p.shape[2]) or n.x3 ~= tonumber(g.p.shape[3]) then
      gk = S.raw.narrow(S.raw.narrow(g, 3, 1, n.x2), 4, 1, n.x3)
    end
    local dx, dw, db
    if n[1] then
      dx = new_like(x)
      check(C.ln_conv2d_forward(dx.p, gk.p, w.p, nil, p))
    end
    if n[2] then
      dw = new_like(w)
      check(C.ln_conv2d_backward(nil, dw.p, nil, x.p, gk.p, w.p, p))
    end
    if n[3] then
      shape_buf[0], shape_buf[1], shape_buf[2] = g.p.shape[0], g.p.shape[1], g.p.shape[2] * g.p.shape[3]
      local g3 = wrap(C.ln_reshape(g.p, 3, shape_buf))
      local s = wrap(C.ln_reduce(C.LN_RSUM, g3.p, 2, 0, 0, nil))
      db = wrap(C.ln_reduce(C.LN_RSUM, s.p, 0, 0, 0, nil))
    end
    return dx, dw, db
  end })

  -- max_pool2d(x): a = x; x1 the indices, x2 the ln_pool2d_params
  def('max_pool2d', 'layer', { inputs = 1, args = 2, save_in = 1, backward = function(n, g)
    local din = new_like(n.a)
    check(C.ln_maxpool2d_backward(din.p, g.p, n.x1.p, n.x2))
    return din
  end })

  -- avg_pool2d(x): x1 the ln_pool2d_params, x2, x3 x's height and width
  def('avg_pool2d', 'layer', { inputs = 1, args = 3, backward = function(n, g)
    local din = new_nchw(g, n.x2, n.x3)
    check(C.ln_avgpool2d_backward(din.p, g.p, n.x1))
    return din
  end })

  -- adaptive_avg_pool2d(x): x1, x2 x's height and width
  def('adaptive_avg_pool2d', 'layer', { inputs = 1, args = 2, backward = function(n, g)
    local din = new_nchw(g, n.x1, n.x2)
    check(C.ln_adaptive_avgpool2d_backward(din.p, g.p))
    return din
  end })

  -- interpolate(x): x1 the mode (LN_INTERP_*), x2 align_corners (1/0), x3
  -- the scales (double[3]), x4 x's size
  local shape5 = ffi.new('int64_t[5]')
  def('interpolate', 'layer', { inputs = 1, args = 4, backward = function(n, g)
    local s = n.x4
    for i = 1, #s do shape5[i - 1] = s[i] end
    local din = wrap(C.ln_empty(#s, shape5, g.p.dtype_id, g.p.device_id))
    check(C.ln_interpolate_backward(din.p, g.p, n.x1, n.x2, n.x3))
    return din
  end })

  -- grid_sample(x, grid): a = x, b = grid; x1, x2 the mode and padding
  -- (LN_GRID_*), x3 align_corners (1/0)
  def('grid_sample', 'layer', { inputs = 3, args = 3, save_in = 2, backward = function(n, g)
    local dx = n[1] and new_like(n.a) or nil
    local dgrid = n[2] and new_like(n.b) or nil
    check(C.ln_grid_sample_backward(dx and dx.p, dgrid and dgrid.p, g.p, n.a.p, n.b.p, n.x1, n.x2, n.x3))
    return dx, dgrid
  end })

  -- batch norm (x, weight, bias): a = x, b = weight (or nil); x1, x2 the
  -- batch's mean and 1/std (or the running ones in eval), x3 training (1/0),
  -- x4 eps
  local function bn_grads(n)
    local x, w = n.a, n.b
    return n[1] and new_like(x) or nil, n[2] and new_like(w) or nil, n[3] and new_like(w) or nil
  end
  def('batch_norm', 'layer', { inputs = 3, args = 4, save_in = 2, backward = function(n, g)
    local din, dw, db = bn_grads(n)
    local w = n.b
    check(C.ln_batchnorm_backward(din and din.p, dw and dw.p, db and db.p, g.p, n.a.p, w and w.p,
      n.x1.p, n.x2.p, n.x3))
    return din, dw, db
  end })
  -- relu(batch_norm(...)): the output r masks the gradient
  def('batch_norm_relu', 'layer', { inputs = 3, args = 4, save_in = 2, save_out = true, backward = function(n, g)
    local din, dw, db = bn_grads(n)
    local w = n.b
    check(C.ln_batchnorm_relu_backward(din and din.p, dw and dw.p, db and db.p, g.p, n.r.p, n.a.p, w and w.p,
      n.x1.p, n.x2.p, n.x3))
    return din, dw, db
  end })
  -- relu(batch_norm(x, ...) + residual): the residual (input 4) gets the
  -- masked gradient too; four edges, so the gradients go back as a list
  def('batch_norm_add_relu', 'layer', { inputs = 4, args = 4, save_in = 2, save_out = true, backward = function(n, g)
    local din, dw, db = bn_grads(n)
    local w = n.b
    local dr = n[4] and new_like(n.a) or nil
    check(C.ln_batchnorm_add_relu_backward(din and din.p, dw and dw.p, db and db.p, dr and dr.p, g.p, n.r.p,
      n.a.p, w and w.p, n.x1.p, n.x2.p, n.x3))
    return { din or false, dw or false, db or false, dr or false }
  end })

  -- softmax / log_softmax over dim x1 (0-based): from the output r
  local function softmax_bw(n, g)
    local din = new_like(g)
    check(C.ln_softmax_backward(din.p, g.p, n.r.p, n.x1, n.x2))
    return din
  end
  def('softmax', 'layer', { inputs = 1, args = 2, save_out = true, backward = softmax_bw })      -- x2 = 0
  def('log_softmax', 'layer', { inputs = 1, args = 2, save_out = true, backward = softmax_bw })  -- x2 = 1

  -- nll_loss(logp (N, C)): a = logp (for its shape); x1 the int64 target,
  -- x2 the class weights (or nil), x3 the reduction (0 none, 1 mean, 2 sum),
  -- x4 ignore_index
  def('nll_loss', 'layer', { inputs = 1, args = 4, save_in = 1, backward = function(n, g)
    local d = new_like(n.a)
    local w = n.x2
    check(C.ln_nll_loss_backward(d.p, g.p, n.x1.p, w and w.p, n.x3, n.x4, 1))
    return d
  end })

  -- linear(x (N, in), w (out, in), b (out)): a = x, b = w. The transposes
  -- are C views freed at once and the bias gradient one column sum (as
  -- transpose + addmm nodes, a Linear cost 3-4x the host time per step)
  def('linear', 'layer', { inputs = 3, save_in = 2, backward = function(n, g)
    local gx, gw, gb
    if n[1] then gx = wrap(C.ln_matmul(g.p, n.b.p)) end                -- (N, out) @ (out, in)
    if n[2] then                                                          -- (out, N) @ (N, in)
      local gt = C.ln_transpose(g.p, 0, 1)
      local r = gt ~= nil and C.ln_matmul(gt, n.a.p) or nil
      C.ln_tensor_free(gt)
      gw = wrap(r)
    end
    if n[3] then gb = wrap(C.ln_reduce(C.LN_RSUM, g.p, 0, 0, 0, nil)) end
    return gx, gw, gb
  end })
end
