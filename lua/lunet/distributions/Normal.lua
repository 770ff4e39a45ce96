-- Normal(loc, scale[, {validate_args}]) as torch.distributions.Normal
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local S = require 'lunet.distributions.special'
local C = D.constraints

local Normal = D.class('Normal')
Normal._params = { 'loc', 'scale' }
Normal.arg_constraints = { loc = C.real, scale = C.positive }
Normal.has_rsample = true
function Normal:_support() return C.real end

function Normal.new(loc, scale, opts)
  opts = D.opts('Normal', opts)
  local p, shape = D.params('Normal', { 'loc', 'scale' }, { loc, scale })
  local self = setmetatable({ loc = p[1], scale = p[2] }, Normal)
  return D.init(self, shape, {}, opts)
end

function Normal._get:mean() return self.loc end
function Normal._get:mode() return self.loc end
function Normal._get:stddev() return self.scale end
function Normal._get:variance() return self.scale:pow(2) end

function Normal:rsample(s)
  local shape = self:_extended_shape('Normal.rsample', s)
  local eps = lunet.randn(shape, { dtype = self.loc.dtype, device = self.loc.device })
  return self.loc + eps * self.scale
end

function Normal:log_prob(v)
  v = self:_check_value('Normal.log_prob', v)
  return -((v - self.loc):pow(2)) / (self.scale:pow(2) * 2) - self.scale:log() - 0.5 * math.log(2 * math.pi)
end

function Normal:cdf(v)
  v = self:_check_value('Normal.cdf', v)
  return (((v - self.loc) / self.scale) * (1 / math.sqrt(2))):erf() * 0.5 + 0.5
end

function Normal:icdf(p)
  if not lunet.is_tensor(p) then D.fail('Normal.icdf', 'value must be a tensor, got ' .. type(p)) end
  if self._validate and not C.unit_interval.check(p):all():item() then
    D.fail('Normal.icdf', 'expected value to be within [0, 1], but found invalid values')
  end
  return self.loc + self.scale * S.erfinv(p * 2 - 1) * math.sqrt(2)
end

function Normal:entropy() return self.scale:log() + (0.5 + 0.5 * math.log(2 * math.pi)) end

return Normal
