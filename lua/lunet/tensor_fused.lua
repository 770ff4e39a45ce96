-- lunet.tensor_fused: PyTorch 1.13's fused "beta * input + alpha * product"
-- ops, as Tensor methods (and lunet.* functional forms):
--   input:baddbmm(b1, b2[, {beta = 1, alpha = 1}])  b1 {B,n,m}, b2 {B,m,p}: input
--                                                   broadcast to {B,n,p} + the bmm
--   input:addbmm(b1, b2[, opts])                    the bmm summed over the batch: {n,p}
--   input:addmv(mat, vec[, opts])                   mat {n,m}, vec {m}: {n}
--   input:addr(vec1, vec2[, opts])                  the outer product: {n,m}
-- and their in-place forms (input must then have the result's shape). As in
-- torch, beta = 0 ignores input (its NaN and Inf do not reach the result; it
-- still gets a zero gradient). float32 and float64 (matmul's dtypes).
-- They are composed of recorded ops (bmm, matmul, outer, mul, add, where),
-- so they are differentiable and run wherever those have kernels.
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, however deep lunet's frames)
local typename = core.typename
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local Tensor, is_tensor = T.Tensor, T.is_tensor

local OPTS = { beta = 'number', alpha = 'number' }

local function shape_str(s) return '{' .. table.concat(s, ',') .. '}' end

-- the arguments checked: tensors of one dtype and device with the dims
-- wanted (dims[i] for argument i: input's is the most it may have)
local function args(fn, input, a, b, opts, dims, names)
  local list = { input, a, b }
  for i = 1, 3 do
    local t = list[i]
    if not is_tensor(t) then raise(('%s: %s must be a tensor, got %s'):format(fn, names[i], typename(t))) end
    local nd = t:dim()
    if (i == 1 and nd > dims[1]) or (i > 1 and nd ~= dims[i]) then
      raise(('%s: %s must be %s%d-d, got %d-d'):format(fn, names[i], i == 1 and 'at most ' or '', dims[i], nd))
    end
    if t.dtype ~= input.dtype or t.device ~= input.device then
      raise(('%s: %s is %s on %s but input is %s on %s (they must match)')
        :format(fn, names[i], t.dtype, t.device, input.dtype, input.device))
    end
  end
  if input.dtype ~= 'float32' and input.dtype ~= 'float64' then
    raise(('%s: needs float32 or float64 tensors (as matmul), got %s'):format(fn, input.dtype))
  end
  local beta, alpha = 1, 1
  if opts ~= nil then
    local o = options.check(fn, opts, OPTS)
    beta, alpha = o.beta == nil and 1 or o.beta, o.alpha == nil and 1 or o.alpha
  end
  return beta, alpha
end

-- beta * input + alpha * prod, input broadcast to prod's shape
local function combine(fn, input, prod, beta, alpha)
  local shape, si = prod:size(), input:size()
  for i = 1, #si do
    local d, want = si[#si - i + 1], shape[#shape - i + 1]
    if d ~= want and d ~= 1 then
      raise(('%s: input of shape %s cannot broadcast to the result\'s shape %s'):format(fn, shape_str(si), shape_str(shape)))
    end
  end
  if alpha ~= 1 then prod = prod * alpha end
  if beta == 0 then
    -- input left out (NaN stays out); a where that never picks it gives it torch's zero gradient
    if not input.requires_grad then return prod end
    local never = factory.zeros(shape, { dtype = 'bool', device = input.device })
    return input:expand(shape):where(never, prod)
  end
  return prod + (beta == 1 and input or input * beta)
end

local function check_inner(fn, what, n1, n2, s1, s2)
  if n1 ~= n2 then raise(('%s: %s do not match: shapes %s and %s'):format(fn, what, shape_str(s1), shape_str(s2))) end
end

function Tensor.baddbmm(input, b1, b2, opts)
  local fn = 'baddbmm'
  local beta, alpha = args(fn, input, b1, b2, opts, { 3, 3, 3 }, { 'input', 'batch1', 'batch2' })
  local s1, s2 = b1:size(), b2:size()
  check_inner(fn, 'batch sizes', s1[1], s2[1], s1, s2)
  check_inner(fn, 'inner sizes', s1[3], s2[2], s1, s2)
  return combine(fn, input, b1:bmm(b2), beta, alpha)
end

function Tensor.addbmm(input, b1, b2, opts)
  local fn = 'addbmm'
  local beta, alpha = args(fn, input, b1, b2, opts, { 2, 3, 3 }, { 'input', 'batch1', 'batch2' })
  local s1, s2 = b1:size(), b2:size()
  check_inner(fn, 'batch sizes', s1[1], s2[1], s1, s2)
  check_inner(fn, 'inner sizes', s1[3], s2[2], s1, s2)
  -- (the batch folded into the inner dim: one mm)
  local prod = b1:permute(2, 1, 3):reshape({ s1[2], s1[1] * s1[3] }):mm(b2:reshape({ s2[1] * s2[2], s2[3] }))
  return combine(fn, input, prod, beta, alpha)
end

function Tensor.addmv(input, mat, vec, opts)
  local fn = 'addmv'
  local beta, alpha = args(fn, input, mat, vec, opts, { 1, 2, 1 }, { 'input', 'mat', 'vec' })
  check_inner(fn, 'sizes', mat:size(2), vec:size(1), mat:size(), vec:size())
  return combine(fn, input, mat:mv(vec), beta, alpha)
end

function Tensor.addr(input, v1, v2, opts)
  local fn = 'addr'
  local beta, alpha = args(fn, input, v1, v2, opts, { 2, 1, 1 }, { 'input', 'vec1', 'vec2' })
  return combine(fn, input, v1:outer(v2), beta, alpha)
end

-- in place: the result must have self's shape (torch's "Bad in-place call")
for _, name in ipairs({ 'baddbmm', 'addbmm', 'addmv', 'addr' }) do
  local f = Tensor[name]
  Tensor[name .. '_'] = function(self, a, b, opts)
    local fn = name .. '_'
    if not is_tensor(self) then raise(('%s: input must be a tensor, got %s'):format(fn, typename(self))) end
    local ok, r = pcall(f, self, a, b, opts)
    if not ok then error(type(r) == 'string' and r:gsub(name .. ': ', fn .. ': ', 1) or r, 0) end
    local sr, ss = r:size(), self:size()
    if shape_str(sr) ~= shape_str(ss) then
      raise(('%s: input has shape %s but the result %s (they must match in place)'):format(fn, shape_str(ss), shape_str(sr)))
    end
    return self:copy_(r)
  end
end

return {}
