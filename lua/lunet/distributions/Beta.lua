-- Beta(concentration1, concentration0[, {validate_args}]) as
-- torch.distributions.Beta; samples X / (X + Y) of two Gamma draws. rsample:
-- torch's implicit gradient is not implemented (a named error under grad).
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local S = require 'lunet.distributions.special'
local C = D.constraints

local Beta = D.class('Beta')
Beta._params = { 'concentration1', 'concentration0' }
Beta.arg_constraints = { concentration1 = C.positive, concentration0 = C.positive }
Beta.has_rsample = true
function Beta:_support() return C.unit_interval end

function Beta.new(c1, c0, opts)
  opts = D.opts('Beta', opts)
  local p, shape = D.params('Beta', { 'concentration1', 'concentration0' }, { c1, c0 })
  return D.init(setmetatable({ concentration1 = p[1], concentration0 = p[2] }, Beta), shape, {}, opts)
end

function Beta._get:mean() return self.concentration1 / (self.concentration1 + self.concentration0) end
function Beta._get:variance()
  local total = self.concentration1 + self.concentration0
  return self.concentration1 * self.concentration0 / (total:pow(2) * (total + 1))
end

function Beta:sample(s)
  local shape = self:_extended_shape('Beta.sample', s)
  return lunet.no_grad(function()
    local x = S.standard_gamma(self.concentration1:detach():expand(shape))
    local y = S.standard_gamma(self.concentration0:detach():expand(shape))
    return (x / (x + y)):to(self.concentration1.dtype)
  end)
end

function Beta:rsample(s)
  if lunet.is_grad_enabled() and (self.concentration1.requires_grad or self.concentration0.requires_grad) then
    D.fail('Beta.rsample', 'not implemented: the gradient with respect to the concentrations '
      .. '(implicit reparameterisation); use sample()')
  end
  return self:sample(s)
end

function Beta:log_prob(v)
  v = self:_check_value('Beta.log_prob', v)
  local a, b = self.concentration1, self.concentration0
  return (a - 1) * v:log() + (b - 1) * (-v):log1p() - (S.lgamma(a) + S.lgamma(b) - S.lgamma(a + b))
end

function Beta:entropy()
  local a, b = self.concentration1, self.concentration0
  local t = a + b
  return S.lgamma(a) + S.lgamma(b) - S.lgamma(t) - (2 - t) * S.digamma(t)
    - (a - 1) * S.digamma(a) - (b - 1) * S.digamma(b)
end

return Beta
