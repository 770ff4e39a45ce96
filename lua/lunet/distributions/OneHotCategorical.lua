-- OneHotCategorical(probs | logits[, {validate_args}]) as
-- torch.distributions.OneHotCategorical: one-hot vectors of size K (event_shape {K})
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local Categorical = require 'lunet.distributions.Categorical'
local C = D.constraints

local OHC = D.class('OneHotCategorical')
OHC._params = {}
OHC.arg_constraints = { probs = C.simplex, logits = C.real_vector }
function OHC:_support() return C.one_hot end

function OHC.new(probs, logits, opts)
  local cat = Categorical.new(probs, logits, opts, 'OneHotCategorical')
  local self = setmetatable({ _categorical = cat }, OHC)
  self.batch_shape, self.event_shape = cat.batch_shape, { cat._num_events }
  self._validate = cat._validate
  return self
end

function OHC:_repr() return 'OneHotCategorical' .. self._categorical:_repr():sub(#'Categorical' + 1) end
function OHC:expand(batch_shape)
  local new = setmetatable({}, OHC)
  for k, v in pairs(self) do new[k] = v end
  new._categorical = self._categorical:expand(batch_shape)
  new.batch_shape = new._categorical.batch_shape
  return new
end

function OHC._get:probs() return self._categorical.probs end
function OHC._get:logits() return self._categorical.logits end
function OHC._get:param_shape() return self._categorical.param_shape end
function OHC._get:mean() return self._categorical.probs end
function OHC._get:variance() local p = self._categorical.probs; return p * (1 - p) end

function OHC:sample(s)
  local idx = self._categorical:sample(s)
  local p = self._categorical.probs
  local K = self.event_shape[1]
  return lunet.arange(1, K + 1, { dtype = 'int64', device = p.device }):eq(idx:unsqueeze(-1)):to(p.dtype)
end

function OHC:log_prob(v)
  v = self:_check_value('OneHotCategorical.log_prob', v)
  local _, idx = v:max(-1)
  return self._categorical:log_prob(idx)
end

function OHC:entropy() return self._categorical:entropy() end

return OHC
