-- Exponential(rate[, {validate_args}]) as torch.distributions.Exponential
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local C = D.constraints

local Exponential = D.class('Exponential')
Exponential._params = { 'rate' }
Exponential.arg_constraints = { rate = C.positive }
Exponential.has_rsample = true
function Exponential:_support() return C.nonnegative end

function Exponential.new(rate, opts)
  opts = D.opts('Exponential', opts)
  local p, shape = D.params('Exponential', { 'rate' }, { rate })
  return D.init(setmetatable({ rate = p[1] }, Exponential), shape, {}, opts)
end

function Exponential._get:mean() return self.rate:reciprocal() end
function Exponential._get:mode() return self.rate * 0 end
function Exponential._get:stddev() return self.rate:reciprocal() end
function Exponential._get:variance() return self.rate:pow(-2) end

function Exponential:rsample(s)
  local shape = self:_extended_shape('Exponential.rsample', s)
  local u = lunet.rand(shape, { dtype = self.rate.dtype, device = self.rate.device })
  return -(-u):log1p() / self.rate   -- (1 - u in (0, 1]: never log(0))
end

function Exponential:log_prob(v)
  v = self:_check_value('Exponential.log_prob', v)
  return self.rate:log() - self.rate * v
end

function Exponential:cdf(v)
  v = self:_check_value('Exponential.cdf', v)
  return 1 - (-self.rate * v):exp()
end

function Exponential:icdf(v)
  if not lunet.is_tensor(v) then D.fail('Exponential.icdf', 'value must be a tensor, got ' .. type(v)) end
  return -(-v):log1p() / self.rate
end

function Exponential:entropy() return 1 - self.rate:log() end

return Exponential
