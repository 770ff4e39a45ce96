-- Uniform(low, high[, {validate_args}]) as torch.distributions.Uniform: low < high
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local C = D.constraints

local Uniform = D.class('Uniform')
Uniform._params = { 'low', 'high' }
Uniform.arg_constraints = {}   -- (torch: dependent; checked as low < high below)
Uniform.has_rsample = true
function Uniform:_support() return C.interval(self.low, self.high) end

function Uniform.new(low, high, opts)
  opts = D.opts('Uniform', opts)
  local p, shape = D.params('Uniform', { 'low', 'high' }, { low, high })
  local self = setmetatable({ low = p[1], high = p[2] }, Uniform)
  if opts.validate_args ~= false and not p[1]:lt(p[2]):all():item() then
    D.fail('Uniform', 'not defined when low >= high')
  end
  return D.init(self, shape, {}, opts)
end

function Uniform._get:mean() return (self.high + self.low) / 2 end
function Uniform._get:stddev() return (self.high - self.low) / math.sqrt(12) end
function Uniform._get:variance() return (self.high - self.low):pow(2) / 12 end

function Uniform:rsample(s)
  local shape = self:_extended_shape('Uniform.rsample', s)
  local u = lunet.rand(shape, { dtype = self.low.dtype, device = self.low.device })
  return self.low + u * (self.high - self.low)
end

function Uniform:log_prob(v)
  v = self:_check_value('Uniform.log_prob', v)
  local inside = self.low:le(v):logical_and(self.high:gt(v))
  return inside:to(self.low.dtype):log() - (self.high - self.low):log()
end

function Uniform:cdf(v)
  v = self:_check_value('Uniform.cdf', v)
  return ((v - self.low) / (self.high - self.low)):clamp(0, 1)
end

function Uniform:icdf(v)
  if not lunet.is_tensor(v) then D.fail('Uniform.icdf', 'value must be a tensor, got ' .. type(v)) end
  return v * (self.high - self.low) + self.low
end

function Uniform:entropy() return (self.high - self.low):log() end

return Uniform
