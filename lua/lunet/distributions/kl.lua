-- kl_divergence(p, q) for the pairs torch 1.13 registers among lunet's
-- distributions of the same family; register_kl(P, Q, fn) adds a pair.
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local S = require 'lunet.distributions.special'

local M = {}
local registry = {}
local INF = math.huge

local function is_dist(x) return type(x) == 'table' and type(getmetatable(x)) == 'table' and getmetatable(x).name ~= nil end
local function is_class(x) return type(x) == 'table' and type(x.name) == 'string' and type(x._get) == 'table' end

function M.register_kl(P, Q, fn)
  if not is_class(P) or not is_class(Q) then D.fail('register_kl', 'expected two distribution classes') end
  if type(fn) ~= 'function' then D.fail('register_kl', 'expected a function, got ' .. type(fn)) end
  registry[P] = registry[P] or {}
  registry[P][Q] = fn
end

function M.kl_divergence(p, q)
  if not is_dist(p) or not is_dist(q) then D.fail('kl_divergence', 'expected two distributions') end
  local P, Q = getmetatable(p), getmetatable(q)
  local fn = registry[P] and registry[P][Q]
  if not fn then
    D.fail('kl_divergence', ('not implemented for the pair (%s, %s)'):format(P.name, Q.name))
  end
  return fn(p, q)
end

function M.install(dist)
  local reg = M.register_kl
  local sp = dist.Bernoulli._softplus
  reg(dist.Normal, dist.Normal, function(p, q)
    local var_ratio = (p.scale / q.scale):pow(2)
    local t1 = ((p.loc - q.loc) / q.scale):pow(2)
    return (var_ratio + t1 - 1 - var_ratio:log()) * 0.5
  end)
  reg(dist.Bernoulli, dist.Bernoulli, function(p, q)
    local pp, qp, pl, ql = p.probs, q.probs, p.logits, q.logits
    local t1 = pp * (sp(-ql) - sp(-pl))
    t1 = lunet.where(pp:eq(0), 0, lunet.where(qp:eq(0), INF, t1))
    local t2 = (1 - pp) * (sp(ql) - sp(pl))
    t2 = lunet.where(pp:eq(1), 0, lunet.where(qp:eq(1), INF, t2))
    return t1 + t2
  end)
  reg(dist.Categorical, dist.Categorical, function(p, q)
    local t = p.probs * (p.logits - q.logits)
    t = lunet.where(p.probs:eq(0), 0, lunet.where(q.probs:eq(0), INF, t))
    return t:sum(-1)
  end)
  reg(dist.OneHotCategorical, dist.OneHotCategorical, function(p, q)
    return M.kl_divergence(p._categorical, q._categorical)
  end)
  reg(dist.Uniform, dist.Uniform, function(p, q)
    local r = ((q.high - q.low) / (p.high - p.low)):log()
    return lunet.where(q.low:gt(p.low):logical_or(q.high:lt(p.high)), INF, r)
  end)
  reg(dist.Beta, dist.Beta, function(p, q)
    local pa, pb, qa, qb = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    local sp_, sq = pa + pb, qa + qb
    local t1 = S.lgamma(qa) + S.lgamma(qb) + S.lgamma(sp_)
    local t2 = S.lgamma(pa) + S.lgamma(pb) + S.lgamma(sq)
    return t1 - t2 + (pa - qa) * S.digamma(pa) + (pb - qb) * S.digamma(pb) + (sq - sp_) * S.digamma(sp_)
  end)
  reg(dist.Gamma, dist.Gamma, function(p, q)
    local pc, pr, qc, qr = p.concentration, p.rate, q.concentration, q.rate
    return qc * (pr / qr):log() + S.lgamma(qc) - S.lgamma(pc) + (pc - qc) * S.digamma(pc) + (qr - pr) * (pc / pr)
  end)
  reg(dist.Exponential, dist.Exponential, function(p, q)
    local r = q.rate / p.rate
    return -r:log() + r - 1
  end)
  reg(dist.Laplace, dist.Laplace, function(p, q)
    local ratio = p.scale / q.scale
    local d = (p.loc - q.loc):abs()
    return -ratio:log() + d / q.scale + ratio * (-d / p.scale):exp() - 1
  end)
  local MVN = dist.MultivariateNormal
  reg(MVN, MVN, function(p, q)
    local n = p.event_shape[1]
    if q.event_shape[1] ~= n then
      D.fail('kl_divergence', 'MultivariateNormals with different event shapes')
    end
    local pL, qL = p._L, q._L
    local ps, qs = pL:size(), qL:size()
    local b = D.broadcast_shapes('kl_divergence', D.slice(ps, 1, #ps - 2), D.slice(qs, 1, #qs - 2))
    local full = D.concat(b, { n, n })
    local X = require('lunet.linalg').solve(qL:tril():expand(full):contiguous(), pL:expand(full):contiguous())
    local term2 = X:pow(2):sum(-1):sum(-1)
    local term3 = MVN._mahalanobis(qL, q.loc - p.loc)
    return MVN._half_log_det(qL) - MVN._half_log_det(pL) + (term2 + term3 - n) * 0.5
  end)
  reg(dist.Independent, dist.Independent, function(p, q)
    if p.reinterpreted_batch_ndims ~= q.reinterpreted_batch_ndims then
      D.fail('kl_divergence', 'Independents of different reinterpreted_batch_ndims')
    end
    return D.sum_rightmost(M.kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
  end)
end

return M
