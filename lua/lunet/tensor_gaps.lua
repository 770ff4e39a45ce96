-- lunet.tensor_gaps: the last common torch.Tensor 1.13 members lunet lacked,
-- composed of existing ops (so they differentiate through them and run on
-- every backend):
--   fields    t.T (all dims reversed, as torch; 2-d: the transpose), t.is_cpu,
--             t.is_cuda, t.retains_grad, t.data (a detached alias)
--   methods   get_device() (-1 on the CPU), new(...) (legacy: sizes -> empty,
--             a list -> data, nothing -> size 0), resize_(sizes), resize_as_(u),
--             addmm_, float_power_, polygamma_, t['repeat'](t, ...) (= t:repeat_tensor),
--             unsafe_split, unsafe_chunk, hardshrink([lambd]), prelu(weight)
--   linalg    cholesky({upper}), qr({some}), svd({some, compute_uv}) -> U, S, V
--             (torch.svd's V, not Vh), cholesky_inverse({upper}),
--             cholesky_solve(L, {upper}), triangular_solve(A, {upper, transpose,
--             unitriangular}) -> X, A, matrix_exp()
local core = require 'lunet.core'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local Tensor, is_tensor, getters = T.Tensor, T.is_tensor, T.getters
local raise = options.raise

local function L() return require 'lunet' end
local function LA() return require 'lunet.linalg' end

local named = options.named   -- (an error inside names the method called)
local function def(name, f) Tensor[name] = named(name, f) end
local need = options.need_tensor

-- ---- fields ---------------------------------------------------------------------------------
getters.is_cuda = function(self) return self.device:sub(1, 5) == 'cuda:' end
getters.is_cpu = function(self) return self.device:sub(1, 4) == 'cpu:' end
getters.data = function(self) return self:detach() end
-- (torch: true only for a non-leaf whose retain_grad() was called)
getters.retains_grad = function(self)
  local f = self.grad_fn
  return f ~= nil and f.retain ~= nil
end
def('get_device', function(self)
  local idx = self.device:match('^cuda:(%d+)$')
  return idx and tonumber(idx) or -1
end)

-- ---- construction and resizing ------------------------------------------------------------------
def('new', function(self, first, ...)
  local o = { dtype = self.dtype, device = self.device }
  if first == nil then return L().empty({ 0 }, o) end
  if is_tensor(first) then return first:detach() end
  if type(first) == 'table' and select('#', ...) == 0 then return L().tensor(first, o) end
  return L().empty({ first, ... }, o)
end)
-- resize_: self becomes a tensor of sizes holding its first elements (row
-- major; new ones uninitialized). Within its storage's bytes it stays on that
-- storage (a view of it, as torch keeps the storage when shrinking); past
-- them self moves to a new storage, so other aliases no longer share it.
local function resize(fn, self, sizes)
  if self.requires_grad then raise(fn .. ': cannot resize a tensor that requires grad') end
  if not self:is_contiguous() or self:storage_offset() ~= 0 then
    raise(fn .. ': cannot resize a view that is not contiguous or starts inside its storage')
  end
  local m, strides = 1, {}
  for i = #sizes, 1, -1 do
    local s = sizes[i]
    if type(s) ~= 'number' or s % 1 ~= 0 or s < 0 then raise(('%s: sizes must be integers >= 0, got %s'):format(fn, tostring(s))) end
    strides[i] = m
    m = m * s
  end
  local r, n = nil, self:numel()
  if m * self:element_size() <= tonumber(core.C.ln_storage_nbytes(self.p)) then r = self:as_strided(sizes, strides, 0)
  else
    r = L().empty(sizes, { dtype = self.dtype, device = self.device })
    if n > 0 then r:view(-1):narrow(1, 1, n):copy_(self:reshape(-1)) end
  end
  self.p = r.p   -- (self, a table, takes the new C tensor; r's handle goes with it)
  return self
end
def('resize_', function(self, first, ...)
  local sizes = type(first) == 'table' and not is_tensor(first) and first or { first, ... }
  return resize('resize_', self, sizes)
end)
def('resize_as_', function(self, other) return resize('resize_as_', self, need('resize_as_', other, 'other'):size()) end)

-- ---- in-place forms -------------------------------------------------------------------------------
def('addmm_', function(self, a, b, opts) return self:copy_(self:addmm(a, b, opts)) end)
def('polygamma_', function(self, n) return self:copy_(self:polygamma(n)) end)
def('float_power_', function(self, e)
  if self.dtype ~= 'float64' then
    raise(('float_power_: the result is float64, which cannot be written into a %s tensor'):format(self.dtype))
  end
  return self:copy_(self:float_power(e))
end)

-- ---- aliases ----------------------------------------------------------------------------------------
-- repeat (a Lua keyword: t['repeat'](t, 2, 3) or t:repeat_tensor(2, 3), Torch7's repeatTensor):
-- as tile, but there must be at least as many repetitions as dims
local function rep(self, ...)
  local reps = type((...)) == 'table' and (...) or { ... }
  if #reps < self:dim() then
    raise(('repeat: %d repetitions given for a %d-d tensor (need at least one per dim)'):format(#reps, self:dim()))
  end
  return self:tile(reps)
end
def('repeat', rep)
def('repeat_tensor', rep)
def('unsafe_split', function(self, ...) return self:split(...) end)
def('unsafe_chunk', function(self, ...) return self:chunk(...) end)
def('hardshrink', function(self, lambd) return require('lunet.nn').functional.hardshrink(self, lambd) end)
def('prelu', function(self, weight) return require('lunet.nn').functional.prelu(self, need('prelu', weight, 'weight')) end)

-- ---- linalg methods: torch's (deprecated) conventions over lunet.linalg ------------------------------
local UPPER = { upper = 'boolean' }
def('cholesky', function(self, opts)
  opts = options.check('cholesky', opts, UPPER)
  return LA().cholesky(self, { upper = opts and opts.upper or false })
end)
def('qr', function(self, opts)
  opts = options.check('qr', opts, { some = 'boolean' })
  return LA().qr(self, { mode = (opts and opts.some == false) and 'complete' or 'reduced' })
end)
-- svd: U, S, V with A = U diag(S) V^T; compute_uv = false: U and V zeros (m x m, n x n), as torch
def('svd', function(self, opts)
  opts = options.check('svd', opts, { some = 'boolean', compute_uv = 'boolean' })
  local some = not (opts and opts.some == false)
  if opts and opts.compute_uv == false then
    local S = LA().svdvals(self)
    local s = self:size()
    local m, n = s[#s - 1], s[#s]
    s[#s - 1], s[#s] = m, m
    local U = L().zeros(s, { dtype = self.dtype, device = self.device })
    s[#s - 1], s[#s] = n, n
    return U, S, L().zeros(s, { dtype = self.dtype, device = self.device })
  end
  local U, S, Vh = LA().svd(self, { full_matrices = not some })
  return U, S, Vh.mT
end)
-- the matrix the factor u (lower, or upper) is the Cholesky factor of
local function from_factor(u, upper) return upper and u.mT:matmul(u) or u:matmul(u.mT) end
def('cholesky_inverse', function(self, opts)
  opts = options.check('cholesky_inverse', opts, UPPER)
  return LA().inv(from_factor(self, opts and opts.upper))
end)
def('cholesky_solve', function(self, u, opts)
  need('cholesky_solve', u, 'input2')
  opts = options.check('cholesky_solve', opts, UPPER)
  return LA().solve(from_factor(u, opts and opts.upper), self)
end)
-- triangular_solve(A): X with op(A) X = self, only A's upper (lower) triangle
-- read; returns X and a copy of A, as torch
def('triangular_solve', function(self, A, opts)
  need('triangular_solve', A, 'A')
  opts = options.check('triangular_solve', opts, { upper = 'boolean', transpose = 'boolean', unitriangular = 'boolean' }) or {}
  local upper = opts.upper ~= false
  local tri = upper and A:triu() or A:tril()
  if opts.unitriangular then
    local eye = L().eye(A:size(-1), { dtype = A.dtype, device = A.device })
    tri = tri * (1 - eye) + eye
  end
  if opts.transpose then tri = tri.mT end
  return LA().solve(tri, self), A:clone()
end)
-- matrix_exp: scaled until the largest 1-norm is <= 1/2, an 18-term Taylor
-- polynomial (Horner; error below 1e-16 of the result), squared back
def('matrix_exp', function(self)
  local n = self:size(-1)
  if self:dim() < 2 or self:size(-2) ~= n then
    raise('matrix_exp: needs square matrices (..., n, n), got ' .. tostring(self:size()))
  end
  if not self:is_floating_point() then raise('matrix_exp: needs a float tensor, got ' .. self.dtype) end
  if self:numel() == 0 then return self:clone() end
  local norm = self:detach():abs():sum(-2):amax():item()
  local s = norm > 0.5 and math.ceil(math.log(norm / 0.5) / math.log(2)) or 0
  if s ~= s or s == math.huge then s = 0 end   -- (inf/NaN entries: let them spread)
  local X = s > 0 and self / 2 ^ s or self
  local I = L().eye(n, { dtype = self.dtype, device = self.device })
  local P = I + X / 18
  for k = 17, 1, -1 do P = I + X:matmul(P) / k end
  for _ = 1, s do P = P:matmul(P) end
  return P
end)

return Tensor
