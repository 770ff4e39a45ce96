-- lunet.tensor_select: PyTorch 1.13's selections whose result's size
-- depends on the values, as Tensor methods with 1-based indices (int64):
--   t:nonzero()                     -> {n, ndim} int64: the 1-based indices of the
--                                      nonzero elements (NaN counts), row-major order
--   t:nonzero({as_tuple = true})    -> a list of ndim 1-d index tensors (one, for a 0-d t)
--   t:argwhere()                    -> t:nonzero()
--   t:masked_select(mask)           -> the 1-d tensor of t's elements where mask
--                                      (bool, or uint8: nonzero, where PyTorch refuses
--                                      values but 0 and 1) is true; mask and t
--                                      broadcast together; differentiable
--   t:unique([{sorted =, return_inverse =, return_counts =, dim =}])
--   t:unique_consecutive([{return_inverse =, return_counts =, dim =}])
--                                   -> values[, inverse][, counts] (the last two only
--                                      when asked for, in that order, as torch.unique's)
--   t:bincount([weights[, minlength]]) or t:bincount([weights, ]{weights =, minlength =})
--                                   -> the count of each value 0..max(t) (at least
--                                      minlength bins) of a 1-d non-negative integer t;
--                                      with weights, their sums
-- unique's values are always sorted (sorted = false allows any order, as in
-- PyTorch, whose CPU kernel then gives a hash order); its inverse has t's
-- shape and holds 1-based positions in values; counts are int64. With dim,
-- the slices along dim are compared as wholes and sorted lexicographically
-- (the inverse is then 1-d, one entry per slice). NaN: every NaN is a value
-- of its own (PyTorch 1.13's values, sorted last), counted once; PyTorch
-- 1.13's CPU unique counts them 0 and points their inverse at the first
-- value instead, which lunet does not copy. unique and unique_consecutive
-- give no gradient (PyTorch's is not implemented). bincount takes int32,
-- int64 or uint8 input; without weights the result is int64, with float32
-- weights float32 and with any other weights float64 (as PyTorch's); a
-- gradient flows to float weights (the output's gradient at each weight's
-- bin), where PyTorch 1.13 has none; an empty input with weights gives
-- zeros of the weights' result dtype (PyTorch 1.13: int64 zeros).
-- Everything is composed from tensor ops (cumsum, scatter_add, the sort
-- kernel, index_select, gather), so it runs wherever those have kernels,
-- after one read-back of the result's size to the host (of the maximum too,
-- for bincount). Also lunet.nonzero(t, ...), lunet.argwhere, lunet.masked_select,
-- lunet.unique, lunet.unique_consecutive, lunet.bincount (the functional forms).
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local Tensor, is_tensor, check, wrap = T.Tensor, T.is_tensor, T.check, T.wrap
local C = core.C

local dims = require 'lunet.tensor_dim'
local need, flag = dims.need, dims.flag

local NONZERO_OPTS = { as_tuple = 'boolean' }
local UNIQUE_OPTS = { sorted = 'boolean', return_inverse = 'boolean', return_counts = 'boolean', dim = 'number' }
local CONSECUTIVE_OPTS = { return_inverse = 'boolean', return_counts = 'boolean', dim = 'number' }
local BINCOUNT_OPTS = { weights = 'tensor', minlength = 'number' }
local INTEGER = { int32 = true, int64 = true, uint8 = true }

local function shape_str(s) return '{' .. table.concat(s, ',') .. '}' end

local function int64(t, shape) return factory.zeros(shape, { dtype = 'int64', device = t.device }) end

-- the 0-based flat positions (int64, 1-d) of the true elements of the 1-d
-- bool tensor m, in order, and their count (the one read-back): the k-th
-- true element's position is added into slot k of n + 1 slots (its rank,
-- the running count of trues), the false elements' zeros into the slot of
-- the last true before them (slot 0 before the first)
local function true_positions(m)
  local n = m:sum():item()
  local N = m:numel()
  local rank = m:cumsum(1)
  local at = factory.arange(N, { dtype = 'int64', device = m.device }):mul_(m)
  local out = int64(m, { n + 1 })
  check(C.ln_scatter_add_(out.p, 0, rank.p, at.p))   -- (0-based slots: no autograd here)
  return out:narrow(1, 2, n), n
end

-- 0-based flat positions -> one 1-based index column (int64) per dim of shape
local function unravel(pos, shape)
  local k = #shape
  local cols = {}
  if k == 1 then cols[1] = pos + 1; return cols end
  local q = pos:double()   -- (exact below 2^53 elements)
  for d = k, 2, -1 do
    local c = q:fmod(shape[d])
    cols[d] = c:long() + 1
    q = (q - c) / shape[d]
  end
  cols[1] = q:long() + 1
  return cols
end

local named = options.named   -- (an error inside names the method called)

-- ---- nonzero, argwhere --------------------------------------------------------------

local function nonzero(self, opts)
  need('nonzero', self)
  local as_tuple = false
  if opts ~= nil then
    if not is_table(opts) then
      raise(('nonzero: options must be a table ({as_tuple = true}), got %s'):format(typename(opts)))
    end
    as_tuple = flag('nonzero', 'as_tuple', options.check('nonzero', opts, NONZERO_OPTS).as_tuple, false)
  end
  local shape = self:size()
  local m = self:detach():ne(0):reshape({ self:numel() })
  local pos, n = true_positions(m)
  if #shape == 0 then
    -- (PyTorch: {n, 0}; as a tuple, one index column of 0s, 1s here)
    if as_tuple then return { pos + 1 } end
    return factory.zeros({ n, 0 }, { dtype = 'int64', device = self.device })
  end
  local cols = unravel(pos, shape)
  if as_tuple then return cols end
  return Tensor.stack(cols, 2)
end
Tensor.nonzero = named('nonzero', nonzero)

function Tensor.argwhere(self)
  need('argwhere', self)
  return Tensor.nonzero(self)
end

-- ---- masked_select ------------------------------------------------------------------

-- the shape a and b broadcast to (tables of sizes), or nil
local function broadcast(a, b)
  local n = math.max(#a, #b)
  local out = {}
  for i = 1, n do
    local x, y = a[i - n + #a] or 1, b[i - n + #b] or 1
    if x ~= y and x ~= 1 and y ~= 1 then return nil end
    out[i] = x == 1 and y or x
  end
  return out
end

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function masked_select(self, mask)
  local fn = 'masked_select'
  need(fn, self)
  if not is_tensor(mask) then raise(('%s: mask must be a tensor, got %s'):format(fn, typename(mask))) end
  if mask.dtype ~= 'bool' and mask.dtype ~= 'uint8' then
    raise(('%s: mask must be a bool (or uint8) tensor, got %s'):format(fn, mask.dtype))
  end
  if mask.device ~= self.device then
    raise(('%s: mask is on %s but the input is on %s'):format(fn, mask.device, self.device))
  end
  local xs, ms = self:size(), mask:size()
  local shape = broadcast(xs, ms)
  if not shape then
    raise(('%s: the input\'s shape %s and the mask\'s %s cannot broadcast'):format(fn, shape_str(xs), shape_str(ms)))
  end
  local N = 1
  for i = 1, #shape do N = N * shape[i] end
  local m = mask:detach()
  if m.dtype ~= 'bool' then m = m:ne(0) end
  if not same(ms, shape) then m = m:expand(shape) end
  local pos = true_positions(m:reshape({ N }))
  local x = same(xs, shape) and self or self:expand(shape)   -- (expand's gradient sums the broadcast dims)
  return x:reshape({ N }):index_select(1, pos + 1)
end
Tensor.masked_select = named('masked_select', masked_select)

-- ---- unique, unique_consecutive -----------------------------------------------------

-- (unique's inner steps work on 0-based positions through the kernels
-- themselves: nothing there is recorded, and no +1/-1 passes)
local function argsort0(fn, x, cd)
  local r = C.ln_argsort(x.p, cd, 0, -1)   -- (stable: equal keys keep their order)
  if r == nil then raise(fn .. ': ' .. core.last_error():gsub('^%w+: ', '', 1)) end
  return wrap(r)
end
local function select0(x, idx) return wrap(C.ln_index_select(x.p, 0, idx.p)) end
local function scatter0(out, idx, src)
  check(C.ln_scatter_add_(out.p, 0, idx.p, src.p))
  return out
end

-- the 1-d bool tensor of where a new run starts along dim 1 of s (N > 0
-- slices): the first slice, and every slice that differs from the one
-- before it (NaN differs from everything)
local function run_starts(s, N)
  local first = factory.ones({ 1 }, { dtype = 'bool', device = s.device })
  if N == 1 then return first end
  local d = s:narrow(1, 2, N - 1):ne(s:narrow(1, 1, N - 1))
  if d:dim() > 1 then d = d:reshape({ N - 1, d:numel() / (N - 1) }):any(2) end
  return Tensor.cat({ first, d }, 1)
end

-- the runs' lengths: the distances between consecutive starts (0-based, {K})
local function run_counts(first, K, N)
  local ends = Tensor.cat({ first:narrow(1, 2, K - 1), factory.full({ 1 }, N, { dtype = 'int64', device = first.device }) }, 1)
  return ends:sub_(first)
end

-- dense ranks (0-based, int64) of the rows of each column of k ({S, c}, S > 1):
-- equal values the same rank, ranks in the values' order, NaN each its own
local function dense_ranks(fn, k, S)
  local order = argsort0(fn, k, 0)
  local s = wrap(C.ln_gather(k.p, 0, order.p))
  local change = s:narrow(1, 2, S - 1):ne(s:narrow(1, 1, S - 1)):long()
  local r = Tensor.cat({ int64(k, { 1, k:size(2) }), change:cumsum(1) }, 1)
  return scatter0(int64(k, { S, k:size(2) }), order, r)
end

-- one int64 key per row of x ({S, M}, S > 1) ordering the rows as their
-- lexicographic order does, equal rows equal keys: the dense ranks of each
-- column, then of pairs of columns (the first the more significant),
-- halving the columns each round (log2(M) + 1 sorts, each of all columns at once)
local function row_keys(fn, x, S)
  local r = dense_ranks(fn, x, S)
  while r:size(2) > 1 do
    local c = r:size(2)
    if c % 2 == 1 then r = Tensor.cat({ r, int64(r, { S, 1 }) }, 2); c = c + 1 end
    local pairs_ = r:reshape({ S, c / 2, 2 })
    r = dense_ranks(fn, pairs_:select(3, 1) * S + pairs_:select(3, 2), S)
  end
  return r:select(2, 1)
end

-- (self, dim or nil) -> the slices to compare, x ({N, ...}: dim moved first, or
-- all elements as {N}), N, and how to put values ({K, ...}) back
local function slices(fn, self, dim)
  if dim == nil then
    local N = self:numel()
    return self:reshape({ N }), N, function(v) return v end
  end
  if type(dim) ~= 'number' or dim % 1 ~= 0 then
    raise(('%s: dim must be an integer, got %s'):format(fn, tostring(dim)))
  end
  local nd = self:dim()
  local c = dim < 0 and nd + dim or dim - 1
  if c < 0 or c >= nd then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, dim, nd)) end
  local shape = self:size()
  local N = shape[c + 1]
  if N > 0 then
    for i = 1, nd do
      if shape[i] == 0 then
        raise(('%s: dim %d has size 0 and is not the one selected (dim %d), so the slices are empty'):format(fn, i, c + 1))
      end
    end
  end
  local x = c == 0 and self or self:transpose(1, c + 1)
  return x, N, function(v) return c == 0 and v or v:transpose(1, c + 1) end
end

-- the common part of unique and unique_consecutive: values[, inverse][, counts]
local function unique_of(fn, self, o, sort)
  local inverse, counts = flag(fn, 'return_inverse', o.return_inverse, false), flag(fn, 'return_counts', o.return_counts, false)
  if o.sorted ~= nil then flag(fn, 'sorted', o.sorted, true) end
  local dim = o.dim
  local x, N, back = slices(fn, self:detach(), dim)
  local values, inv, cnt
  if N == 0 then
    values = back(x:clone())
    inv = int64(self, dim == nil and self:size() or { 0 })
    cnt = int64(self, { 0 })
  else
    -- key: one value per slice (for rows of several elements, their lexicographic rank)
    local key, order = x, nil
    if x:dim() > 1 then
      key = x:reshape({ N, x:numel() / N })
      if sort and N > 1 then key = row_keys(fn, key, N) end
    end
    if sort then
      order = argsort0(fn, key:dim() > 1 and key:select(2, 1) or key, 0)   -- (N = 1: any order)
      key = select0(key, order)
    end
    local starts = run_starts(key, N)
    local first, K = true_positions(starts)   -- (0-based)
    values = back(select0(x, sort and select0(order, first) or first))
    if inverse then
      local run = starts:cumsum(1)   -- (each slice's run, 1-based, in key's order)
      inv = sort and scatter0(int64(self, { N }), order, run) or run
      if dim == nil then inv = inv:reshape(self:size()) end
    end
    if counts then cnt = run_counts(first, K, N) end
  end
  if inverse and counts then return values, inv, cnt end
  if inverse then return values, inv end
  if counts then return values, cnt end
  return values
end

local function unique_opts(fn, o, known)
  if o == nil then return {} end
  if not is_table(o) then raise(('%s: options must be a table, got %s'):format(fn, typename(o))) end
  return options.check(fn, o, known)
end

local function unique(self, o, extra)
  need('unique', self)
  if extra ~= nil then raise('unique: expected one options table, got a second argument') end
  return unique_of('unique', self, unique_opts('unique', o, UNIQUE_OPTS), true)
end
Tensor.unique = named('unique', unique)

local function unique_consecutive(self, o, extra)
  need('unique_consecutive', self)
  if extra ~= nil then raise('unique_consecutive: expected one options table, got a second argument') end
  return unique_of('unique_consecutive', self, unique_opts('unique_consecutive', o, CONSECUTIVE_OPTS), false)
end
Tensor.unique_consecutive = named('unique_consecutive', unique_consecutive)

-- ---- bincount -----------------------------------------------------------------------

-- (weights[, minlength]), (weights, {minlength =}), ({weights =, minlength =})
local function bincount_args(fn, a, b, c)
  local weights, minlength = a, b
  if is_table(a) then
    if b ~= nil then raise(fn .. ': expected the options table last') end
    local o = options.check(fn, a, BINCOUNT_OPTS)
    weights, minlength = o.weights, o.minlength
  elseif is_table(b) then
    if c ~= nil then raise(fn .. ': expected the options table last') end
    local o = options.check(fn, b, BINCOUNT_OPTS)
    if o.weights ~= nil then
      if a ~= nil then raise(fn .. ': weights given twice (as an argument and as an option)') end
      weights = o.weights
    end
    minlength = o.minlength
  elseif c ~= nil then
    raise(fn .. ': expected at most weights and minlength')
  end
  if weights ~= nil and not is_tensor(weights) then
    raise(('%s: weights must be a tensor, got %s'):format(fn, typename(weights)))
  end
  if minlength == nil then minlength = 0 end
  if type(minlength) ~= 'number' or minlength % 1 ~= 0 or minlength < 0 then
    raise(('%s: minlength must be a non-negative integer, got %s'):format(fn,
      type(minlength) == 'number' and tostring(minlength) or typename(minlength)))
  end
  return weights, minlength
end

-- the gradient of the weights: the output's at each weight's bin
local function bincount_backward(n, g)
  local gw = g:index_select(1, n.x)
  if gw.dtype ~= n.dtype then gw = gw:to(n.dtype) end
  return gw
end

local function bincount(self, a, b, c)
  local fn = 'bincount'
  need(fn, self)
  local weights, minlength = bincount_args(fn, a, b, c)
  if self:dim() ~= 1 then raise(('%s: input must be 1-d, got %d-d'):format(fn, self:dim())) end
  if not INTEGER[self.dtype] then
    raise(('%s: input must be an integer tensor (int32, int64 or uint8), got %s'):format(fn, self.dtype))
  end
  local n = self:numel()
  if weights then
    if weights:dim() ~= 1 or weights:numel() ~= n then
      raise(('%s: weights must be 1-d with the input\'s length %d, got shape %s'):format(fn, n, shape_str(weights:size())))
    end
    if weights.device ~= self.device then
      raise(('%s: weights are on %s but the input is on %s'):format(fn, weights.device, self.device))
    end
  end
  local bins = minlength
  if n > 0 then
    local lo_hi = Tensor.stack({ self:min(), self:max() }):totable()   -- (one read-back)
    if lo_hi[1] < 0 then
      raise(('%s: input must be non-negative, got a value of %s'):format(fn, tostring(lo_hi[1])))
    end
    bins = math.max(bins, lo_hi[2] + 1)
  end
  local idx = self:long() + 1
  if not weights then
    return int64(self, { bins }):scatter_add_(1, idx, factory.ones({ n }, { dtype = 'int64', device = self.device }))
  end
  local dt = weights.dtype == 'float32' and 'float32' or 'float64'
  local w = weights:detach()
  local out = factory.zeros({ bins }, { dtype = dt, device = self.device }):scatter_add_(1, idx, w.dtype == dt and w or w:to(dt))
  local autograd = require 'lunet.autograd'   -- (loaded after the tensor modules)
  if weights.p.grad_flag ~= 0 and autograd.is_grad_enabled() then
    local G = require 'lunet.autograd.graph'
    local node = G.node(bincount_backward, fn, G.edge(weights))
    node.x, node.dtype = idx, weights.dtype
    G.attach(out, node)
  end
  return out
end
Tensor.bincount = named('bincount', bincount)

return Tensor
