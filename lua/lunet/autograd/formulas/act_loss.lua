-- lunet.autograd.formulas.act_loss: the activations and losses of
-- lunet.nn.functional (silu, hardswish, hardsigmoid, elu,
-- relu6, softplus, mish, prelu; l1, smooth_l1, huber, binary_cross_entropy,
-- kl_div), kind 'layer'. Each backward is PyTorch 1.13's formula (its
-- derivatives.yaml and CPU backward kernels), boundaries included: relu6's
-- gradient is 0 at 0 and 6 (hardtanh_backward), hardswish's -0.5 at -3,
-- smooth_l1 with beta = 0 gives -1 where input == target, BCE's input
-- gradient is (x - y) / max(x (1 - x), 1e-12) rather than the derivative of
-- its clamped logs. n.a is the input (save_in), n.b the second saved tensor
-- (weight or target), x1..x4 the forward's arguments (named at each entry).
local G = require 'lunet.autograd.graph'
local ffi = require 'ffi'
local C = require('lunet.core').C
local wrap = require('lunet.tensor').wrap

-- g f'(x) in one kernel (silu, gelu, mish, hardswish, hardsigmoid, softplus,
-- elu: PyTorch's backward kernels, recomputed from the input; their
-- create_graph forms: lunet.autograd.double); p0..p2 the op's parameters
local function act_bwd(op, x, g, p0, p1, p2)
  if p0 then return wrap(C.ln_binary_p(op, x.p, g.p, p0, p1, p2 or 0)) end
  return wrap(C.ln_binary(op, x.p, g.p))
end

-- binary_cross_entropy_backward divides by at least the float 1e-12f, for doubles too
local EPS_F = tonumber(ffi.new('float', 1e-12))

