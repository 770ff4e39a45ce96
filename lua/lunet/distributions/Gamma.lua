-- Gamma(concentration, rate[, {validate_args}]) as torch.distributions.Gamma.
-- rsample is reparameterised through rate; torch's implicit gradient with
-- respect to concentration is not implemented (a named error).
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local S = require 'lunet.distributions.special'
local C = D.constraints

local Gamma = D.class('Gamma')
Gamma._params = { 'concentration', 'rate' }
Gamma.arg_constraints = { concentration = C.positive, rate = C.positive }
Gamma.has_rsample = true
function Gamma:_support() return C.positive end

function Gamma.new(concentration, rate, opts)
  opts = D.opts('Gamma', opts)
  local p, shape = D.params('Gamma', { 'concentration', 'rate' }, { concentration, rate })
  return D.init(setmetatable({ concentration = p[1], rate = p[2] }, Gamma), shape, {}, opts)
end

function Gamma._get:mean() return self.concentration / self.rate end
function Gamma._get:mode() return ((self.concentration - 1) / self.rate):clamp_min(0) end
function Gamma._get:variance() return self.concentration / self.rate:pow(2) end

local TINY = { float32 = 1.1754943508222875e-38, float64 = 2.2250738585072014e-308 }

-- standard gamma draws of the extended shape, in the parameters' dtype
function Gamma:_standard(fname, s)
  local shape = self:_extended_shape(fname, s)
  local g = S.standard_gamma(self.concentration:detach():expand(shape))
  return g:to(self.concentration.dtype):clamp_min(TINY[self.concentration.dtype] or TINY.float32)
end

function Gamma:sample(s)
  return lunet.no_grad(function() return self:_standard('Gamma.sample', s) / self.rate end)
end

function Gamma:rsample(s)
  if self.concentration.requires_grad and lunet.is_grad_enabled() then
    D.fail('Gamma.rsample', 'not implemented: the gradient with respect to concentration '
      .. '(implicit reparameterisation); detach concentration or use sample()')
  end
  return self:_standard('Gamma.rsample', s) / self.rate
end

function Gamma:log_prob(v)
  v = self:_check_value('Gamma.log_prob', v)
  local c = self.concentration
  return c * self.rate:log() + (c - 1) * v:log() - self.rate * v - S.lgamma(c)
end

function Gamma:entropy()
  local c = self.concentration
  return c - self.rate:log() + S.lgamma(c) + (1 - c) * S.digamma(c)
end

return Gamma
