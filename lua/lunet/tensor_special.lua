-- lunet.tensor_special: PyTorch 1.13's special functions beyond
-- lunet.tensor_math's unary table (lgamma, digamma, erfc, erfinv, signbit
-- and the alias sgn live there, as C kernels):
--   t:polygamma(n)        n = 0: digamma; n = 1: trigamma (a C kernel); higher n
--                         are not implemented (a named error)
--   lunet.xlogy(x, y)     x * log(y), 0 where x = 0 (unless y is NaN); x:xlogy(y)
--   lunet.copysign(a, b)  |a| with the sign bit of b (-0.0 counts as negative)
-- x, y, a, b: tensors or numbers (one at least a tensor), broadcasting; integer
-- inputs compute in the default float dtype. xlogy and copysign are composed of
-- recorded ops, so differentiable with torch's gradients (xlogy's x gets 0, not
-- NaN, where x = 0 and y <= 0); in-place forms xlogy_ and copysign_.
local core = require 'lunet.core'
local raise = require('lunet.options').raise
local typename = core.typename
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local C = core.C
local Tensor, wrap, is_tensor = T.Tensor, T.wrap, T.is_tensor

local function as_float(x)
  if x:is_floating_point() then return x end
  return x:to(core.dtypes[core.default_dtype])
end

-- (a, b): tensors or numbers, at least one a tensor -> two float tensors
local function operands(fn, a, b)
  local ta, tb = is_tensor(a), is_tensor(b)
  if not ta and not tb then
    raise(('%s: expected a tensor and a tensor or number, got %s and %s'):format(fn, typename(a), typename(b)))
  end
  for _, v in ipairs({ { a }, { b } }) do
    if not is_tensor(v[1]) and type(v[1]) ~= 'number' then
      raise(('%s: arguments must be tensors or numbers, got %s'):format(fn, typename(v[1])))
    end
  end
  local ref = as_float(ta and a or b)
  if not ta then a = factory.tensor(a, { dtype = ref.dtype, device = ref.device }) end
  if not tb then b = factory.tensor(b, { dtype = ref.dtype, device = ref.device }) end
  if a.device ~= b.device then raise(('%s: tensors are on different devices (%s and %s)'):format(fn, a.device, b.device)) end
  local sa, sb = a:size(), b:size()
  for i = 1, math.min(#sa, #sb) do
    local x, y = sa[#sa - i + 1], sb[#sb - i + 1]
    if x ~= y and x ~= 1 and y ~= 1 then
      raise(('%s: shapes {%s} and {%s} cannot broadcast'):format(fn, table.concat(sa, ','), table.concat(sb, ',')))
    end
  end
  return as_float(a), as_float(b)
end

function Tensor.polygamma(self, n)
  if not is_tensor(self) then raise(('polygamma: input must be a tensor, got %s'):format(typename(self))) end
  if type(n) ~= 'number' or n % 1 ~= 0 or n < 0 then
    raise(('polygamma: n must be a non-negative integer, got %s'):format(type(n) == 'number' and tostring(n) or typename(n)))
  end
  if n == 0 then return self:digamma() end
  if n > 1 then raise(('polygamma: n = %d is not implemented (only 0 and 1)'):format(n)) end
  return wrap(C.ln_unary(C.LN_TRIGAMMA, as_float(self).p))
end

function Tensor.xlogy(x, y)
  x, y = operands('xlogy', x, y)
  -- log(1) where x = 0 and y <= 0: the product and both gradients are 0
  -- there, not NaN (torch 1.13's x gradient: log(y), masked to 0 there)
  local masked = x:eq(0):logical_and(y:le(0))
  return x * y:where(masked:logical_not(), 1):log()
end

function Tensor.copysign(a, b)
  a, b = operands('copysign', a, b)
  local m = a:abs()
  local r = m:where(b:signbit():logical_not(), m:neg())
  if not b.requires_grad then return r end
  -- (b's gradient: zeros, as torch's, through a where that never picks it)
  return r:where(factory.ones(r:size(), { dtype = 'bool', device = r.device }), b)
end

for _, name in ipairs({ 'xlogy', 'copysign' }) do
  local f = Tensor[name]
  Tensor[name .. '_'] = function(self, other)
    local fn = name .. '_'
    if not is_tensor(self) then raise(('%s: input must be a tensor, got %s'):format(fn, typename(self))) end
    if not self:is_floating_point() then
      raise(("%s: result type float can't be stored in place into %s"):format(fn, self.dtype))
    end
    local ok, r = pcall(f, self, other)
    if not ok then error(type(r) == 'string' and r:gsub(name .. ': ', fn .. ': ', 1) or r, 0) end
    if table.concat(r:size(), ',') ~= table.concat(self:size(), ',') then
      raise(('%s: the result\'s shape differs from the input\'s (broadcasting would grow it)'):format(fn))
    end
    return self:copy_(r)
  end
end

return {}
