-- lunet.distributions against PyTorch 1.13: log_prob, entropy, mean,
-- variance, stddev, cdf, icdf and kl_divergence values and their float64
-- gradients from spec/fixtures/distributions.safetensors (written by
-- tools/gen_distributions_fixtures.py); then sample moments (tolerances from
-- the standard error), shapes with sample_shape, broadcasting and expand,
-- determinism under manual_seed, rsample gradients, validation errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local dist = lunet.distributions
local fx, cases = fixtures.load_fixture('distributions')
local f64 = { dtype = 'float64' }

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'no error')
  return tostring(e)
end
local function has(e, s) assert.truthy(e:find(s, 1, true), ('"%s" not in "%s"'):format(s, e)) end

-- the fixture's distribution from parameter tensors p
local function build(name, p)
  if name == 'MultivariateNormal_cov' then return dist.MultivariateNormal(p.loc, p.covariance_matrix) end
  if name == 'MultivariateNormal_prec' then return dist.MultivariateNormal(p.loc, { precision_matrix = p.precision_matrix }) end
  if name == 'MultivariateNormal_tril' then return dist.MultivariateNormal(p.loc, { scale_tril = p.scale_tril }) end
  if name == 'IndependentNormal' then return dist.Independent(dist.Normal(p.loc, p.scale), 1) end
  if name == 'Bernoulli' or name == 'Categorical' or name == 'OneHotCategorical' then
    return dist[name](p) -- {probs =} or {logits =}
  end
  local order = { Normal = { 'loc', 'scale' }, Uniform = { 'low', 'high' }, Beta = { 'concentration1', 'concentration0' },
    Gamma = { 'concentration', 'rate' }, Exponential = { 'rate' }, Laplace = { 'loc', 'scale' } }
  local args = {}
  for i, k in ipairs(order[name]) do args[i] = p[k] end
  return dist[name](unpack(args))
end

local function params(prefix, names)
  local p = {}
  for _, k in ipairs(names) do p[k] = fx[prefix .. k]:clone():requires_grad_(true) end
  return p
end

local function near(got, want, tol, what)
  assert.same(want:size(), got:size(), what)
  local d = fixtures.maxdiff(got, want)
  assert.is_true(d <= tol * (1 + want:abs():max():item()), ('%s: off by %g'):format(what, d))
end

describe('distributions against PyTorch 1.13 (fixtures)', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 25) end)
  for _, case in ipairs(cases) do
    local n = case.name
    if case.kind == 'dist' then
      it(n .. ': ' .. table.concat(case.methods, ', ') .. ' and their gradients', function()
        for _, m in ipairs(case.methods) do
          local p = params(n .. '.', case.params)
          local d = build(case.dist, p)
          local out
          if m == 'log_prob' or m == 'cdf' then out = d[m](d, fx[n .. '.value'])
          elseif m == 'icdf' then out = d:icdf(fx[n .. '.q'])
          elseif m == 'entropy' then out = d:entropy()
          else out = d[m] end
          near(out, fx[n .. '.' .. m], 1e-9, n .. ' ' .. m)
          if out.requires_grad then
            out:sum():backward()
            for _, k in ipairs(case.params) do
              local want = fx[n .. '.' .. m .. '.d' .. k]
              if want then near(p[k].grad, want, 1e-8, n .. ' ' .. m .. ' d' .. k) end
            end
          end
        end
      end)
    else
      it(n .. ': kl_divergence and its gradients', function()
        local p, q = params(n .. '.p.', case.params), params(n .. '.q.', case.params)
        local out = dist.kl_divergence(build(case.dist, p), build(case.dist, q))
        near(out, fx[n .. '.out'], 1e-9, n)
        out:sum():backward()
        for _, k in ipairs(case.params) do
          near(p[k].grad, fx[n .. '.dp.' .. k], 1e-8, n .. ' dp.' .. k)
          near(q[k].grad, fx[n .. '.dq.' .. k], 1e-8, n .. ' dq.' .. k)
        end
      end)
    end
  end
