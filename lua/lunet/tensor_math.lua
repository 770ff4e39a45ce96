-- lunet.tensor_math: elementwise arithmetic, comparisons, casts, device
-- moves, matrix products and reductions as Tensor methods and operators.
local ffi = require 'ffi'
local core = require 'lunet.core'
local raise = require('lunet.options').raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local check_options = require('lunet.options').check
local C = core.C
local Tensor, mt, wrap, check, is_tensor = T.Tensor, T.mt, T.wrap, T.check, T.is_tensor

local need_tensor = require('lunet.options').need_tensor
-- (the C tensor of x)
local function need(fn, x, what) return need_tensor(fn, x, what).p end

local function num(x)
  if type(x) == 'boolean' then return x and 1 or 0 end
  return x
end

-- ---- unary -----------------------------------------------------------------------

local unary_ops = {
  neg = C.LN_NEG, abs = C.LN_ABS, exp = C.LN_EXP, log = C.LN_LOG, sqrt = C.LN_SQRT,
  tanh = C.LN_TANH, sigmoid = C.LN_SIGMOID, relu = C.LN_RELU, sin = C.LN_SIN, cos = C.LN_COS,
  rsqrt = C.LN_RSQRT, sign = C.LN_SIGN, floor = C.LN_FLOOR, ceil = C.LN_CEIL,
  round = C.LN_ROUND, reciprocal = C.LN_RECIPROCAL, log1p = C.LN_LOG1P, expm1 = C.LN_EXPM1,
  square = C.LN_SQUARE, logical_not = C.LN_LOGICAL_NOT, isnan = C.LN_ISNAN,
  isinf = C.LN_ISINF, erf = C.LN_ERF, sinh = C.LN_SINH, cosh = C.LN_COSH, asinh = C.LN_ASINH,
  acosh = C.LN_ACOSH, atanh = C.LN_ATANH, asin = C.LN_ASIN, acos = C.LN_ACOS, atan = C.LN_ATAN,
  log2 = C.LN_LOG2, log10 = C.LN_LOG10, exp2 = C.LN_EXP2, trunc = C.LN_TRUNC, frac = C.LN_FRAC,
  lgamma = C.LN_LGAMMA, digamma = C.LN_DIGAMMA, erfc = C.LN_ERFC, erfinv = C.LN_ERFINV, signbit = C.LN_SIGNBIT,
  bitwise_not = C.LN_BITWISE_NOT,
}
-- the ops that keep an integer input's dtype (c/ops/elementwise.c's int_ok);
-- the others compute in a float dtype
local KEEPS_INT = { neg = true, abs = true, relu = true, sign = true, square = true, floor = true,
  ceil = true, round = true, trunc = true, logical_not = true, isnan = true, isinf = true, frac = true,
  bitwise_not = true }
