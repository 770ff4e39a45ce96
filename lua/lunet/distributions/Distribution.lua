-- lunet.distributions' base class (torch.distributions.Distribution, 1.13):
-- shapes as Lua size tables (batch_shape, event_shape), properties (mean,
-- variance, stddev, ...) read as fields through getters, parameters checked
-- against their constraints unless validate_args = false (torch's default is on).
local lunet = require 'lunet'
local options = require 'lunet.options'
local T = require 'lunet.tensor'

local D = { _get = {}, name = 'Distribution', has_rsample = false }
local is_tensor = T.is_tensor

local function fail(fname, msg) options.fail(fname, msg) end
D.fail = fail

-- a class: methods through cls, properties through cls._get (both inherit)
function D.class(name, parent)
  parent = parent or D
  local cls = { name = name, _get = setmetatable({}, { __index = parent._get }) }
  cls.__index = function(self, k)
    local v = cls[k]
    if v ~= nil then return v end
    local g = cls._get[k]
    if g then return g(self) end
  end
  cls.__tostring = function(self) return self:_repr() end
  return setmetatable(cls, { __index = parent, __call = function(c, ...) return c.new(...) end })
end

function D.sizestr(s) return '{' .. table.concat(s, ', ') .. '}' end

-- the broadcast of size tables a and b, or an error naming fname
function D.broadcast_shapes(fname, a, b)
  local n, out = math.max(#a, #b), {}
  for i = 0, n - 1 do
    local x, y = a[#a - i] or 1, b[#b - i] or 1
    if x ~= y and x ~= 1 and y ~= 1 then
      fail(fname, ('shapes %s and %s do not broadcast'):format(D.sizestr(a), D.sizestr(b)))
    end
    out[n - i] = x == 1 and y or x
  end
  return out
end

function D.concat(...)
  local out = {}
  for _, t in ipairs({ ... }) do for _, v in ipairs(t) do out[#out + 1] = v end end
  return out
end
function D.slice(t, i, j)
  local out = {}
  for k = i, j or #t do out[#out + 1] = t[k] end
  return out
end

-- parameters: numbers become 0-d tensors of the tensors' dtype (or the
-- default one), then all are expanded to their broadcast shape (broadcast_all)
function D.params(fname, names, vals)
  local ref
  for i, v in ipairs(names) do
    local x = vals[i]
    if x == nil then fail(fname, names[i] .. ' is required') end
    if is_tensor(x) then
      if not x:is_floating_point() then fail(fname, v .. ' must be a floating-point tensor, got ' .. x.dtype) end
      ref = ref or x
    elseif type(x) ~= 'number' then
      fail(fname, ('%s must be a number or a tensor, got %s'):format(v, type(x)))
    end
  end
  local shape = {}
  for i = 1, #names do if is_tensor(vals[i]) then shape = D.broadcast_shapes(fname, shape, vals[i]:size()) end end
  local out = {}
  for i = 1, #names do
    local x = vals[i]
    if not is_tensor(x) then
      x = ref and ref:new_full({}, x) or lunet.tensor(x)
    end
    out[i] = x:expand(shape)
  end
  return out, shape
end

-- the options table of a constructor (validate_args and the extra keys given)
local BASE_OPTS = { validate_args = 'boolean' }
function D.opts(fname, opts, extra)
  local known = BASE_OPTS
  if extra then
    known = { validate_args = 'boolean' }
    for k, v in pairs(extra) do known[k] = v end
  end
  return options.check(fname, opts, known) or {}
end

-- sets the shapes, then checks the given parameters' constraints
function D.init(self, batch_shape, event_shape, opts)
  self.batch_shape, self.event_shape = batch_shape, event_shape or {}
  self._validate = opts.validate_args ~= false
  if self._validate then
    for _, p in ipairs(self._params) do
      local v, c = rawget(self, p), self.arg_constraints[p]
      if v ~= nil and c and not c.check(v):all():item() then
        fail(self.name, ('expected parameter %s (tensor of size %s) to satisfy the constraint %s, but found invalid values')
          :format(p, D.sizestr(v:size()), c.name))
      end
    end
  end
  return self
end

function D:_repr()
  local parts = {}
  for _, p in ipairs(self._params) do
    local v = rawget(self, p)
    if v ~= nil then
      parts[#parts + 1] = p .. ': ' .. (v:numel() == 1 and ('%g'):format(v:detach():reshape(-1):sum():item()) or D.sizestr(v:size()))
    end
  end
  return self.name .. '(' .. table.concat(parts, ', ') .. ')'
end

-- sample_shape: nil, a count, or a size table
function D.sample_shape(fname, s)
  if s == nil then return {} end
  if type(s) == 'number' then s = { s } end
  if type(s) ~= 'table' or is_tensor(s) then fail(fname, 'sample_shape must be a size table, got ' .. type(s)) end
  for _, v in ipairs(s) do
    if type(v) ~= 'number' or v < 0 or v % 1 ~= 0 then fail(fname, 'sample_shape must hold non-negative integers') end
  end
  return s
end

function D:_extended_shape(fname, s)
  return D.concat(D.sample_shape(fname, s), self.batch_shape, self.event_shape)
end

function D:sample(s)
  if not self.has_rsample then fail(self.name .. '.sample', 'not implemented') end
  return lunet.no_grad(function() return self:rsample(s) end)
end
function D:rsample()
  fail(self.name .. '.rsample', 'not implemented: ' .. self.name .. ' has no reparameterised sampler (use sample)')
end
function D:_unsupported(what) fail(self.name .. '.' .. what, 'not implemented (as in torch)') end
function D:cdf() self:_unsupported('cdf') end
function D:icdf() self:_unsupported('icdf') end
function D:entropy() self:_unsupported('entropy') end
function D._get:stddev() return self.variance:sqrt() end
function D._get:support() return self._support and self:_support() end

-- value: a tensor broadcastable to batch_shape + event_shape, inside the support
function D:_check_value(fname, value, need)
  if not is_tensor(value) then fail(fname, 'value must be a tensor, got ' .. type(value)) end
  if not self._validate and not need then return value end
  local want, got = D.concat(self.batch_shape, self.event_shape), value:size()
  for i = 0, math.min(#want, #got) - 1 do
    local a, b = got[#got - i], want[#want - i]
    if a ~= b and a ~= 1 and b ~= 1 then
      fail(fname, ('value of size %s is not broadcastable with batch_shape + event_shape %s')
        :format(D.sizestr(got), D.sizestr(want)))
    end
  end
  if self._validate then
    local sup = self.support
    if sup and not sup.check(value):all():item() then
      fail(fname, ('expected value to be within the support (%s) of %s, but found invalid values')
        :format(sup.name, self:_repr()))
    end
  end
  return value
end

-- expand: the parameters expanded to batch_shape (their event dims kept)
function D:expand(batch_shape)
  local fname = self.name .. '.expand'
  batch_shape = D.sample_shape(fname, batch_shape)
  local new = setmetatable({}, getmetatable(self))
  for k, v in pairs(self) do new[k] = v end
  local nb = #self.batch_shape
  for _, p in ipairs(self._params) do
    local v = rawget(self, p)
    if v ~= nil then
      local ok, e = pcall(v.expand, v, D.concat(batch_shape, D.slice(v:size(), nb + 1)))
      if not ok then fail(fname, ('cannot expand batch_shape %s to %s'):format(D.sizestr(self.batch_shape), D.sizestr(batch_shape))) end
      new[p] = e
    end
  end
  new.batch_shape = batch_shape
  if new._expanded then new:_expanded(batch_shape) end
  return new
end

-- sums the rightmost n dims
function D.sum_rightmost(t, n)
  for _ = 1, n do t = t:sum(-1) end
  return t
end

-- ---- constraints: {name, check(v) -> bool tensor} ---------------------------------------
local C = {}
D.constraints = C
C.real = { name = 'Real()', check = function(v) return v:eq(v) end }
C.positive = { name = 'GreaterThan(lower_bound=0.0)', check = function(v) return v:gt(0) end }
C.nonnegative = { name = 'GreaterThanEq(lower_bound=0.0)', check = function(v) return v:ge(0) end }
C.unit_interval = { name = 'Interval(lower_bound=0.0, upper_bound=1.0)', check = function(v) return v:ge(0):logical_and(v:le(1)) end }
C.boolean = { name = 'Boolean()', check = function(v) return v:eq(0):logical_or(v:eq(1)) end }
C.real_vector = { name = 'IndependentConstraint(Real(), 1)', check = function(v) return v:eq(v):all(-1) end }
C.simplex = { name = 'Simplex()', check = function(v)
  return v:ge(0):all(-1):logical_and((v:sum(-1) - 1):abs():lt(1e-6))
end }
C.one_hot = { name = 'OneHot()', check = function(v)
  return v:eq(0):logical_or(v:eq(1)):all(-1):logical_and(v:sum(-1):eq(1))
end }
function C.interval(lo, hi)
  return { name = 'Interval(low, high)', check = function(v) return v:ge(lo):logical_and(v:le(hi)) end }
end
function C.integer_interval(lo, hi)
  return { name = ('IntegerInterval(lower_bound=%d, upper_bound=%d)'):format(lo, hi), check = function(v)
    return v:eq(v:floor()):logical_and(v:ge(lo)):logical_and(v:le(hi))
  end }
end
C.lower_cholesky = { name = 'LowerCholesky()', check = function(v)
  return v:tril():eq(v):all(-1):all(-1):logical_and(v:diagonal(0, -2, -1):gt(0):all(-1))
end }
C.positive_definite = { name = 'PositiveDefinite()', check = function(v)
  local sym = (v - v:transpose(-2, -1)):abs():le(1e-6 * (v:abs():max():item() + 1)):all()
  local ok = sym:item() and pcall(require('lunet.linalg').cholesky, v)
  return lunet.tensor(ok and true or false)
end }

return D
