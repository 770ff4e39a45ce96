-- lunet.tensor_random: torch 1.13's other random fills, each a transform of
-- uniform_ / normal_ / randint_ draws (so every backend runs them, from the
-- one generator lunet.manual_seed seeds):
--   t:bernoulli([p])          0/1 in t's dtype: P(1) = p, a number, or t's own
--                             values when p is nil (torch reads p from t)
--   t:bernoulli_([p])         p a number (0.5) or a tensor of probabilities
--   t:exponential_([lambd = 1])         -log(1 - u) / lambd
--   t:cauchy_([median = 0[, sigma = 1]])  median + sigma tan(pi (u - 1/2))
--   t:log_normal_([mean = 1[, std = 2]])  exp of normal(mean, std)
--   t:geometric_(p)           trials to the first success: 1, 2, ...
--   t:random_([[from,] to])   integers in [from, to) (from = 0); no bounds:
--                             [0, 2^mantissa] for floats, the dtype's positive range for integers
--   lunet.multinomial(probs, n[, {replacement = false}]) / probs:multinomial(...)
--                             1-based int64 category indices, (n) for 1-d probs,
--                             (rows, n) for 2-d; without replacement by the
--                             Gumbel-top-k trick (keys log p - log(-log u))
-- The fills write with copy_, so they refuse a leaf that requires grad.
local core = require 'lunet.core'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local Tensor, is_tensor = T.Tensor, T.is_tensor
local typename = core.typename
local raise = options.raise
local C = core.C

local function L() return require 'lunet' end

local function num(fn, what, v, default, ok, cond)
  if v == nil then return default end
  if type(v) ~= 'number' or v ~= v then
    raise(('%s: %s must be a number, got %s'):format(fn, what, v ~= v and 'NaN' or typename(v)))
  end
  if ok and not ok(v) then raise(('%s: %s must be %s, got %s'):format(fn, what, cond, tostring(v))) end
  return v
end
local function float_self(fn, self)
  if not is_tensor(self) then raise(('%s: self must be a tensor, got %s'):format(fn, typename(self))) end
  if not self:is_floating_point() then raise(('%s: needs a float tensor, got %s'):format(fn, self.dtype)) end
  return self
end
-- uniform [0, 1) draws shaped as t (float64 for integer t)
local function unif(t)
  return L().empty(t:size(), { dtype = t:is_floating_point() and t.dtype or 'float64', device = t.device }):uniform_()
end
-- the draws written into self (an error from copy_ names the fill)
local function fill(fn, self, r)
  local ok, e = pcall(self.copy_, self, r)
  if ok then return self end
  raise(fn .. ': ' .. tostring(e):gsub('^[^:\n]*:%d+: ', '', 1):gsub('^[%w_]+: ', '', 1))
end

-- ---- bernoulli -----------------------------------------------------------------------------------
local bernoulli_num = Tensor.bernoulli_
local function probs_ok(fn, p)
  local lo, hi = p:min():item(), p:max():item()
  if not (lo >= 0 and hi <= 1) then raise(('%s: probabilities must lie in [0, 1], got values in [%s, %s]'):format(fn, lo, hi)) end
end
function Tensor.bernoulli_(self, p)
  if not is_tensor(p) then   -- (a number: the C fill checks it, NaN included)
    return bernoulli_num(self, p == nil and 0.5 or p)
  end
  if not is_tensor(self) then raise('bernoulli_: self must be a tensor, got ' .. typename(self)) end
  if p:numel() > 0 then probs_ok('bernoulli_', p) end
  if not pcall(p.expand, p, self:size()) then
    raise(('bernoulli_: p of shape %s does not broadcast to self\'s %s'):format(tostring(p:size()), tostring(self:size())))
  end
  return fill('bernoulli_', self, unif(self):lt(p:detach():to(self:is_floating_point() and self.dtype or 'float64')):to(self.dtype))
end
function Tensor.bernoulli(self, p)
  float_self('bernoulli', self)
  if p ~= nil then return L().empty_like(self):bernoulli_(p) end
  if self:numel() > 0 then probs_ok('bernoulli', self) end
  return unif(self):lt(self:detach()):to(self.dtype)
end

-- ---- continuous fills --------------------------------------------------------------------------------
function Tensor.exponential_(self, lambd)
  float_self('exponential_', self)
  lambd = num('exponential_', 'lambd', lambd, 1, function(v) return v > 0 end, '> 0')
  return fill('exponential_', self, (-unif(self)):log1p() / -lambd)
end
function Tensor.cauchy_(self, median, sigma)
  float_self('cauchy_', self)
  median = num('cauchy_', 'median', median, 0)
  sigma = num('cauchy_', 'sigma', sigma, 1, function(v) return v > 0 end, '> 0')
  return fill('cauchy_', self, ((unif(self) - 0.5) * math.pi):tan() * sigma + median)
