-- lgamma, digamma, erfinv for the distributions: the tensor methods where
-- lunet has them, else compositions of differentiable tensor ops (for x > 0:
-- recurrence up to x + 8, then Stirling's series, error < 1e-12); and the
-- standard Gamma sampler (Marsaglia-Tsang, vectorised rejection).
local lunet = require 'lunet'
local Tensor = lunet.Tensor
local S = {}

local HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

function S.lgamma(x)
  if Tensor.lgamma then return x:lgamma() end
  local shift = x * 0 + 1   -- log(x (x+1) ... (x+7)) taken off after the shift
  for k = 0, 7 do shift = shift * (x + k) end
  local z = x + 8
  local r = z:reciprocal()
  local r2 = r * r
  local series = r * (1 / 12 + r2 * (-1 / 360 + r2 * (1 / 1260 + r2 * (-1 / 1680 + r2 * (1 / 1188)))))
  return (z - 0.5) * z:log() - z + HALF_LOG_2PI + series - shift:log()
end

function S.digamma(x)
  if Tensor.digamma then return x:digamma() end
  local acc = x:reciprocal()
  for k = 1, 7 do acc = acc + (x + k):reciprocal() end
  local z = x + 8
  local r = z:reciprocal()
  local r2 = r * r
  local series = r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 * (1 / 132)))))
  return z:log() - r * 0.5 - series - acc
end

-- Giles' approximation, then two Newton steps on erf
function S.erfinv(x)
  if Tensor.erfinv then return x:erfinv() end
  local w = -((1 - x) * (1 + x)):log()
  local w1 = w - 2.5
  local p1 = w1 * 0 + 2.81022636e-08
  for _, c in ipairs({ 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                       -0.00417768164, 0.246640727, 1.50140941 }) do p1 = p1 * w1 + c end
  local w2 = w:clamp_min(5):sqrt() - 3
  local p2 = w2 * 0 - 0.000200214257
  for _, c in ipairs({ 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                       0.00943887047, 1.00167406, 2.83297682 }) do p2 = p2 * w2 + c end
  local y = lunet.where(w:lt(5), p1, p2) * x
  local inner = x:abs():lt(1)
  for _ = 1, 2 do
    local yc = lunet.where(inner, y, 0)   -- (no Newton step at +-1, where y is infinite)
    local step = (yc:erf() - x) / ((-yc * yc):exp() * 1.1283791670955126)
    y = lunet.where(inner, y - step, y)
  end
  return lunet.where(inner, y, x * math.huge)   -- +-inf at +-1, NaN outside
end

-- Gamma(alpha, 1) draws of alpha's size, float64, no gradient. alpha < 1:
-- G(alpha + 1) U^(1 / alpha). Each round redraws only the rejected entries.
local TINY = 2.2250738585072014e-308
function S.standard_gamma(alpha)
  return lunet.no_grad(function()
    local shape, dev = alpha:size(), alpha.device
    local f64 = { dtype = 'float64', device = dev }
    local a = alpha:double():contiguous():reshape(-1)
    local n = a:numel()
    local boost = a:lt(1)
    local d = a + boost:double() - 1 / 3
    local c = (d * 9):rsqrt()
    local out = lunet.zeros(n, f64)
    local idx = lunet.arange(1, n + 1, { dtype = 'int64', device = dev })
    while idx:numel() > 0 do
      local m = idx:numel()
      local x = lunet.randn(m, f64)
      local v = (x * c + 1):pow(3)
      local u = lunet.rand(m, f64)
      local ok = v:gt(0):logical_and(u:log():lt(x * x * 0.5 + d - d * v + d * v:clamp_min(TINY):log()))
      out = out:index_copy(1, idx:masked_select(ok), (d * v):masked_select(ok))
      local rej = ok:logical_not()
      idx, d, c = idx:masked_select(rej), d:masked_select(rej), c:masked_select(rej)
    end
    local u = lunet.rand(n, f64)
    out = lunet.where(boost, (u:log() / a):exp() * out, out)
    return out:clamp_min(TINY):reshape(shape)
  end)
end

return S
