-- lunet.distributions: torch.distributions (1.13), its commonly used part,
-- with Torch7's 1-based values for Categorical. One class per file; the base
-- class (shapes, validation, expand) is Distribution.lua.
--   local dist = lunet.distributions
--   local d = dist.Normal(lunet.zeros(3), 1)
--   d:rsample({5}), d:log_prob(x), d.mean, dist.kl_divergence(d, d)
local M = {}
for _, name in ipairs({ 'Normal', 'Uniform', 'Bernoulli', 'Categorical', 'OneHotCategorical', 'Beta', 'Gamma',
                        'Exponential', 'Laplace', 'MultivariateNormal', 'Independent' }) do
  M[name] = require('lunet.distributions.' .. name)
end
M.Distribution = require 'lunet.distributions.Distribution'
M.constraints = M.Distribution.constraints
local kl = require 'lunet.distributions.kl'
kl.install(M)
M.kl_divergence, M.register_kl = kl.kl_divergence, kl.register_kl
return M