end
function Tensor.log_normal_(self, mean, std)
  float_self('log_normal_', self)
  mean = num('log_normal_', 'mean', mean, 1)
  std = num('log_normal_', 'std', std, 2, function(v) return v > 0 end, '> 0')
  return fill('log_normal_', self, L().empty_like(self):normal_(mean, std):exp())
end

-- ---- integer-valued fills -------------------------------------------------------------------------------
function Tensor.geometric_(self, p)
  if not is_tensor(self) then raise('geometric_: self must be a tensor, got ' .. typename(self)) end
  if p == nil then raise('geometric_: p is required (the success probability)') end
  p = num('geometric_', 'p', p, nil, function(v) return v > 0 and v < 1 end, 'in (0, 1)')
  local u = unif(self):double()
  -- 1 - u lies in (0, 1]: log(1 - u) <= 0, at least one trial
  return fill('geometric_', self, ((-u):log1p() / math.log(1 - p)):ceil():clamp(1, nil))
end
local MAX = { float32 = 2 ^ 24, float64 = 2 ^ 53, float16 = 2 ^ 11, bfloat16 = 2 ^ 8, int64 = 2 ^ 63 - 1,
  int32 = 2 ^ 31 - 1, uint8 = 255, bool = 1 }
function Tensor.random_(self, a, b)
  if not is_tensor(self) then raise('random_: self must be a tensor, got ' .. typename(self)) end
  local function int(what, v)
    if type(v) ~= 'number' or v % 1 ~= 0 then raise(('random_: %s must be an integer, got %s'):format(what, tostring(v))) end
    return v
  end
  local lo, hi
  if a == nil then lo, hi = 0, MAX[self.dtype] + 1
  elseif b == nil then lo, hi = 0, int('to', a)
  else lo, hi = int('from', a), int('to', b) end
  if hi <= lo then raise(('random_: expects from < to, got from = %s, to = %s'):format(lo, hi)) end
  if self:numel() == 0 then return self end
  if self:is_floating_point() then
    local r = L().empty(self:size(), { dtype = 'float64', device = self.device }):uniform_()
    return fill('random_', self, (r * (hi - lo)):floor():clamp(nil, hi - lo - 1) + lo)
  end
  local r = L().empty(self:size(), { dtype = 'int64', device = self.device })
  if hi - lo >= 2 ^ 63 then hi = lo + 2 ^ 62 end   -- ((hi - lo) must fit int64: a smaller range still)
  if C.ln_randint_(r.p, lo, hi) ~= 0 then core.raise() end
  return fill('random_', self, r)
end

-- ---- multinomial --------------------------------------------------------------------------------------------
local MULTI_OPTS = { replacement = 'boolean' }
function Tensor.multinomial(probs, n, opts)
  local fn = 'multinomial'
  if not is_tensor(probs) then raise(fn .. ': probs must be a tensor, got ' .. typename(probs)) end
  if not probs:is_floating_point() then raise(fn .. ': probs must be a float tensor, got ' .. probs.dtype) end
  if probs:dim() ~= 1 and probs:dim() ~= 2 then raise(('%s: probs must be 1-d or 2-d, got %d-d'):format(fn, probs:dim())) end
  if type(n) ~= 'number' or n % 1 ~= 0 then raise(fn .. ': num_samples must be an integer, got ' .. tostring(n)) end
  if n <= 0 then raise(('%s: cannot sample num_samples <= 0 samples, got %d'):format(fn, n)) end
  local replacement = (options.check(fn, opts, MULTI_OPTS) or {}).replacement or false
  local P = (probs:dim() == 1 and probs:unsqueeze(1) or probs):detach():double()
  local K = P:size(2)
  if K == 0 then raise(fn .. ': probs has no categories') end
  if not replacement and n > K then
    raise(('%s: cannot sample %d samples without replacement from %d categories'):format(fn, n, K))
  end
  if P:numel() > 0 then
    if not (P:isfinite():all():item() and P:min():item() >= 0) then
      raise(fn .. ': probs contains inf, NaN or an element < 0')
    end
    if P:sum(2):min():item() <= 0 then raise(fn .. ': invalid distribution (a row sums to <= 0)') end
  end
  local rows = P:size(1)
  local out
  if replacement then
    -- inverse CDF: the first category whose running sum exceeds u * total
    local cdf = P:cumsum(2)
    local u = L().empty({ rows, n }, { dtype = 'float64', device = P.device }):uniform_() * cdf:narrow(2, K, 1)
    out = L().searchsorted(cdf, u, { right = true }):clamp(nil, K)
  else
    local g = L().empty({ rows, K }, { dtype = 'float64', device = P.device }):uniform_()
    local keys = P:log() - (-g:log()):log()
    local _, idx = keys:topk(n, 2)
    out = idx
  end
  return probs:dim() == 1 and out:squeeze(1) or out
end

return Tensor
