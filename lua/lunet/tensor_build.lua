-- lunet.tensor_build: PyTorch 1.13's sliding windows and tensors built from
-- others, with 1-based dims:
--   t:unfold(dim, size, step)     windows of size along dim every step: a view, dim
--                                 becoming the window count and a last dim of size
--                                 added (nn.functional.unfold is im2col, another op)
--   lunet.logspace(start, stop, steps[, base = 10][, {base =, dtype =, device =}])
--   lunet.block_diag(t1, t2, ...) the 0/1/2-d tensors as blocks of one diagonal
--   lunet.cartesian_prod(t1, ...) the rows of all combinations of the 1-d tensors
--   lunet.combinations(t[, r = 2[, with_replacement = false]]) (or {r =, with_replacement =})
--   lunet.trapezoid(y[, x][, {dx =, dim = -1}])   the trapezoidal rule along dim
--   lunet.cumulative_trapezoid(y[, x][, {dx =, dim = -1}])   its running values
-- All but logspace are views or recorded ops (unfold has its own formula),
-- so they are differentiable and run wherever those ops have kernels.
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local promote = require('lunet.tensor_bins').promote
local Tensor = T.Tensor

local M = {}

local function integer(fn, what, v)
  if type(v) ~= 'number' or v % 1 ~= 0 or math.abs(v) > 2 ^ 53 then
    raise(('%s: %s must be an integer, got %s'):format(fn, what, type(v) == 'number' and tostring(v) or typename(v)))
  end
  return v
end

local need = options.need_tensor

-- ---- unfold ---------------------------------------------------------------------------

