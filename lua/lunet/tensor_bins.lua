-- lunet.tensor_bins: PyTorch 1.13's binning ops, with Torch7's 1-based
-- positions (as argsort, nonzero and bincount report theirs):
--   lunet.searchsorted(sorted, values[, {right =, side =, out_int32 =, sorter =}])
--       the insertion position of each value in the last dim of sorted (1-d,
--       or with values' leading dims): 1..M+1 (torch's 0..M plus one), int64
--       (int32 with out_int32); values a tensor or a number (then 0-d). left
--       (default): the first position p with sorted[p] >= v; right (right =
--       true or side = 'right'): the first with sorted[p] > v. sorter: 1-based
--       positions that sort an unsorted sequence (as argsort gives).
--   lunet.bucketize(input, boundaries[, {right =, out_int32 =}])
--       = searchsorted(boundaries, input) for a 1-d boundaries
--   t:histc([bins = 100[, min = 0[, max = 0]]]) or t:histc({bins =, min =, max =})
--       counts of t's elements in bins equal-width bins over [min, max] (min =
--       max: t's own range); elements outside are not counted, NaN is
--       counted in the first bin (as torch 1.13 on the CPU)
-- None is differentiable (as in torch). Sorted sequences and values of
-- different dtypes are compared in their promoted dtype. A NaN value goes
-- after every number (position M+1, as torch); NaN inside sorted is not
-- ordered as torch's binary search would meet it.
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local Tensor, is_tensor = T.Tensor, T.is_tensor

local M = {}

local RANK = { bool = 0, uint8 = 1, int32 = 2, int64 = 3, float16 = 4, bfloat16 = 4, float32 = 5, float64 = 6 }
-- torch's promotion of two dtypes
function M.promote(a, b)
  if a == b then return a end
  if RANK[a] == 4 and RANK[b] == 4 then return 'float32' end
  return RANK[a] >= RANK[b] and a or b
end

local function shape_str(s) return '{' .. table.concat(s, ',') .. '}' end

-- the 0-based rank of each element along the last dim, from argsort's 1-based positions
local function ranks(order)
  local d, n = order:dim(), order:size(-1)
  local view = {}
  for i = 1, d do view[i] = i == d and n or 1 end
  local ar = factory.arange(n, { dtype = 'int64', device = order.device }):reshape(view):expand(order:size())
  return factory.zeros(order:size(), { dtype = 'int64', device = order.device }):scatter(d, order, ar)
end

-- S {.., M} and V {.., N} with one set of leading dims -> 1-based positions.
-- One stable sort of both together: before a value come the values ranked
-- below it and the sorted elements below it (left: values first, so equal
-- sorted elements come after; right: sorted first, so they come before).
local function positions(S, V, right)
  local m, n, d = S:size(-1), V:size(-1), S:dim()
  if n == 0 then return factory.zeros(V:size(), { dtype = 'int64', device = V.device }) end
  if m == 0 then return factory.ones(V:size(), { dtype = 'int64', device = V.device }) end
  local merged = ranks(Tensor.cat(right and { S, V } or { V, S }, d):argsort(d))
  local own = ranks(V:argsort(d))
  return merged:narrow(d, right and m + 1 or 1, n):sub(own):add(1)
end

local SS_OPTS = { right = 'boolean', side = 'string', out_int32 = 'boolean', sorter = 'tensor' }