end)

describe('distributions: sampling', function()
  local N = 40000
  -- the sample mean and variance over the first dim within 5 standard errors
  local function moments(d, mean, var, what)
    local x = d:sample({ N }):double()
    local m, v = x:mean(1), x:var(1)
    local se_m = (var / N):sqrt()
    assert.is_true(((m - mean):abs() - se_m * 5):max():item() <= 0, what .. ' mean')
    -- (the variance of the sample variance needs the 4th moment; 10% suffices here)
    assert.is_true(((v - var):abs() - var * 0.1):max():item() <= 0, what .. ' variance')
  end
  it('matches the moments of every distribution', function()
    lunet.manual_seed(7)
    local cases = {
      dist.Normal(lunet.tensor({ -1, 2 }, f64), lunet.tensor({ 0.5, 3 }, f64)),
      dist.Uniform(lunet.tensor({ -1, 2 }, f64), lunet.tensor({ 0, 5 }, f64)),
      dist.Bernoulli(lunet.tensor({ 0.1, 0.7 }, f64)),
      dist.OneHotCategorical(lunet.tensor({ 0.1, 0.2, 0.7 }, f64)),
      dist.Beta(lunet.tensor({ 0.3, 2, 5 }, f64), lunet.tensor({ 0.5, 3, 1 }, f64)),
      dist.Gamma(lunet.tensor({ 0.2, 1, 4.5 }, f64), lunet.tensor({ 1, 2, 0.5 }, f64)),
      dist.Exponential(lunet.tensor({ 0.5, 4 }, f64)),
      dist.Laplace(lunet.tensor({ 1, -2 }, f64), lunet.tensor({ 0.5, 2 }, f64)),
      dist.MultivariateNormal(lunet.tensor({ 1, -2 }, f64), lunet.tensor({ { 2, 0.5 }, { 0.5, 1 } }, f64)),
      dist.Independent(dist.Normal(lunet.zeros(2, 3, f64), 2), 2),
    }
    for _, d in ipairs(cases) do moments(d, d.mean, d.variance, tostring(d)) end
  end)
  it('Categorical: 1-based labels with the given frequencies', function()
    lunet.manual_seed(3)
    local p = lunet.tensor({ 0.1, 0.2, 0.7 }, f64)
    local x = dist.Categorical(p):sample({ N })
    assert.equal('int64', x.dtype)
    assert.equal(1, x:min():item()); assert.equal(3, x:max():item())
    for k = 1, 3 do
      local f = x:eq(k):double():mean():item()
      local pk = p[k]:item()
      assert.is_true(math.abs(f - pk) < 5 * math.sqrt(pk * (1 - pk) / N), 'label ' .. k)
    end
  end)
  it('MultivariateNormal: the sample covariance', function()
    lunet.manual_seed(5)
    local cov = lunet.tensor({ { 2, 0.5 }, { 0.5, 1 } }, f64)
    local x = dist.MultivariateNormal(lunet.zeros(2, f64), { scale_tril = lunet.linalg.cholesky(cov) }):sample({ N })
    local c = x:t():matmul(x) / N
    assert.is_true(fixtures.maxdiff(c, cov) < 0.06)
  end)
  it('shapes: sample_shape + batch_shape + event_shape, broadcast parameters', function()
    local d = dist.Normal(lunet.zeros(2, 1), lunet.ones(3))
    assert.same({ 2, 3 }, d.batch_shape); assert.same({}, d.event_shape)
    assert.same({ 4, 5, 2, 3 }, d:sample({ 4, 5 }):size())
    assert.same({ 2, 3 }, d:sample():size())
    assert.same({ 7, 2, 3 }, d:rsample(7):size())
    assert.same({ 2, 3 }, dist.Normal(0, lunet.ones(2, 3)):sample():size())
    local m = dist.MultivariateNormal(lunet.zeros(4, 1, 3), lunet.eye(3):expand(5, 3, 3))
    assert.same({ 4, 5 }, m.batch_shape); assert.same({ 3 }, m.event_shape)
    assert.same({ 2, 4, 5, 3 }, m:sample({ 2 }):size())
    assert.same({ 4, 5 }, m:log_prob(lunet.zeros(3)):size())
    local c = dist.Categorical(lunet.ones(2, 5))
    assert.same({ 2 }, c.batch_shape); assert.same({ 3, 2 }, c:sample({ 3 }):size())
    local o = dist.OneHotCategorical(lunet.ones(2, 5))
    assert.same({ 5 }, o.event_shape); assert.same({ 3, 2, 5 }, o:sample({ 3 }):size())
    local i = dist.Independent(dist.Normal(lunet.zeros(2, 3), 1), 1)
    assert.same({ 2 }, i.batch_shape); assert.same({ 3 }, i.event_shape)
    assert.same({ 2 }, i:log_prob(lunet.zeros(2, 3)):size())
    assert.same({ 6, 2 }, dist.Bernoulli(lunet.full({ 2 }, 0.5)):sample({ 6 }):size())
  end)
  it('expand', function()
    local d = dist.Normal(lunet.zeros(3), 1):expand({ 2, 3 })
    assert.same({ 2, 3 }, d.batch_shape); assert.same({ 4, 2, 3 }, d:sample({ 4 }):size())
    assert.same({ 5, 2 }, dist.Categorical(lunet.ones(2, 4)):expand({ 5, 2 }):sample():size())
    assert.same({ 5, 2, 4 }, dist.OneHotCategorical(lunet.ones(2, 4)):expand({ 5, 2 }):sample():size())
    assert.same({ 6, 3 }, dist.MultivariateNormal(lunet.zeros(3), lunet.eye(3)):expand({ 6 }):sample():size())
    assert.same({ 5 }, dist.Independent(dist.Normal(lunet.zeros(3), 1), 1):expand({ 5 }):log_prob(lunet.zeros(3)):size())
    has(err_of(function() return dist.Normal(lunet.zeros(3), 1):expand({ 2 }) end), 'Normal.expand:')
  end)
  it('is deterministic under manual_seed', function()
    for _, d in ipairs({ dist.Normal(0, 1), dist.Gamma(lunet.tensor({ 0.5, 3 }), 1), dist.Beta(2, 3),
                         dist.Categorical(lunet.ones(4)), dist.Laplace(0, 1) }) do
      lunet.manual_seed(11); local a = d:sample({ 50 })
      lunet.manual_seed(11); local b = d:sample({ 50 })
      assert.is_true(a:eq(b):all():item(), tostring(d))
    end
  end)
  it('rsample is reparameterised: d E[x] / d loc = 1, d E[x] / d scale', function()
    lunet.manual_seed(1)
    local loc = lunet.tensor({ 0.5, -1 }, { dtype = 'float64', requires_grad = true })
    local scale = lunet.tensor({ 2, 1 }, { dtype = 'float64', requires_grad = true })
    dist.Normal(loc, scale):rsample({ 1000 }):mean(1):sum():backward()
    assert.is_true(fixtures.maxdiff(loc.grad, lunet.ones(2, f64)) < 1e-12)
    local rate = lunet.tensor({ 2 }, { dtype = 'float64', requires_grad = true })
    dist.Exponential(rate):rsample({ 20000 }):mean():backward()   -- E = 1 / rate: d/drate = -1/rate^2
    assert.is_true(math.abs(rate.grad[1]:item() + 0.25) < 0.02)
    local r2 = lunet.tensor({ 2 }, { dtype = 'float64', requires_grad = true })
    dist.Gamma(lunet.tensor({ 3 }, f64), r2):rsample({ 20000 }):mean():backward()   -- E = 3 / rate
    assert.is_true(math.abs(r2.grad[1]:item() + 0.75) < 0.05)
    local L = lunet.tensor({ 1, 2 }, { dtype = 'float64', requires_grad = true })
    dist.MultivariateNormal(L, lunet.eye(2, f64)):rsample({ 10 }):mean(1):sum():backward()
    assert.is_true(fixtures.maxdiff(L.grad, lunet.ones(2, f64)) < 1e-12)
    local c = lunet.tensor({ 2 }, { dtype = 'float64', requires_grad = true })
    has(err_of(function() return dist.Gamma(c, 1):rsample() end), 'Gamma.rsample: not implemented')
    has(err_of(function() return dist.Beta(c, 1):rsample() end), 'Beta.rsample: not implemented')
    has(err_of(function() return dist.Bernoulli(0.5):rsample() end), 'Bernoulli.rsample: not implemented')
  end)
end)

