-- MultivariateNormal(loc, covariance_matrix[, opts]) or
-- MultivariateNormal(loc, {precision_matrix = P | scale_tril = L}) as
-- torch.distributions.MultivariateNormal; one Cholesky factor L does the work.
local lunet = require 'lunet'
local D = require 'lunet.distributions.Distribution'
local C = D.constraints

local MVN = D.class('MultivariateNormal')
MVN._params = { 'loc', 'covariance_matrix', 'precision_matrix', 'scale_tril' }
MVN.arg_constraints = { loc = C.real_vector, covariance_matrix = C.positive_definite,
  precision_matrix = C.positive_definite, scale_tril = C.lower_cholesky }
MVN.has_rsample = true
function MVN:_support() return C.real_vector end

local MATS = { 'covariance_matrix', 'precision_matrix', 'scale_tril' }
local function linalg() return require('lunet.linalg') end

function MVN.new(loc, cov, opts)
  local fname = 'MultivariateNormal'
  if type(cov) == 'table' and not lunet.is_tensor(cov) and opts == nil then cov, opts = nil, cov end
  opts = D.opts(fname, opts, { covariance_matrix = 'tensor', precision_matrix = 'tensor', scale_tril = 'tensor' })
  if cov ~= nil then
    if opts.covariance_matrix then D.fail(fname, 'covariance_matrix given twice') end
    opts.covariance_matrix = cov
  end
  if not lunet.is_tensor(loc) or not loc:is_floating_point() then D.fail(fname, 'loc must be a floating-point tensor') end
  if loc:dim() < 1 then D.fail(fname, 'loc must be at least one-dimensional') end
  local name, M
  for _, k in ipairs(MATS) do
    if opts[k] ~= nil then
      if name then D.fail(fname, 'exactly one of covariance_matrix or precision_matrix or scale_tril may be specified') end
      name, M = k, opts[k]
    end
  end
  if not name then D.fail(fname, 'exactly one of covariance_matrix or precision_matrix or scale_tril may be specified') end
  if not lunet.is_tensor(M) or not M:is_floating_point() then D.fail(fname, name .. ' must be a floating-point tensor') end
  local n = loc:size(-1)
  if M:dim() < 2 or M:size(-1) ~= n or M:size(-2) ~= n then
    D.fail(fname, name .. ' must be at least two-dimensional, of size n x n with n = loc:size(-1), with optional leading batch dims')
  end
  local ms, ls = M:size(), loc:size()
  local batch = D.broadcast_shapes(fname, D.slice(ms, 1, #ms - 2), D.slice(ls, 1, #ls - 1))
  local self = setmetatable({ loc = loc:expand(D.concat(batch, { n })),
    [name] = M:expand(D.concat(batch, { n, n })) }, MVN)
  D.init(self, batch, { n }, opts)
  if name == 'scale_tril' then self._L = M
  elseif name == 'covariance_matrix' then self._L = linalg().cholesky(M)
  else self._L = linalg().cholesky(linalg().inv(M)) end
  return self
end

local function full(self) return D.concat(self.batch_shape, self.event_shape, self.event_shape) end
function MVN._get:scale_tril() return self._L:expand(full(self)) end
function MVN._get:covariance_matrix() return self._L:matmul(self._L:transpose(-2, -1)):expand(full(self)) end
function MVN._get:precision_matrix() return linalg().inv(self.covariance_matrix) end
function MVN._get:mean() return self.loc end
function MVN._get:mode() return self.loc end
function MVN._get:variance()
  return self._L:pow(2):sum(-1):expand(D.concat(self.batch_shape, self.event_shape))
end

-- L x over broadcast batch dims (x: (..., n))
local function mv(L, x) return (L * x:unsqueeze(-2)):sum(-1) end

function MVN:rsample(s)
  local shape = self:_extended_shape('MultivariateNormal.rsample', s)
  local eps = lunet.randn(shape, { dtype = self.loc.dtype, device = self.loc.device })
  return self.loc + mv(self._L, eps)
end

-- |L^-1 x|^2 over broadcast batch dims
function MVN._mahalanobis(L, x)
  local n = x:size(-1)
  local xs, ls = x:size(), L:size()
  local b = D.broadcast_shapes('MultivariateNormal', D.slice(xs, 1, #xs - 1), D.slice(ls, 1, #ls - 2))
  -- (tril: torch's triangular solve reads, and differentiates, the lower triangle only)
  local y = linalg().solve(L:tril():expand(D.concat(b, { n, n })):contiguous(), x:expand(D.concat(b, { n })):unsqueeze(-1):contiguous())
  return y:squeeze(-1):pow(2):sum(-1)
end

function MVN._half_log_det(L) return L:diagonal(0, -2, -1):log():sum(-1) end

function MVN:log_prob(v)
  v = self:_check_value('MultivariateNormal.log_prob', v)
  local n = self.event_shape[1]
  local m = MVN._mahalanobis(self._L, v - self.loc)
  return -(m + n * math.log(2 * math.pi)) * 0.5 - MVN._half_log_det(self._L)
end

function MVN:entropy()
  local n = self.event_shape[1]
  local h = MVN._half_log_det(self._L) + 0.5 * n * (1 + math.log(2 * math.pi))
  return h:expand(self.batch_shape)
end

return MVN
