-- lgamma, digamma, erfinv for the distributions (the tensor methods' C
-- kernels), and the standard Gamma sampler (Marsaglia-Tsang, vectorised
-- rejection).
local lunet = require 'lunet'
local S = {}

function S.lgamma(x) return x:lgamma() end
function S.digamma(x) return x:digamma() end
function S.erfinv(x) return x:erfinv() end

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
