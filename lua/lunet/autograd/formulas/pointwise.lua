-- lunet.autograd.formulas.pointwise: pointwise ops: unary functions, clamp, the arithmetic of two operands
-- (broadcasting, a number on either side), maximum/minimum, where.
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local C = core.C
local wrap = T.wrap
local sum_to, node, edge, attach, saved, needs, bshape =
  G.sum_to, G.node, G.edge, G.attach, G.saved, G.needs, G.bshape

return function(def, unary)
  -- ---- elementwise ------------------------------------------------------------------------

  unary('neg', function(n, g) return -g end)
  unary('exp', function(n, g) return g * n.r end, 'out')
  unary('log', function(n, g) return g / n.a end, 'in')
  unary('sqrt', function(n, g) return g * 0.5 / n.r end, 'out')
  unary('rsqrt', function(n, g) local r = n.r; return g * (r * r * r) * -0.5 end, 'out')
  -- tanh, sigmoid: torch's tanh_backward, sigmoid_backward kernels, from the
  -- output (their create_graph forms: lunet.autograd.double)
  unary('tanh', function(n, g) return wrap(C.ln_binary(C.LN_TANH_BWD, n.r.p, g.p)) end, 'out')
  unary('sigmoid', function(n, g) return wrap(C.ln_binary(C.LN_SIGMOID_BWD, n.r.p, g.p)) end, 'out')
  local has_relu_bw = pcall(function() return C.ln_relu_backward end)
  unary('relu', function(n, g)
    local r = n.r
    if has_relu_bw then
      local d = wrap(C.ln_empty(r.p.ndim, r.p.shape, r.p.dtype_id, r.p.device_id))
      T.check(C.ln_relu_backward(d.p, g.p, r.p))
      return d
    end
    return g * r:gt(0):to(g.dtype)
  end, 'out')
  unary('abs', function(n, g) return g * n.a:sign() end, 'in')
  unary('sin', function(n, g) return g * n.a:cos() end, 'in')
  unary('cos', function(n, g) return -g * n.a:sin() end, 'in')
  unary('reciprocal', function(n, g) local r = n.r; return -g * (r * r) end, 'out')
  unary('log1p', function(n, g) return g / (n.a + 1) end, 'in')
  unary('expm1', function(n, g) return g * (n.r + 1) end, 'out')
  unary('square', function(n, g) return g * n.a * 2 end, 'in')
  unary('erf', function(n, g) local a = n.a; return g * (a * a):neg():exp() * (2 / math.sqrt(math.pi)) end, 'in')
  -- (torch's derivatives.yaml: the inverse functions' derivatives are
  -- infinite or NaN at and past their domain's edges, as there)
  unary('sinh', function(n, g) return g * n.a:cosh() end, 'in')
  unary('cosh', function(n, g) return g * n.a:sinh() end, 'in')
  unary('asinh', function(n, g) local a = n.a; return g * (a * a + 1):rsqrt() end, 'in')
  unary('acosh', function(n, g) local a = n.a; return g * (a * a - 1):rsqrt() end, 'in')
  unary('atanh', function(n, g) local a = n.a; return g / (1 - a * a) end, 'in')
  unary('asin', function(n, g) local a = n.a; return g * (1 - a * a):rsqrt() end, 'in')
  unary('acos', function(n, g) local a = n.a; return -g * (1 - a * a):rsqrt() end, 'in')
  unary('atan', function(n, g) local a = n.a; return g / (a * a + 1) end, 'in')
  unary('log2', function(n, g) return g / (n.a * math.log(2)) end, 'in')
  unary('log10', function(n, g) return g / (n.a * math.log(10)) end, 'in')
  unary('exp2', function(n, g) return g * n.r * math.log(2) end, 'out')
  unary('trunc', function(n, g) return require('lunet.factory').zeros_like(g) end)   -- (zeros, even where g is inf or NaN)
  unary('frac', function(n, g) return g end)
  -- the special functions (lunet.tensor_special): d lgamma = digamma, d digamma = trigamma
  unary('lgamma', function(n, g) return g * n.a:digamma() end, 'in')
  unary('digamma', function(n, g) return g * n.a:polygamma(1) end, 'in')
  unary('erfc', function(n, g) local a = n.a; return g * (a * a):neg():exp() * (-2 / math.sqrt(math.pi)) end, 'in')
  unary('erfinv', function(n, g) local r = n.r; return g * (r * r):exp() * (math.sqrt(math.pi) / 2) end, 'out')
  def('polygamma', 'unary', { save_in = true, args = true, backward = function(n, g)
    if n.x1 == 0 then return g * n.a:polygamma(1) end
    error(('polygamma: the gradient of polygamma(%d) needs polygamma(%d), which is not implemented'):format(n.x1, n.x1 + 1), 0)
  end })
  -- composed of recorded ops: entries that make xlogy_ and copysign_ differentiable
  for _, name in ipairs({ 'xlogy', 'copysign' }) do def(name, 'custom', { make = function(orig) return orig end }) end

  -- logit(eps): 1 / (a (1 - a)); with eps >= 0 zero outside [eps, 1 - eps],
  -- without NaN outside [0, 1] (as torch's logit_backward)
  def('logit', 'unary', { save_in = true, args = true, backward = function(n, g)
    local a, eps = n.a, n.x1
    local d = g / (a * (1 - a))
    if eps and eps >= 0 then
      return S.raw.where(0, a:lt(eps):logical_or(a:gt(1 - eps)), d)
    end
    return S.raw.where(0 / 0, a:lt(0):logical_or(a:gt(1)), d)
  end })

  -- clamp(lo, hi): the gradient passes where lo <= a <= hi
  def('clamp', 'unary', { save_in = true, args = true, backward = function(n, g)
    local a, m = n.a, nil
    if n.x1 then m = a:ge(n.x1) end
    if n.x2 then local h = a:le(n.x2); m = m and m:logical_and(h) or h end
    if not m then return g end
    return g * m:to(g.dtype)
  end })

  def('add', 'binary', { backward = function(n, g)
    local ga, gb
    if n[1] then ga = sum_to(g, n.sa) end
    if n[2] then gb = sum_to(n.c and n.c ~= 1 and g * n.c or g, n.sb) end
    return ga, gb
  end })

  def('sub', 'binary', { backward = function(n, g)
    local ga, gb
    if n[1] then ga = sum_to(g, n.sa) end
    if n[2] then gb = sum_to(g * -(n.c or 1), n.sb) end
    return ga, gb
  end })

  -- (a broadcast input's gradient: the full-size product summed down, then
  -- freed, lunet.nn.eager; a squeeze-excitation block's scale)
  local eager
  local function summed(t, shape)
    local r = sum_to(t, shape)
    eager = eager or require 'lunet.nn.eager'
    if not rawequal(r, t) and eager.active() then eager.consumed(t, r) end
    return r
  end
  def('mul', 'binary', { save = true, backward = function(n, g)
    local a, b, ga, gb = n.a, n.b, nil, nil
    if n[1] then ga = summed(g * b, n.sa) end
    if n[2] then gb = summed(g * a, n.sb) end
    return ga, gb
  end })

  def('div', 'binary', { save = 'out', backward = function(n, g)
    local a, b, ga, gb = n.a, n.b, nil, nil
    if n[1] then ga = sum_to(g / b, n.sa) end
    if n[2] then gb = sum_to(-(g * n.r) / b, n.sb) end
    return ga, gb
  end })

  def('pow', 'binary', { save = 'out', backward = function(n, g)
    local a, b, ga, gb = n.a, n.b, nil, nil
    if n[1] then
      if type(b) == 'number' then
        if b == 0 then ga = g * 0 else ga = g * b * a:pow(b - 1) end
      else
        ga = sum_to(g * b * a:pow(b - 1), n.sa)
      end
    end
    if n[2] then
      local la = type(a) == 'number' and math.log(a) or a:log()
      gb = sum_to(g * n.r * la, n.sb)
    end
    return ga, gb
  end })

  -- hypot: a / r and b / r (NaN at a = b = 0, as in torch)
  def('hypot', 'binary', { save = 'out', backward = function(n, g)
    local a, b, ga, gb = n.a, n.b, nil, nil
    if n[1] then ga = sum_to(g * a / n.r, n.sa) end
    if n[2] then gb = sum_to(g * b / n.r, n.sb) end
    return ga, gb
  end })

  -- fmod: a - trunc(a / b) * b, so 1 and -trunc(a / b) (remainder, made of
  -- fmod and a where, gets -floor(a / b) from it, as torch's)
  def('fmod', 'binary', { save = true, backward = function(n, g)
    local a, b, ga, gb = n.a, n.b, nil, nil
    if n[1] then ga = sum_to(g, n.sa) end
    if n[2] then gb = sum_to(-g * (a / b):trunc(), n.sb) end
    return ga, gb
  end })

  -- atan2(a, b): b / (a^2 + b^2) and -a / (a^2 + b^2)
  def('atan2', 'binary', { save = true, backward = function(n, g)
    local a, b, ga, gb = n.a, n.b, nil, nil
    local r2 = a * a + b * b
    if n[1] then ga = sum_to(g * b / r2, n.sa) end
    if n[2] then gb = sum_to(-g * a / r2, n.sb) end
    return ga, gb
  end })

  -- logaddexp(2): each operand's share, 1 / (1 + e^(other - it)) (base 2
  -- for logaddexp2)
  local function logaddexp_bw(pow)
    return function(n, g)
      local a, b, ga, gb = n.a, n.b, nil, nil
      if n[1] then ga = sum_to(g / (pow(b - a) + 1), n.sa) end
      if n[2] then gb = sum_to(g / (pow(a - b) + 1), n.sb) end
      return ga, gb
    end
  end
  def('logaddexp', 'binary', { save = true, backward = logaddexp_bw(function(t) return t:exp() end) })
  def('logaddexp2', 'binary', { save = true, backward = logaddexp_bw(function(t) return t:exp2() end) })

  -- igamma(a, x) (igammac: negated): d/dx = x^(a-1) e^-x / Gamma(a), torch's
  -- formula; d/da has no closed form and torch 1.13 has none either
  local function igamma_bw(name, sign)
    return function(n, g)
      local a, x = n.a, n.b
      if n[1] then error(("%s: the derivative for 'input' (a) is not implemented (only for x, as in torch)"):format(name), 0) end
      if type(x) == 'number' then return nil, nil end
      if type(a) == 'number' then a = require('lunet.factory').tensor(a, { dtype = x.dtype, device = x.device }) end
      local d = (x:log() * (a - 1) - x - a:lgamma()):exp()
      return nil, sum_to(g * d * sign, n.sb)
    end
  end
  def('igamma', 'binary', { save = true, backward = igamma_bw('igamma', 1) })
  def('igammac', 'binary', { save = true, backward = igamma_bw('igammac', -1) })

  -- maximum/minimum: ties share the gradient evenly
  local function minmax(name, cmp)
    def(name, 'binary', { save = true, backward = function(n, g)
      local a, b = n.a, n.b
      local ga, gb
      if type(b) == 'number' or type(a) == 'number' then
        local t, s = a, b
        if type(a) == 'number' then t, s = b, a end
        local w = t[cmp](t, s):to(g.dtype) + t:eq(s):to(g.dtype) * 0.5
        if type(a) == 'number' then gb = g * w else ga = g * w end
        return ga, gb
      end
      local w = a[cmp](a, b):to(g.dtype) + a:eq(b):to(g.dtype) * 0.5
      if n[1] then ga = sum_to(g * w, n.sa) end
      if n[2] then gb = sum_to(g * (1 - w), n.sb) end
      return ga, gb
    end })
  end
  minmax('maximum', 'gt')
  minmax('minimum', 'lt')

  -- a:where(cond, b)
  local function where_bw(n, g)
    local cond, ga, gb = n.cond, nil, nil
    local z = g * 0
    if n[1] then ga = sum_to(S.raw.where(g, cond, z), n.sa) end
    if n[2] then gb = sum_to(S.raw.where(z, cond, g), n.sb) end
    return ga, gb
  end
  def('where', 'custom', { backward = where_bw, make = function(orig)
    return function(a, cond, b)
      if not S.grad_enabled or not (needs(a) or needs(b)) then return orig(a, cond, b) end
      a, b = T.where_operands(a, cond, b)   -- (a Lua number beside: a 0-d tensor)
      local r = orig(a, cond, b)
      local n = node(where_bw, 'where', edge(a), edge(b))
      n.cond, n.sa, n.sb = saved(cond), bshape(a, r), bshape(b, r)
      return attach(r, n)
    end
  end })
end