function Tensor.unfold(self, dim, size, step)
  local fn = 'unfold'
  need(fn, self)
  local nd = self:dim()
  integer(fn, 'dim', dim); integer(fn, 'size', size); integer(fn, 'step', step)
  local n = math.max(nd, 1)
  local c = dim < 0 and n + dim + 1 or dim
  if c < 1 or c > n then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, dim, nd)) end
  if step < 1 then raise(('%s: step must be > 0, got %d'):format(fn, step)) end
  local shape, stride = self:size(), self:stride()
  local len, st = shape[c] or 1, stride[c] or 1
  if size < 0 or size > len then
    raise(('%s: size must be in 0..%d (the size of dim %d), got %d'):format(fn, len, c, size))
  end
  local count = math.floor((len - size) / step) + 1
  if nd > 0 then shape[c], stride[c] = count, st * step end
  shape[#shape + 1], stride[#stride + 1] = size, st
  return self:as_strided(shape, stride, self:storage_offset())
end

-- ---- logspace -------------------------------------------------------------------------

local LOGSPACE_OPTS = { base = 'number', dtype = 'string', device = true, requires_grad = 'boolean' }

function M.logspace(start, stop, steps, base, opts)
  local fn = 'logspace'
  if is_table(base) then base, opts = nil, base end
  local o = {}
  if opts ~= nil then
    o = options.check(fn, opts, LOGSPACE_OPTS)
    if o.base ~= nil then
      if base ~= nil then raise(fn .. ': base given twice (as an argument and as an option)') end
      base = o.base
    end
  end
  if base == nil then base = 10 end
  if type(start) ~= 'number' or type(stop) ~= 'number' or type(base) ~= 'number' then
    raise(('%s: start, end and base must be numbers, got %s, %s and %s'):format(fn, typename(start), typename(stop), typename(base)))
  end
  if type(steps) ~= 'number' or steps % 1 ~= 0 or steps < 0 then
    raise(('%s: steps must be a non-negative integer, got %s'):format(fn, type(steps) == 'number' and tostring(steps) or typename(steps)))
  end
  local e = factory.linspace(start, stop, steps, { dtype = 'float64', device = o.device })
  local dt = o.dtype or core.dtypes[core.default_dtype]
  local r = Tensor.pow(base, e)
  if dt ~= 'float64' then r = r:to(dt) end
  if o.requires_grad then r.requires_grad = true end
  return r
end

-- ---- block_diag, cartesian_prod, combinations ------------------------------------------

-- the tensors of a call f(t1, t2, ...) or f({t1, t2, ...})
local function tensor_list(fn, ...)
  local list, n = { ... }, select('#', ...)
  if n == 1 and is_table(list[1]) then list = list[1]; n = #list end
  for i = 1, n do need(fn, list[i], 'argument ' .. i) end
  for i = 2, n do
    if list[i].device ~= list[1].device then
      raise(('%s: tensors must be on one device, argument %d is on %s, argument 1 on %s'):format(fn, i, list[i].device, list[1].device))
    end
  end
  return list, n
end

function M.block_diag(...)
  local fn = 'block_diag'
  local list, n = tensor_list(fn, ...)
  if n == 0 then return factory.zeros({ 1, 0 }) end
  local dt, blocks, cols = list[1].dtype, {}, 0
  for i = 1, n do
    local t, nd = list[i], list[i]:dim()
    if nd > 2 then raise(('%s: tensors must have at most 2 dims, argument %d is %d-d'):format(fn, i, nd)) end
    blocks[i] = nd == 2 and t or t:reshape({ 1, t:numel() })
    cols = cols + blocks[i]:size(2)
    dt = promote(dt, t.dtype)
  end
  local rows, dev, at = {}, list[1].device, 0
  for i = 1, n do
    local b = blocks[i]:to(dt)
    local r, c = b:size(1), b:size(2)
    local left = factory.zeros({ r, at }, { dtype = dt, device = dev })
    local right = factory.zeros({ r, cols - at - c }, { dtype = dt, device = dev })
    rows[i] = Tensor.cat({ left, b, right }, 2)
    at = at + c
  end
  return Tensor.cat(rows, 1)
end

local function same_dtype_1d(fn, list, n)
  for i = 1, n do
    if list[i]:dim() ~= 1 then raise(('%s: tensors must be 1-d, argument %d is %d-d'):format(fn, i, list[i]:dim())) end
    if list[i].dtype ~= list[1].dtype then
      raise(('%s: tensors must have one dtype, argument %d is %s, argument 1 %s'):format(fn, i, list[i].dtype, list[1].dtype))
    end
  end
end

function M.cartesian_prod(...)
  local fn = 'cartesian_prod'
  local list, n = tensor_list(fn, ...)
  if n == 0 then raise(fn .. ': expected at least one tensor') end
  same_dtype_1d(fn, list, n)
  if n == 1 then return list[1] end
  local grid = require('lunet.tensor_layout').meshgrid(list, { indexing = 'ij' })
  for i = 1, n do grid[i] = grid[i]:reshape({ grid[i]:numel() }) end
  return Tensor.stack(grid, 2)
end

local COMB_OPTS = { r = 'number', with_replacement = 'boolean' }

function M.combinations(t, r, with_replacement)
  local fn = 'combinations'
  need(fn, t)
  if is_table(r) then
    if with_replacement ~= nil then raise(fn .. ': expected an options table alone, got more arguments') end
    local o = options.check(fn, r, COMB_OPTS)
    r, with_replacement = o.r, o.with_replacement
  end
  r = integer(fn, 'r', r == nil and 2 or r)
  if r < 0 then raise(('%s: r must be non-negative, got %d'):format(fn, r)) end
  if with_replacement ~= nil and type(with_replacement) ~= 'boolean' then
    raise(('%s: with_replacement must be a boolean, got %s'):format(fn, typename(with_replacement)))
  end
  if t:dim() ~= 1 then raise(('%s: input must be 1-d, got %d-d'):format(fn, t:dim())) end
  if r == 0 then return factory.zeros({ 0 }, { dtype = t.dtype, device = t.device }) end
  local n = t:numel()
  if n ^ r > 2 ^ 40 then raise(('%s: %d^%d index combinations are too many'):format(fn, n, r)) end
  -- (as torch: the n^r grid of positions, kept where they increase)
  local idx = factory.arange(n, { dtype = 'int64', device = t.device })
  local list = {}
  for i = 1, r do list[i] = idx end
  local grid = require('lunet.tensor_layout').meshgrid(list, { indexing = 'ij' })
  local keep = factory.ones(grid[1]:size(), { dtype = 'bool', device = t.device })
  for i = 1, r - 1 do
    keep = keep:logical_and(with_replacement and grid[i]:le(grid[i + 1]) or grid[i]:lt(grid[i + 1]))
  end
  local cols = {}
  for i = 1, r do cols[i] = t:index_select(1, grid[i]:masked_select(keep):add(1)) end
  return Tensor.stack(cols, 2)
end

-- ---- trapezoid ------------------------------------------------------------------------

local TRAP_OPTS = { dx = 'number', dim = 'number' }

-- (y, x, opts) or (y, opts) -> y (float), the spacings along dim (a number or a
-- tensor of the size of dim minus one), the 1-based dim
local function trap_args(fn, y, x, opts)
  need(fn, y, 'y')
  if is_table(x) then x, opts = nil, x end
  local o = opts ~= nil and options.check(fn, opts, TRAP_OPTS) or {}
  if x ~= nil and o.dx ~= nil then raise(fn .. ': give x or dx, not both') end
  local nd = y:dim()
  if nd == 0 then raise(fn .. ': y must have at least 1 dim, got 0-d') end
  local dim = integer(fn, 'dim', o.dim or -1)
  local d = dim < 0 and nd + dim + 1 or dim
  if d < 1 or d > nd then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, dim, nd)) end
  if not y:is_floating_point() then y = y:to(core.dtypes[core.default_dtype]) end
  local len = y:size(d)
  if x == nil then return y, o.dx or 1, d, len end
  need(fn, x, 'x')
  if x.device ~= y.device then raise(('%s: x is on %s but y on %s'):format(fn, x.device, y.device)) end
  if x:dim() == 1 then
    if x:numel() ~= len then
      raise(('%s: x has %d elements but y has %d along dim %d'):format(fn, x:numel(), len, d))
    end
    local view = {}
    for i = 1, nd do view[i] = i == d and len or 1 end
    x = x:reshape(view)
    if len == 0 then return y, 0, d, len end
    return y, x:narrow(d, 2, len - 1) - x:narrow(d, 1, len - 1), d, len
  end
  if x:dim() ~= nd then raise(('%s: x must be 1-d or have y\'s dims (%d), got %d-d'):format(fn, nd, x:dim())) end
  local xl = x:size(d)
  if xl ~= len then raise(('%s: x has size %d along dim %d but y has %d'):format(fn, xl, d, len)) end
  if len == 0 then return y, 0, d, len end
  return y, x:narrow(d, 2, len - 1) - x:narrow(d, 1, len - 1), d, len
end

-- (y[i] + y[i+1]) / 2 * dx_i along dim d
local function areas(y, dx, d, len)
  local mid = (y:narrow(d, 2, len - 1) + y:narrow(d, 1, len - 1)) * 0.5
  return mid * dx
end

function M.trapezoid(y, x, opts)
  local dx, d, len
  y, dx, d, len = trap_args('trapezoid', y, x, opts)
  if len <= 1 then return (y:narrow(d, 1, 0)):sum(d) end
  return areas(y, dx, d, len):sum(d)
end

function M.cumulative_trapezoid(y, x, opts)
  local dx, d, len
  y, dx, d, len = trap_args('cumulative_trapezoid', y, x, opts)
  if len <= 1 then return y:narrow(d, 1, 0) * 1 end
  return areas(y, dx, d, len):cumsum(d)
end

return M
