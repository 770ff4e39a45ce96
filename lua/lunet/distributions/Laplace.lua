-- Laplace(loc, scale[, {validate_args}]) as torch.distributions.Laplace
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local C = D.constraints

local Laplace = D.class('Laplace')
Laplace._params = { 'loc', 'scale' }
Laplace.arg_constraints = { loc = C.real, scale = C.positive }
Laplace.has_rsample = true
function Laplace:_support() return C.real end

function Laplace.new(loc, scale, opts)
  opts = D.opts('Laplace', opts)
  local p, shape = D.params('Laplace', { 'loc', 'scale' }, { loc, scale })
  return D.init(setmetatable({ loc = p[1], scale = p[2] }, Laplace), shape, {}, opts)
end

function Laplace._get:mean() return self.loc end
function Laplace._get:mode() return self.loc end
function Laplace._get:stddev() return self.scale * math.sqrt(2) end
function Laplace._get:variance() return self.scale:pow(2) * 2 end

local EPS = { float32 = 1.1920928955078125e-07, float64 = 2.220446049250313e-16 }

function Laplace:rsample(s)
  local shape = self:_extended_shape('Laplace.rsample', s)
  local eps = EPS[self.loc.dtype] or EPS.float32
  -- u in [eps - 1, 1): log1p(-|u|) stays finite (as torch)
  local u = lunet.rand(shape, { dtype = self.loc.dtype, device = self.loc.device }) * (2 - eps) + (eps - 1)
  return self.loc - self.scale * u:sign() * (-u:abs()):log1p()
end

function Laplace:log_prob(v)
  v = self:_check_value('Laplace.log_prob', v)
  return -(self.scale * 2):log() - (v - self.loc):abs() / self.scale
end

function Laplace:cdf(v)
  v = self:_check_value('Laplace.cdf', v)
  local d = v - self.loc
  return 0.5 - d:sign() * (-d:abs() / self.scale):expm1() * 0.5
end

function Laplace:icdf(v)
  if not lunet.is_tensor(v) then D.fail('Laplace.icdf', 'value must be a tensor, got ' .. type(v)) end
  local term = v - 0.5
  return self.loc - self.scale * term:sign() * (-term:abs() * 2):log1p()
end

function Laplace:entropy() return (self.scale * 2):log() + 1 end

return Laplace