-- the gradient of an elementwise loss: d (the loss's derivative, per
-- element) times g, as the reduction x1 asks (0 none, 1 mean, 2 sum, 3 a sum
-- divided by x2: kl_div's batchmean)
local function reduced(d, g, red, div)
  if red == 1 then return d * (g / d:numel()) end
  if red == 3 then return d * (g / div) end
  return d * g
end

return function(def)
  def('silu', 'layer', { inputs = 1, save_in = 1, backward = function(n, g)
    return act_bwd(C.LN_SILU_BWD, n.a, g)
  end })

  -- x1: true for approximate = 'tanh'
  def('gelu', 'layer', { inputs = 1, save_in = 1, args = 1, backward = function(n, g)
    return act_bwd(n.x1 and C.LN_GELU_TANH_BWD or C.LN_GELU_BWD, n.a, g)
  end })

  -- x < -3: 0; x <= 3: g (x / 3 + 1/2); else g (PyTorch's scalar loop and
  -- CUDA kernel; its vectorized CPU loop gives g at x = 3 exactly); NaN for NaN
  def('hardswish', 'layer', { inputs = 1, save_in = 1, backward = function(n, g)
    return act_bwd(C.LN_HARDSWISH_BWD, n.a, g)
  end })

  -- -3 < x < 3: g / 6 (the float 1/6, for doubles too, as torch), else 0
  def('hardsigmoid', 'layer', { inputs = 1, save_in = 1, backward = function(n, g)
    return act_bwd(C.LN_HARDSIGMOID_BWD, n.a, g)
  end })

  -- elu, celu, selu: x1 alpha, x2 scale, x3 input_scale; x <= 0: g input_scale
  -- alpha scale exp(input_scale x), else g scale (from the input, as torch's
  -- elu_backward with is_result = false; NaN for NaN, as its vector loop)
  def('elu', 'layer', { inputs = 1, save_in = 1, args = 3, backward = function(n, g)
    return act_bwd(C.LN_ELU_BWD, n.a, g, n.x1, n.x2, n.x3)
  end })

  -- hardtanh(x, 0, 6)'s: 0 where x <= 0 or x >= 6
  def('relu6', 'layer', { inputs = 1, save_in = 1, backward = function(n, g)
    local x = n.a
    return g:where(x:le(0):logical_or(x:ge(6)):logical_not(), 0)
  end })

  -- x1 beta, x2 threshold: g where beta x > threshold, else g z / (z + 1), z = exp(beta x)
  def('softplus', 'layer', { inputs = 1, save_in = 1, args = 2, backward = function(n, g)
    return act_bwd(C.LN_SOFTPLUS_BWD, n.a, g, n.x1, n.x2)
  end })

  def('mish', 'layer', { inputs = 1, save_in = 1, backward = function(n, g)
    return act_bwd(C.LN_MISH_BWD, n.a, g)
  end })

  -- prelu(x, w): a = x, b = w; x1 the shape w broadcasts as (w's values
  -- over dim 2 of x, or one value for all)
  def('prelu', 'layer', { inputs = 3, save_in = 2, args = 1, backward = function(n, g)
    local x, w = n.a, n.b
    local pos = x:gt(0)
    local dx, dw
    if n[1] then dx = g:where(pos, g * w:reshape(n.x1)) end
    if n[2] then dw = G.sum_to((x * g):where(pos:logical_not(), 0), n.x1):reshape(w:size()) end
    return dx, dw
  end })

  -- the losses: a = input, b = target; x1 the reduction

  def('l1_loss', 'layer', { inputs = 3, save_in = 2, args = 1, backward = function(n, g)
    local d = reduced((n.a - n.b):sign(), g, n.x1)
    return n[1] and d or nil, n[2] and -d or nil
  end })

  -- x2 beta: -1 where d <= -beta, 1 where d >= beta, else d / beta (d the
  -- difference, target - input for the target's)
  local function smooth(d, beta)
    return (d / beta):where(d:lt(beta), 1):where(d:gt(-beta), -1)
  end
  def('smooth_l1_loss', 'layer', { inputs = 3, save_in = 2, args = 2, backward = function(n, g)
    local x, y = n.a, n.b
    return n[1] and reduced(smooth(x - y, n.x2), g, n.x1) or nil,
      n[2] and reduced(smooth(y - x, n.x2), g, n.x1) or nil
  end })

  -- x2 delta: -delta where d <= -delta, delta where d >= delta, else d
  local function huber(d, delta)
    return d:where(d:lt(delta), delta):where(d:gt(-delta), -delta)
  end
  def('huber_loss', 'layer', { inputs = 3, save_in = 2, args = 2, backward = function(n, g)
    local x, y = n.a, n.b
    return n[1] and reduced(huber(x - y, n.x2), g, n.x1) or nil,
      n[2] and reduced(huber(y - x, n.x2), g, n.x1) or nil
  end })

  -- x2 the weight (or nil). Input: g w (x - y) / max(x (1 - x), 1e-12f);
  -- target: -g w logit(x) (binary_cross_entropy_target_backward); the weight
  -- gets none (non-differentiable in PyTorch)
  def('binary_cross_entropy', 'layer', { inputs = 3, save_in = 2, args = 2, backward = function(n, g)
    local x, y, w = n.a, n.b, n.x2
    local dx, dy
    if n[1] then
      dx = (x - y) / ((1 - x) * x):maximum(EPS_F)
      if w then dx = dx * w end
      dx = reduced(dx, g, n.x1)
    end
    if n[2] then
      dy = -(x / (1 - x)):log()
      if w then dy = dy * w end
      dy = reduced(dy, g, n.x1)
    end
    return dx, dy
  end })

  -- x1 the reduction (3: batchmean, a sum over x3), x2 log_target. As
  -- PyTorch's composite kl_div: the target's gradient is NaN where it is 0
  -- (xlogy's t / t) when not log_target
  def('kl_div', 'layer', { inputs = 3, save_in = 2, args = 3, backward = function(n, g)
    local x, t = n.a, n.b
    local dx, dt
    if n.x2 then
      local e = t:exp()
      if n[1] then dx = reduced(-e, g, n.x1, n.x3) end
      if n[2] then dt = reduced(e * (t - x + 1), g, n.x1, n.x3) end
    else
      if n[1] then dx = reduced(-t, g, n.x1, n.x3) end
      if n[2] then dt = reduced(t:log():where(t:ne(0), 0) + t / t - x, g, n.x1, n.x3) end
    end
    return dx, dt
  end })
end
