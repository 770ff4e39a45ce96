-- Categorical(probs | logits[, {validate_args}]) as torch.distributions.Categorical
-- over the last dim, with Torch7's 1-based values: samples and log_prob's
-- values lie in 1..K.
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local C = D.constraints

local Categorical = D.class('Categorical')
Categorical._params = { 'probs', 'logits' }
Categorical.arg_constraints = { probs = C.simplex, logits = C.real_vector }
function Categorical:_support() return C.integer_interval(1, self._num_events) end

function Categorical.new(probs, logits, opts, fname)
  fname = fname or 'Categorical'
  local name, v, o = D.probs_or_logits(fname, probs, logits, opts)
  if not lunet.is_tensor(v) or not v:is_floating_point() then
    D.fail(fname, name .. ' must be a floating-point tensor, got ' .. (lunet.is_tensor(v) and v.dtype or type(v)))
  end
  if v:dim() < 1 then D.fail(fname, name .. ' must be at least one-dimensional') end
  if name == 'probs' then v = v / v:sum(-1, true) else v = v - v:logsumexp(-1, true) end
  local size = v:size()
  local self = setmetatable({ [name] = v, _num_events = size[#size] }, Categorical)
  return D.init(self, D.slice(size, 1, #size - 1), {}, o)
end

function Categorical._get:probs() return self.logits:softmax(-1) end
function Categorical._get:logits()
  local eps = self.probs.dtype == 'float64' and 2.220446049250313e-16 or 1.1920928955078125e-07
  return self.probs:clamp(eps, 1 - eps):log()
end
function Categorical._get:param_shape() return (rawget(self, 'probs') or rawget(self, 'logits')):size() end
-- (as torch: no mean or variance over labels)
function Categorical._get:mean() return self.probs:new_full(self.batch_shape, 0 / 0) end
function Categorical._get:variance() return self.probs:new_full(self.batch_shape, 0 / 0) end
function Categorical._get:mode() return select(2, self.probs:max(-1)) end

-- inverse cdf: how many cumulative probabilities lie below a uniform draw, + 1
function Categorical:sample(s)
  local ss = D.sample_shape('Categorical.sample', s)
  return lunet.no_grad(function()
    local p = self.probs:detach()
    local K = self._num_events
    local cdf = p:expand(D.concat(ss, self.batch_shape, { K })):cumsum(-1)
    local u = lunet.rand(D.concat(ss, self.batch_shape, { 1 }), { dtype = p.dtype, device = p.device })
    u = u * cdf:narrow(-1, K, 1)   -- (the total may differ from 1 by rounding)
    return (cdf:lt(u):sum(-1) + 1):clamp_max(K):long()
  end)
end

function Categorical:log_prob(v)
  v = self:_check_value('Categorical.log_prob', v)
  local idx = v:long():unsqueeze(-1)
  local lg = self.logits
  local shape = D.broadcast_shapes('Categorical.log_prob', idx:size(), lg:size())
  local ishape = D.slice(shape, 1, #shape - 1)
  ishape[#ishape + 1] = 1
  return lg:expand(shape):gather(-1, idx:expand(ishape)):squeeze(-1)
end

function Categorical:entropy()
  local lg = self.logits
  local min = lg.dtype == 'float64' and -1.7976931348623157e308 or -3.4028234663852886e38
  return -(lg:clamp_min(min) * self.probs):sum(-1)
end

return Categorical