local function search(fn, sorted, values, opts, one_d)
  local first, second = one_d and 'boundaries' or 'sorted_sequence', one_d and 'input' or 'values'
  if not is_tensor(sorted) then raise(('%s: %s must be a tensor, got %s'):format(fn, first, typename(sorted))) end
  local right, int32, sorter = false, false, nil
  if opts ~= nil then
    local o = options.check(fn, opts, one_d and { right = 'boolean', out_int32 = 'boolean' } or SS_OPTS)
    right, int32, sorter = o.right or false, o.out_int32 or false, o.sorter
    if o.side ~= nil then
      if o.side ~= 'left' and o.side ~= 'right' then raise(("%s: side must be 'left' or 'right', got '%s'"):format(fn, o.side)) end
      if o.right and o.side == 'left' then raise(fn .. ": side = 'left' and right = true contradict each other") end
      right = o.side == 'right'
    end
  end
  if type(values) == 'number' then
    local dt = (sorted:is_floating_point() or values % 1 == 0) and sorted.dtype or 'float64'
    values = factory.tensor(values, { dtype = dt, device = sorted.device })
  elseif not is_tensor(values) then
    raise(('%s: %s must be a tensor or a number, got %s'):format(fn, second, typename(values)))
  end
  if sorted.dtype == 'bool' or values.dtype == 'bool' then raise(fn .. ': bool tensors are not supported') end
  if sorted.device ~= values.device then
    raise(('%s: %s is on %s but %s on %s'):format(fn, first, sorted.device, second, values.device))
  end
  local sd, vs = sorted:dim(), values:size()
  if one_d and sd ~= 1 then raise(('%s: boundaries must be 1-d, got %d-d'):format(fn, sd)) end
  if sd == 0 then raise(('%s: %s must have at least 1 dim, got 0-d'):format(fn, first)) end
  local ss = sorted:size()
  if sd > 1 then
    local ok = #vs == sd
    for i = 1, sd - 1 do ok = ok and vs[i] == ss[i] end
    if not ok then
      raise(('%s: %s must be 1-d or have the leading dims of %s, got %s and %s')
        :format(fn, first, second, shape_str(ss), shape_str(vs)))
    end
  end
  local S, V = sorted:detach(), values:detach()
  if sorter ~= nil then
    if sorter.dtype ~= 'int64' then raise(('%s: sorter must be an int64 tensor, got %s'):format(fn, sorter.dtype)) end
    if shape_str(sorter:size()) ~= shape_str(ss) then
      raise(('%s: sorter must have the shape of %s %s, got %s'):format(fn, first, shape_str(ss), shape_str(sorter:size())))
    end
    local ok, r = pcall(S.gather, S, sd, sorter)
    if not ok then raise(('%s: sorter: %s'):format(fn, tostring(r):gsub('^.-gather: ', '', 1))) end
    S = r
  end
  local dt = M.promote(S.dtype, V.dtype)
  S, V = S:to(dt), V:to(dt)
  local r
  if sd == 1 then
    r = positions(S:reshape({ 1, ss[1] }), V:reshape({ 1, V:numel() }), right):reshape(vs)
  else
    r = positions(S, V, right)
  end
  return int32 and r:int() or r
end

function M.searchsorted(sorted, values, opts) return search('searchsorted', sorted, values, opts, false) end
function M.bucketize(input, boundaries, opts) return search('bucketize', boundaries, input, opts, true) end

-- ---- histc ----------------------------------------------------------------------------

local HISTC_OPTS = { bins = 'number', min = 'number', max = 'number' }

function Tensor.histc(self, bins, lo, hi)
  local fn = 'histc'
  if not is_tensor(self) then raise(('%s: input must be a tensor, got %s'):format(fn, typename(self))) end
  if is_table(bins) then
    if lo ~= nil or hi ~= nil then raise(fn .. ': expected an options table alone, got more arguments') end
    local o = options.check(fn, bins, HISTC_OPTS)
    bins, lo, hi = o.bins, o.min, o.max
  end
  bins, lo, hi = bins == nil and 100 or bins, lo == nil and 0 or lo, hi == nil and 0 or hi
  if type(bins) ~= 'number' or bins % 1 ~= 0 or bins < 1 or bins > 2 ^ 31 then
    raise(('%s: bins must be an integer in 1..2^31, got %s'):format(fn, type(bins) == 'number' and tostring(bins) or typename(bins)))
  end
  if type(lo) ~= 'number' or type(hi) ~= 'number' then
    raise(('%s: min and max must be numbers, got %s and %s'):format(fn, typename(lo), typename(hi)))
  end
  if not self:is_floating_point() then raise(('%s: input must be a float tensor, got %s'):format(fn, self.dtype)) end
  if lo > hi then raise(('%s: max must be larger than min, got min %s and max %s'):format(fn, tostring(lo), tostring(hi))) end
  local x = self:detach():reshape({ self:numel() })
  if lo == hi and x:numel() > 0 then
    local r = Tensor.stack({ x:min(), x:max() }):totable()   -- (one read-back)
    lo, hi = r[1], r[2]
  end
  if lo ~= lo or hi ~= hi or lo == -math.huge or hi == math.huge or lo == math.huge or hi == -math.huge then
    raise(('%s: range of [%s, %s] is not finite'):format(fn, tostring(lo), tostring(hi)))
  end
  if lo == hi then lo, hi = lo - 1, hi + 1 end
  -- bin of each element (0-based; max goes in the last); outside: an extra
  -- bin, dropped; NaN: the first bin (as torch 1.13's CPU kernel counts it)
  local b = x:sub(lo):mul(bins):div(hi - lo):floor():long():clamp_max(bins - 1)
  b = b:where(x:isnan():logical_not(), 0)
  b = b:where(x:lt(lo):logical_or(x:gt(hi)):logical_not(), bins):add_(1)
  local ones = factory.ones({ x:numel() }, { dtype = self.dtype, device = self.device })
  return factory.zeros({ bins + 1 }, { dtype = self.dtype, device = self.device }):index_add(1, b, ones):narrow(1, 1, bins)
end

return M
