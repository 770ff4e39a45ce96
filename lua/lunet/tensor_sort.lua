-- lunet.tensor_sort: sorting as Tensor methods, with PyTorch's names and
-- 1-based dims and indices (int64):
--   t:sort([dim[, descending]]) or t:sort({dim =, descending =, stable =}) -> values, indices
--   t:argsort([dim[, descending]]) or t:argsort({...})                    -> indices
--   t:topk(k[, dim[, largest[, sorted]]]) or t:topk(k, {dim =, largest =, sorted =}) -> values, indices
-- dim defaults to the last. Sorting is always stable (equal elements keep
-- their order: a right answer for stable = false too); NaN is above every
-- number (last ascending, first descending; topk's largest picks NaNs
-- first); -0.0 equals 0.0. topk's results are always in order (sorted =
-- false allows any order). The positions come from the C kernel
-- (ln_argsort); the values are t:gather(dim, indices), so they carry
-- autograd (gather's backward). Also lunet.sort(t, ...), lunet.argsort,
-- lunet.topk (lunet's functional forms of the methods).
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local Tensor = T.Tensor

local SORT_OPTS = { dim = 'number', descending = 'boolean', stable = 'boolean' }
local TOPK_OPTS = { dim = 'number', largest = 'boolean', sorted = 'boolean' }

local dims = require 'lunet.tensor_dim'
local need, flag, to_cdim, positions = dims.need, dims.flag, dims.to_cdim, dims.positions


-- the values at idx along C dim cd (through gather: autograd records it)
local function values_at(self, cd, idx)
  if self.p.ndim == 0 then return self:reshape({ 1 }):gather(1, idx:reshape({ 1 })):reshape({}) end
  return self:gather(cd + 1, idx)
end

-- (dim, descending) or an options table -> C dim, descending
local function sort_args(fn, self, dim, descending)
  need(fn, self)
  if is_table(dim) then
    if descending ~= nil then raise(fn .. ': expected an options table alone, got a second argument') end
    local o = options.check(fn, dim, SORT_OPTS)
    dim, descending = o.dim, o.descending
    flag(fn, 'stable', o.stable, false)
  end
  return to_cdim(fn, self, dim), flag(fn, 'descending', descending, false)
end

function Tensor.sort(self, dim, descending)
  local cd, desc = sort_args('sort', self, dim, descending)
  local idx = positions('sort', self, cd, desc, -1)
  return values_at(self, cd, idx), idx
end

function Tensor.argsort(self, dim, descending)
  local cd, desc = sort_args('argsort', self, dim, descending)
  local idx = positions('argsort', self, cd, desc, -1)
  return idx
end

-- topk(k[, dim[, largest[, sorted]]]) or topk(k, {dim =, largest =, sorted =})
function Tensor.topk(self, k, dim, largest, sorted)
  local fn = 'topk'
  need(fn, self)
  if type(k) ~= 'number' or k % 1 ~= 0 then
    raise(('%s: k must be an integer, got %s'):format(fn, type(k) == 'number' and tostring(k) or typename(k)))
  end
  if is_table(dim) then
    if largest ~= nil or sorted ~= nil then raise(fn .. ': expected an options table alone after k') end
    local o = options.check(fn, dim, TOPK_OPTS)
    dim, largest, sorted = o.dim, o.largest, o.sorted
  end
  local cd = to_cdim(fn, self, dim)
  largest = flag(fn, 'largest', largest, true)
  flag(fn, 'sorted', sorted, true)
  local nd = self.p.ndim
  local size = nd == 0 and 1 or tonumber(self.p.shape[cd])
  if k < 0 then raise(('%s: k must be >= 0, got %d'):format(fn, k)) end
  if k > size then
    raise(('%s: k %d is larger than dim %d\'s size %d'):format(fn, k, cd + 1, size))
  end
  local idx = positions(fn, self, cd, largest, k)
  return values_at(self, cd, idx), idx
end

return Tensor
