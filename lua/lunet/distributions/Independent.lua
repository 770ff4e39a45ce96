-- Independent(base, reinterpreted_batch_ndims[, {validate_args}]) as
-- torch.distributions.Independent: the rightmost n batch dims become event dims
local D = require 'lunet.distributions.Distribution'

local Independent = D.class('Independent')
Independent._params = {}
Independent.arg_constraints = {}

function Independent.new(base, n, opts)
  local fname = 'Independent'
  opts = D.opts(fname, opts)
  if type(base) ~= 'table' or type(base.batch_shape) ~= 'table' or not base.log_prob then
    D.fail(fname, 'base_distribution must be a distribution, got ' .. type(base))
  end
  if type(n) ~= 'number' or n < 0 or n % 1 ~= 0 then
    D.fail(fname, 'reinterpreted_batch_ndims must be a non-negative integer, got ' .. tostring(n))
  end
  local bs = base.batch_shape
  if n > #bs then
    D.fail(fname, ('expected reinterpreted_batch_ndims <= #base_distribution.batch_shape, actual %d vs %d'):format(n, #bs))
  end
  local self = setmetatable({ base_dist = base, reinterpreted_batch_ndims = n, has_rsample = base.has_rsample }, Independent)
  self.batch_shape = D.slice(bs, 1, #bs - n)
  self.event_shape = D.concat(D.slice(bs, #bs - n + 1), base.event_shape)
  self._validate = opts.validate_args ~= false
  return self
end

function Independent:_repr() return ('Independent(%s, %d)'):format(self.base_dist:_repr(), self.reinterpreted_batch_ndims) end
function Independent:expand(batch_shape)
  batch_shape = D.sample_shape('Independent.expand', batch_shape)
  local bs, n = self.base_dist.batch_shape, self.reinterpreted_batch_ndims
  local new = setmetatable({}, Independent)
  for k, v in pairs(self) do new[k] = v end
  new.base_dist = self.base_dist:expand(D.concat(batch_shape, D.slice(bs, #bs - n + 1)))
  new.batch_shape = batch_shape
  return new
end

function Independent._get:support() return self.base_dist.support end
function Independent._get:mean() return self.base_dist.mean end
function Independent._get:variance() return self.base_dist.variance end
function Independent:sample(s) return self.base_dist:sample(s) end
function Independent:rsample(s) return self.base_dist:rsample(s) end
function Independent:log_prob(v)
  return D.sum_rightmost(self.base_dist:log_prob(v), self.reinterpreted_batch_ndims)
end
function Independent:entropy()
  return D.sum_rightmost(self.base_dist:entropy(), self.reinterpreted_batch_ndims)
end

return Independent
