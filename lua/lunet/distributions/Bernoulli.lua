-- Bernoulli(probs | logits[, {validate_args}]) as torch.distributions.Bernoulli:
-- Bernoulli(p), Bernoulli(nil, logits) or Bernoulli{probs = p} / Bernoulli{logits = l}
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local C = D.constraints

local Bernoulli = D.class('Bernoulli')
Bernoulli._params = { 'probs', 'logits' }
Bernoulli.arg_constraints = { probs = C.unit_interval, logits = C.real }
function Bernoulli:_support() return C.boolean end

-- probs or logits from the positional arguments or the options (exactly one)
function D.probs_or_logits(fname, probs, logits, opts)
  if type(probs) == 'table' and not lunet.is_tensor(probs) and logits == nil and opts == nil then
    opts, probs = probs, nil
  end
  opts = D.opts(fname, opts, { probs = true, logits = true })
  probs = probs == nil and opts.probs or probs
  logits = logits == nil and opts.logits or logits
  if (probs == nil) == (logits == nil) then
    D.fail(fname, 'either probs or logits must be specified, but not both')
  end
  local name = probs ~= nil and 'probs' or 'logits'
  return name, probs ~= nil and probs or logits, opts
end

local EPS = { float32 = 1.1920928955078125e-07, float64 = 2.220446049250313e-16 }

function Bernoulli.new(probs, logits, opts)
  local name, v, o = D.probs_or_logits('Bernoulli', probs, logits, opts)
  local p, shape = D.params('Bernoulli', { name }, { v })
  return D.init(setmetatable({ [name] = p[1] }, Bernoulli), shape, {}, o)
end

local function softplus(x) return x:clamp_min(0) + (-x:abs()):exp():log1p() end
Bernoulli._softplus = softplus

function Bernoulli._get:probs() return self.logits:sigmoid() end
function Bernoulli._get:logits()
  local eps = EPS[self.probs.dtype] or EPS.float32
  local p = self.probs:clamp(eps, 1 - eps)
  return p:log() - (-p):log1p()
end
function Bernoulli._get:mean() return self.probs end
function Bernoulli._get:variance() return self.probs * (1 - self.probs) end

function Bernoulli:sample(s)
  local shape = self:_extended_shape('Bernoulli.sample', s)
  return lunet.no_grad(function()
    local p = self.probs:detach()
    return lunet.rand(shape, { dtype = p.dtype, device = p.device }):lt(p):to(p.dtype)
  end)
end

function Bernoulli:log_prob(v)
  v = self:_check_value('Bernoulli.log_prob', v)
  local x = self.logits
  return x * v - softplus(x)
end

function Bernoulli:entropy()
  local x = self.logits
  return softplus(x) - x * self.probs
end

return Bernoulli