describe('distributions: validation and errors', function()
  it('rejects parameters outside their constraints', function()
    has(err_of(dist.Normal, 0, 0), 'Normal: expected parameter scale')
    has(err_of(dist.Normal, 0 / 0, 1), 'Normal: expected parameter loc')
    has(err_of(dist.Laplace, 0, -1), 'Laplace: expected parameter scale')
    has(err_of(dist.Exponential, 0), 'Exponential: expected parameter rate')
    has(err_of(dist.Gamma, -1, 1), 'Gamma: expected parameter concentration')
    has(err_of(dist.Beta, 1, 0), 'Beta: expected parameter concentration0')
    has(err_of(dist.Bernoulli, lunet.tensor({ 0.5, 1.5 })), 'Bernoulli: expected parameter probs')
    has(err_of(dist.Categorical, lunet.tensor({ 0.5, -0.5, 1 })), 'Categorical: expected parameter probs')
    has(err_of(dist.Uniform, 1, 1), 'Uniform: not defined when low >= high')
    has(err_of(dist.MultivariateNormal, lunet.zeros(2), lunet.tensor({ { 1, 2 }, { 2, 1 } })), 'MultivariateNormal: expected parameter covariance_matrix')
    has(err_of(dist.MultivariateNormal, lunet.zeros(2), { scale_tril = lunet.ones(2, 2) }), 'expected parameter scale_tril')
    -- validate_args = false skips the checks, as torch
    assert.truthy(dist.Normal(0, -1, { validate_args = false }))
  end)
  it('rejects values outside the support', function()
    has(err_of(function() return dist.Exponential(1):log_prob(lunet.tensor(-1)) end), 'Exponential.log_prob: expected value to be within the support')
    has(err_of(function() return dist.Gamma(1, 1):log_prob(lunet.tensor(0)) end), 'Gamma.log_prob')
    has(err_of(function() return dist.Beta(1, 1):log_prob(lunet.tensor(1.5)) end), 'Beta.log_prob')
    has(err_of(function() return dist.Bernoulli(0.5):log_prob(lunet.tensor(0.5)) end), 'Bernoulli.log_prob')
    has(err_of(function() return dist.Categorical(lunet.ones(3)):log_prob(lunet.tensor(0)) end), 'Categorical.log_prob')
    has(err_of(function() return dist.Categorical(lunet.ones(3)):log_prob(lunet.tensor(4)) end), 'IntegerInterval(lower_bound=1, upper_bound=3)')
    has(err_of(function() return dist.OneHotCategorical(lunet.ones(3)):log_prob(lunet.tensor({ 1, 1, 0 })) end), 'OneHotCategorical.log_prob')
    has(err_of(function() return dist.Uniform(0, 1):log_prob(lunet.tensor(2)) end), 'Uniform.log_prob')
    has(err_of(function() return dist.Normal(lunet.zeros(3), 1):log_prob(lunet.zeros(2)) end), 'not broadcastable')
    has(err_of(function() return dist.Normal(0, 1):log_prob(1) end), 'Normal.log_prob: value must be a tensor')
    has(err_of(function() return dist.Normal(0, 1):icdf(lunet.tensor(2)) end), 'Normal.icdf')
    -- Categorical's values are 1-based
    local c = dist.Categorical(lunet.tensor({ 0.25, 0.75 }, f64))
    assert.is_true(math.abs(c:log_prob(lunet.tensor(2)):item() - math.log(0.75)) < 1e-12)
  end)
  it('names the problem with the arguments', function()
    has(err_of(dist.Normal, 0), 'Normal: scale is required')
    has(err_of(dist.Normal, 'a', 1), 'Normal: loc must be a number or a tensor')
    has(err_of(dist.Normal, lunet.zeros(2), lunet.zeros(3) + 1), 'Normal: shapes {2} and {3} do not broadcast')
    has(err_of(dist.Normal, 0, 1, { validate = false }), "Normal: unknown option 'validate' (did you mean 'validate_args'?)")
    has(err_of(dist.Bernoulli, 0.5, 0.1), 'Bernoulli: either probs or logits must be specified, but not both')
    has(err_of(dist.Categorical, lunet.tensor(1)), 'Categorical: probs must be at least one-dimensional')
    has(err_of(dist.MultivariateNormal, lunet.zeros(2), lunet.eye(2), { scale_tril = lunet.eye(2) }), 'MultivariateNormal: exactly one of')
    has(err_of(dist.MultivariateNormal, lunet.zeros(2), {}), 'exactly one of covariance_matrix')
    has(err_of(dist.MultivariateNormal, lunet.zeros(2), lunet.eye(3)), 'MultivariateNormal: covariance_matrix must be')
    has(err_of(dist.Independent, dist.Normal(0, 1), 1), 'Independent: expected reinterpreted_batch_ndims <=')
    has(err_of(dist.kl_divergence, dist.Normal(0, 1), dist.Laplace(0, 1)), 'kl_divergence: not implemented for the pair (Normal, Laplace)')
    has(err_of(dist.kl_divergence, 1, 2), 'kl_divergence: expected two distributions')
    has(err_of(dist.kl_divergence, dist.Independent(dist.Normal(lunet.zeros(2, 2), 1), 1),
      dist.Independent(dist.Normal(lunet.zeros(2, 2), 1), 2)), 'kl_divergence: Independents of different')
    has(err_of(function() return dist.Normal(0, 1):sample({ -1 }) end), 'Normal.rsample: sample_shape')
  end)
  it('prints as torch', function()
    assert.equal('Normal(loc: {2}, scale: {2})', tostring(dist.Normal(lunet.zeros(2), 1)))
    assert.equal('Normal(loc: 0, scale: 1)', tostring(dist.Normal(0, 1)))
    assert.equal('Bernoulli(logits: {3})', tostring(dist.Bernoulli({ logits = lunet.zeros(3) })))
    assert.equal('OneHotCategorical(probs: {3})', tostring(dist.OneHotCategorical(lunet.ones(3))))
    assert.equal('Independent(Normal(loc: {2}, scale: {2}), 1)', tostring(dist.Independent(dist.Normal(lunet.zeros(2), 1), 1)))
    assert.equal('MultivariateNormal(loc: {2}, scale_tril: {2, 2})', tostring(dist.MultivariateNormal(lunet.zeros(2), { scale_tril = lunet.eye(2) })))
  end)
  it('exposes register_kl', function()
    local called
    dist.register_kl(dist.Laplace, dist.Normal, function() called = true; return lunet.zeros(1) end)
    dist.kl_divergence(dist.Laplace(0, 1), dist.Normal(0, 1))
    assert.is_true(called)
    has(err_of(dist.register_kl, 1, 2, 3), 'register_kl: expected two distribution classes')
  end)
end)