for name, op in pairs(unary_ops) do
  local keeps_int = KEEPS_INT[name]
  Tensor[name] = function(self)
    local p = need(name, self, 'input')
    -- an integer (or bool) input promotes to the default float dtype, as in
    -- PyTorch (the kernel's own promotion is to float32)
    if not keeps_int and core.default_dtype == 1 and p.dtype_id >= 2 and p.dtype_id <= 5 then
      return wrap(C.ln_unary(op, wrap(C.ln_cast(p, 1)).p))
    end
    return wrap(C.ln_unary(op, p))
  end
  if name ~= 'logical_not' and name ~= 'isnan' and name ~= 'isinf' and name ~= 'signbit' then
    Tensor[name .. '_'] = function(self)
      check(C.ln_unary_(op, need(name .. '_', self, 'input')))
      return self
    end
  end
end

-- torch.clamp's bounds: at least one, each a number or nil
local function bounds(fn, lo, hi)
  if lo == nil and hi == nil then raise(fn .. ': at least one of min and max must be given') end
  if (lo ~= nil and type(lo) ~= 'number') or (hi ~= nil and type(hi) ~= 'number') then
    raise(('%s: min and max must be numbers or nil, got %s and %s'):format(fn, typename(lo), typename(hi)))
  end
  return lo or -math.huge, hi or math.huge
end

function Tensor.clamp(self, lo, hi)
  local p = need('clamp', self, 'input')
  lo, hi = bounds('clamp', lo, hi)
  return wrap(C.ln_clamp(p, lo, hi))
end
function Tensor.clamp_(self, lo, hi)
  local p = need('clamp_', self, 'input')
  lo, hi = bounds('clamp_', lo, hi)
  check(C.ln_clamp_(p, lo, hi))
  return self
end

-- ---- binary ----------------------------------------------------------------------

local binary_ops = {
  add = C.LN_ADD, sub = C.LN_SUB, mul = C.LN_MUL, div = C.LN_DIV, pow = C.LN_POW,
  maximum = C.LN_MAXIMUM, minimum = C.LN_MINIMUM, eq = C.LN_EQ, ne = C.LN_NE, lt = C.LN_LT,
  le = C.LN_LE, gt = C.LN_GT, ge = C.LN_GE, logical_and = C.LN_LOGICAL_AND,
  logical_or = C.LN_LOGICAL_OR, fmod = C.LN_FMOD, atan2 = C.LN_ATAN2, hypot = C.LN_HYPOT,
  logaddexp = C.LN_LOGADDEXP, logaddexp2 = C.LN_LOGADDEXP2, igamma = C.LN_IGAMMA, igammac = C.LN_IGAMMAC,
  bitwise_and = C.LN_BITWISE_AND, bitwise_or = C.LN_BITWISE_OR, bitwise_xor = C.LN_BITWISE_XOR,
  bitwise_left_shift = C.LN_BITWISE_LSHIFT, bitwise_right_shift = C.LN_BITWISE_RSHIFT,
  gcd = C.LN_GCD, lcm = C.LN_LCM,
}

local function binary(name, op)
  return function(a, b)
    local tb = type(b)
    if tb == 'number' or tb == 'boolean' then
      return wrap(C.ln_binary_scalar(op, need(name, a, 'first argument'), num(b), 0))
    end
    local ta = type(a)
    if ta == 'number' or ta == 'boolean' then
      return wrap(C.ln_binary_scalar(op, need(name, b, 'second argument'), num(a), 1))
    end
    return wrap(C.ln_binary(op, need(name, a, 'first argument'), need(name, b, 'second argument')))
  end
end

local function binary_inplace(name, op)
  return function(a, b)
    local tb = type(b)
    if tb == 'number' or tb == 'boolean' then
      check(C.ln_binary_scalar_(op, need(name, a, 'first argument'), num(b)))
    else
      check(C.ln_binary_(op, need(name, a, 'first argument'), need(name, b, 'second argument')))
    end
    return a
  end
end

local NO_INPLACE = { logaddexp = true, logaddexp2 = true }   -- (torch has no logaddexp_)
for name, op in pairs(binary_ops) do
  Tensor[name] = binary(name, op)
  if (op < C.LN_EQ or op > C.LN_LOGICAL_OR) and not NO_INPLACE[name] then
    Tensor[name .. '_'] = binary_inplace(name .. '_', op)
  end
end

-- the bitwise ops, gcd and lcm take a Lua boolean as a bool scalar (a bool
-- tensor and true stay bool, as torch's bool_t & True); a number operand
-- goes to the kernel as is (it takes the tensor's integer dtype)
local BOOL_SCALAR = { 'bitwise_and', 'bitwise_or', 'bitwise_xor', 'bitwise_left_shift', 'bitwise_right_shift',
  'gcd', 'lcm' }
local function bool_scalar(v, ref)   -- a 0-d bool tensor on ref's device
  local t = wrap(C.ln_empty(0, nil, core.dtype_ids.bool, ref.p.device_id))
  check(C.ln_fill_(t.p, v and 1 or 0))
  return t
end
for _, name in ipairs(BOOL_SCALAR) do
  for _, nm in ipairs({ name, name .. '_' }) do
    local plain = Tensor[nm]
    Tensor[nm] = function(a, b)
      if type(b) == 'boolean' and is_tensor(a) then b = bool_scalar(b, a) end
      if type(a) == 'boolean' and is_tensor(b) and nm == name then a = bool_scalar(a, b) end
      return plain(a, b)
    end
  end
end

-- integer tensors to negative integer powers: an error (as in PyTorch and
-- NumPy) rather than a truncated result; checked for Lua number exponents
-- (a tensor of exponents is not read back to the host for it)
for _, name in ipairs({ 'pow', 'pow_' }) do
  local plain = Tensor[name]
  Tensor[name] = function(a, b)
    if type(b) == 'number' and b < 0 and is_tensor(a) and not Tensor.is_floating_point(a) and a.dtype ~= 'bool' then
      raise(('%s: integers to negative integer powers are not allowed (exponent %s on %s; convert to float first)')
        :format(name, tostring(b), a.dtype))
    end
    return plain(a, b)
  end
end

-- add/sub with alpha: a + alpha*b (torch.add(a, b, alpha=...))
local plain_add, plain_sub, plain_add_, plain_sub_ = Tensor.add, Tensor.sub, Tensor.add_, Tensor.sub_
local function need_alpha(fn, alpha)
  if type(alpha) ~= 'number' then raise(('%s: alpha must be a number, got %s'):format(fn, typename(alpha))) end
end
function Tensor.add(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_add(a, b) end
  need_alpha('add', alpha)
  if type(b) == 'number' then return plain_add(a, b * alpha) end
  need('add', a, 'first argument')
  local r = a:clone()
  check(C.ln_add_scaled_(r.p, need('add', b, 'second argument'), alpha))
  return r
end
function Tensor.sub(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_sub(a, b) end
  need_alpha('sub', alpha)
  if type(b) ~= 'number' then need('sub', b, 'second argument') end
  return Tensor.add(a, b, -alpha)
end
function Tensor.add_(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_add_(a, b) end
  need_alpha('add_', alpha)
  if type(b) == 'number' then return plain_add_(a, b * alpha) end
  check(C.ln_add_scaled_(need('add_', a, 'first argument'), need('add_', b, 'second argument'), alpha))
  return a
end
function Tensor.sub_(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_sub_(a, b) end
  need_alpha('sub_', alpha)
  if type(b) ~= 'number' then need('sub_', b, 'second argument') end
  return Tensor.add_(a, b, -alpha)
end

mt.__add = function(a, b) return Tensor.add(a, b) end
mt.__sub = function(a, b) return Tensor.sub(a, b) end
mt.__mul = function(a, b) return Tensor.mul(a, b) end
mt.__div = function(a, b) return Tensor.div(a, b) end
mt.__pow = function(a, b) return Tensor.pow(a, b) end
-- remainder (Python's and Lua's %): the sign of the divisor, unlike fmod
function Tensor.remainder(a, b)
  if type(b) ~= 'number' and not is_tensor(b) then
    raise('remainder: second argument must be a number or a tensor, got ' .. typename(b))
  end
  local r = Tensor.fmod(a, b)
  local neg_b = type(b) == 'number' and (b < 0) or (type(b) ~= 'number' and Tensor.lt(b, 0))
  local wrong                      -- r ~= 0 with the sign opposite to b's
  if type(neg_b) == 'boolean' then wrong = neg_b and Tensor.gt(r, 0) or Tensor.lt(r, 0)
  else wrong = Tensor.ne(r, 0):logical_and(Tensor.lt(r, 0):ne(neg_b)) end
  return Tensor.where(Tensor.add(r, b), wrong, r)
end
mt.__mod = function(a, b) return Tensor.remainder(a, b) end
mt.__unm = function(a) return Tensor.neg(a) end

-- A Lua number or boolean beside a tensor operand, as a 0-d tensor on ref's
-- device (PyTorch's rule for wrapped numbers: it takes ref's dtype, unless it
-- is a fraction and ref is integral: then float32; with no tensor operand,
-- int64, float32 or bool)
local function scalar_for(v, ref, dev)
  local tv = type(v)
  if tv ~= 'number' and tv ~= 'boolean' then return v end
  local dt
  if tv == 'boolean' then dt = ref and ref.dtype or 'bool'
  elseif ref then dt = (v % 1 ~= 0 and not Tensor.is_floating_point(ref)) and 'float32' or ref.dtype
  else dt = v % 1 == 0 and 'int64' or 'float32' end
  local t = wrap(C.ln_empty(0, nil, core.dtype_ids[dt], ref and ref.p.device_id or dev))
  check(C.ln_fill_(t.p, num(v)))
  return t
end

-- where's branches, a Lua number as a tensor (autograd's where uses it too)
function T.where_operands(a, cond, b)
  need('where', cond, 'condition')
  local ref = is_tensor(a) and a or is_tensor(b) and b or nil
  return scalar_for(a, ref, cond.p.device_id), scalar_for(b, ref, cond.p.device_id)
end

-- a:where(cond, b), lunet.where(cond, a, b): a where cond is true, else b;
-- a and b are tensors or Lua numbers (broadcast)
function Tensor.where(self, cond, other)  -- torch: a.where(cond, b)
  self, other = T.where_operands(self, cond, other)
  return wrap(C.ln_where(cond.p, need('where', self, 'input'), need('where', other, 'other')))
end

-- ---- fill, copy, casts, devices ---------------------------------------------------

function Tensor.fill_(self, v)
  if type(v) ~= 'number' and type(v) ~= 'boolean' then
    raise('fill_: value must be a number, got ' .. typename(v))
  end
  check(C.ln_fill_(need('fill_', self, 'tensor'), num(v)))
  return self
end
function Tensor.zero_(self) return Tensor.fill_(self, 0) end

function Tensor.copy_(self, src)
  check(C.ln_copy_(need('copy_', self, 'destination'), need('copy_', src, 'source')))
  return self
end

local function cast(self, dt)
  need('to', self, 'tensor')
  local id = core.dtype_id('to', dt)
  if self.p.dtype_id == id then return self end
  return wrap(C.ln_cast(need('to', self, 'tensor'), id))
end

local function move(self, dev)
  need('to', self, 'tensor')
  local id = core.device_id('to', dev)
  if self.p.device_id == id then return self end
  return wrap(C.ln_to_device(self.p, id))
end

-- t:to('float64'), t:to('cpu:1'), t:to(other), t:to{dtype=..., device=...}
local TO_OPTS = { dtype = true, device = true }
function Tensor.to(self, what, more)
  if is_tensor(what) then return cast(move(self, what.p.device_id), what.dtype) end
  if is_table(what) then
    check_options('to', what, TO_OPTS)
    local r = self
    if what.device then r = move(r, what.device) end
    if what.dtype then r = cast(r, what.dtype) end
    return r
  end
  if type(what) == 'string' and core.dtype_ids[what] then
    return cast(self, what)
  end
  local r = move(self, what)
  if more then r = cast(r, more) end
  return r
end
function Tensor.type(self, dt) if dt == nil then return self.dtype end return cast(self, dt) end
function Tensor.float(self) return cast(self, 'float32') end
function Tensor.double(self) return cast(self, 'float64') end
function Tensor.int(self) return cast(self, 'int32') end
function Tensor.long(self) return cast(self, 'int64') end
function Tensor.byte(self) return cast(self, 'uint8') end
function Tensor.bool(self) return cast(self, 'bool') end
function Tensor.half(self) return cast(self, 'float16') end
function Tensor.bfloat16(self) return cast(self, 'bfloat16') end
function Tensor.cpu(self, k)
  if k ~= nil and (type(k) ~= 'number' or k % 1 ~= 0) then
    raise(('cpu: device index must be an integer, got %s'):format(tostring(k)))
  end
  return move(self, 'cpu:' .. (k or 0))
end
function Tensor.cuda(self, k)
  if k ~= nil and (type(k) ~= 'number' or k % 1 ~= 0) then
    raise(('cuda: device index must be an integer, got %s'):format(tostring(k)))
  end
  return move(self, 'cuda:' .. (k or 0))
end

-- ---- matrix products ----------------------------------------------------------------

function Tensor.matmul(a, b)
  return wrap(C.ln_matmul(need('matmul', a, 'first argument'), need('matmul', b, 'second argument')))
end
function Tensor.mm(a, b)
  need('mm', a, 'first argument'); need('mm', b, 'second argument')
  if a.p.ndim ~= 2 or b.p.ndim ~= 2 then raise('mm: needs two 2-d tensors') end
  return Tensor.matmul(a, b)
end
function Tensor.mv(a, b)
  need('mv', a, 'first argument'); need('mv', b, 'second argument')
  if a.p.ndim ~= 2 or b.p.ndim ~= 1 then raise('mv: needs a 2-d and a 1-d tensor') end
  return Tensor.matmul(a, b)
end
function Tensor.dot(a, b)
  need('dot', a, 'first argument'); need('dot', b, 'second argument')
  if a.p.ndim ~= 1 or b.p.ndim ~= 1 then raise('dot: needs two 1-d tensors') end
  return Tensor.matmul(a, b)
end
function Tensor.bmm(a, b)
  return wrap(C.ln_bmm(need('bmm', a, 'first argument'), need('bmm', b, 'second argument')))
end
local ADDMM_OPTS = { alpha = 'number', beta = 'number' }
function Tensor.addmm(c, a, b, opts)
  local beta, alpha = 1, 1
  if opts then check_options('addmm', opts, ADDMM_OPTS); beta, alpha = opts.beta or 1, opts.alpha or 1 end
  return wrap(C.ln_addmm(need('addmm', c, 'input'), need('addmm', a, 'mat1'),
    need('addmm', b, 'mat2'), beta, alpha))
end

-- ---- logit, isclose, aliases ---------------------------------------------------------

-- the plain methods as defined here: logit and isclose compose them without
-- recording each step (logit records as one op: autograd.formulas.pointwise)
local plain = { lt = Tensor.lt, gt = Tensor.gt, where = Tensor.where, log = Tensor.log, div = Tensor.div,
  sub = Tensor.sub, mul = Tensor.mul, add = Tensor.add, abs = Tensor.abs, eq = Tensor.eq, le = Tensor.le,
  isnan = Tensor.isnan, isinf = Tensor.isinf, logical_or = Tensor.logical_or,
  logical_and = Tensor.logical_and, logical_not = Tensor.logical_not }

-- an integer or bool tensor as the default float dtype (PyTorch's promotion)
local function as_float(x)
  if x.p.dtype_id >= 2 and x.p.dtype_id <= 5 then
    return wrap(C.ln_cast(x.p, core.default_dtype == 1 and 1 or 0))
  end
  return x
end

-- t:logit([eps]) = log(z / (1 - z)), z = t with values below eps raised to
-- eps, then those above 1 - eps lowered to it (the order of PyTorch's
-- vectorized kernel: an eps over 0.5 gives logit(1 - eps) everywhere); no
-- eps, or a negative one, leaves t as it is
local function logit(fn, self, eps)
  need(fn, self, 'input')
  if eps ~= nil and (type(eps) ~= 'number' or eps ~= eps) then
    raise(fn .. ': eps must be a number or nil, got ' .. (type(eps) == 'number' and 'nan' or typename(eps)))
  end
  local z = as_float(self)
  if eps and eps >= 0 then
    local lo, hi = eps, 1 - eps
    z = plain.where(lo, plain.lt(z, lo), z)
    z = plain.where(hi, plain.gt(z, hi), z)
  end
  return plain.log(plain.div(z, plain.sub(1, z)))
end
function Tensor.logit(self, eps) return logit('logit', self, eps) end
function Tensor.logit_(self, eps)
  local r = logit('logit_', self, eps)
  if not Tensor.is_floating_point(self) then
    raise(("logit_: result type %s can't be stored in place into %s"):format(r.dtype, self.dtype))
  end
  check(C.ln_copy_(self.p, r.p))
  return self
end

-- lunet.isclose(a, b[, {rtol =, atol =, equal_nan =}]): |a - b| <= atol +
-- |rtol * b| elementwise (broadcasting), a bool tensor. As torch.isclose:
-- equal values (infinities too) are close, NaNs only with equal_nan, and a
-- and b must have one dtype.
local ISCLOSE_OPTS = { rtol = 'number', atol = 'number', equal_nan = 'boolean' }
function Tensor.isclose(a, b, opts)
  need('isclose', a, 'first argument'); need('isclose', b, 'second argument')
  local rtol, atol, equal_nan = 1e-5, 1e-8, false
  if opts ~= nil then
    if not is_table(opts) then raise('isclose: options must be a table, got ' .. typename(opts)) end
    check_options('isclose', opts, ISCLOSE_OPTS)
    if opts.rtol ~= nil then rtol = opts.rtol end
    if opts.atol ~= nil then atol = opts.atol end
    if opts.equal_nan ~= nil then equal_nan = opts.equal_nan end
  end
  if not (rtol >= 0) then raise(('isclose: rtol must be a number >= 0, got %s'):format(tostring(rtol))) end
  if not (atol >= 0) then raise(('isclose: atol must be a number >= 0, got %s'):format(tostring(atol))) end
  if a.dtype ~= b.dtype then
    raise(('isclose: a and b must have the same dtype, got %s and %s'):format(a.dtype, b.dtype))
  end
  local ok, close = pcall(plain.eq, a, b)   -- (shapes that do not broadcast, two devices: named as isclose)
  if not ok then raise('isclose: ' .. tostring(close):gsub('^.-eq: ', '', 1)) end
  if equal_nan then close = plain.logical_or(close, plain.logical_and(plain.isnan(a), plain.isnan(b))) end
  if rtol == 0 and atol == 0 then return close end
  a, b = as_float(a), as_float(b)
  local err = plain.abs(plain.sub(a, b))
  local finite = plain.logical_not(plain.logical_or(plain.isnan(err), plain.isinf(err)))
  local allowed = plain.add(plain.abs(plain.mul(b, rtol)), atol)
  return plain.logical_or(close, plain.logical_and(finite, plain.le(err, allowed)))
end

-- PyTorch's other names (NumPy's), with their in-place forms; errors name
-- the alias that was called. lunet.autograd installs them again once it has
-- wrapped the methods they stand for (and before it wraps the _ forms).
local ALIASES = { arcsin = 'asin', arccos = 'acos', arctan = 'atan', arcsinh = 'asinh',
  arccosh = 'acosh', arctanh = 'atanh', fix = 'trunc', sgn = 'sign' }   -- (sgn: sign for real tensors)
local function aliased(alias, name, f)
  local pat, repl = name .. '(_?): ', alias .. '%1: '
  return function(...)
    local ok, r = pcall(f, ...)
    if not ok then error(type(r) == 'string' and r:gsub(pat, repl, 1) or r, 0) end
    return r
  end
end
function T.install_aliases(Tensor)
  for alias, name in pairs(ALIASES) do
    Tensor[alias] = aliased(alias, name, Tensor[name])
    Tensor[alias .. '_'] = aliased(alias, name, Tensor[name .. '_'])
  end
end
T.install_aliases(Tensor)

return Tensor
