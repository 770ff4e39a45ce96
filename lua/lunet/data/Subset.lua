-- lunet.data.Subset(ds, indices): the samples of ds at indices (1-based; a
-- Lua list or an integer tensor). random_split(ds, lengths[, seed]) cuts ds
-- into non-overlapping random Subsets: lengths are counts summing to #ds, or
-- fractions summing to 1 (remainders go to the first parts, as in PyTorch).
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local Dataset = require 'lunet.data.Dataset'
local C = core.C

local Subset = Dataset:extend('Subset')

-- Length of any dataset: proxies and tables with __len or len(); an
-- integer >= 0 (a negative or fractional one made a loader of -1 batches)
local function checked(n)
  if type(n) ~= 'number' or n % 1 ~= 0 or n < 0 or n >= 2 ^ 53 then
    require('lunet.options').raise(('dataset: its length must be an integer >= 0, got %s'):format(tostring(n)))
  end
  return n
end
local function len(ds)
  if type(ds) == 'userdata' then return checked(#ds) end
  if is_table(ds) then
    local mt = getmetatable(ds)
    if mt and mt.__len then return checked(mt.__len(ds)) end
    if type(ds.len) == 'function' then return checked(ds:len()) end
    if type(ds.__len) == 'function' then return checked(ds:__len()) end
  end
  error('dataset: cannot take the length of a ' .. typename(ds) .. ' (define __len)', 3)
end
Subset.len = len

function Subset:__init(ds, indices)
  if ds == nil then error('Subset: dataset is nil', 3) end
  local n = len(ds)
  local m
  if T.is_tensor(indices) then
    if indices:dim() ~= 1 then error('Subset: indices must be 1-d', 3) end
    local buf, cnt = indices:long():read()
    m = cnt
    self.map = ffi.new('int64_t[?]', math.max(m, 1))
    for k = 0, m - 1 do self.map[k] = buf[k] - 1 end
  elseif is_table(indices) then
    m = #indices
    self.map = ffi.new('int64_t[?]', math.max(m, 1))
    for k = 1, m do
      local i = indices[k]
      if type(i) ~= 'number' or i % 1 ~= 0 then error(('Subset: index %d is not an integer'):format(k), 3) end
      self.map[k - 1] = i - 1
    end
  else
    error('Subset: indices must be a list or a tensor, got ' .. typename(indices), 3)
  end
  for k = 0, m - 1 do
    local i = self.map[k]
    if i < 0 or i >= n then
      error(('Subset: index %d is out of range 1..%d'):format(tonumber(i) + 1, n), 3)
    end
  end
  self.dataset, self.n = ds, m
end

-- from a 0-based int64 array that random_split made
local function from_map(ds, map, n)
  local s = Subset.new(Subset, ds, {})
  s.map, s.n = map, n
  return s
end

function Subset:__len() return self.n end

function Subset:get(i)
  if type(i) ~= 'number' or i % 1 ~= 0 or i < 1 or i > self.n then
    error(('Subset:get: index %s out of range 1..%d'):format(tostring(i), self.n), 2)
  end
  return self.dataset:get(tonumber(self.map[i - 1]) + 1)
end

function Subset:__tostring() return ('Subset(%d of %s)'):format(self.n, tostring(self.dataset)) end

local SPLIT_EPOCH = 0xFFFFFFFF   -- a permutation stream no loader epoch reaches

local function random_split(ds, lengths, seed)
  local n = len(ds)
  if not is_table(lengths) or #lengths == 0 then error('random_split: lengths must be a list', 2) end
  local counts, total = {}, 0
  for i, v in ipairs(lengths) do
    if type(v) ~= 'number' or v < 0 then error(('random_split: length %d must be a non-negative number'):format(i), 2) end
    total = total + v
  end
  if math.abs(total - 1) < 1e-9 and total <= 1 then   -- fractions, as PyTorch decides
    local used = 0
    for i, f in ipairs(lengths) do counts[i] = math.floor(n * f); used = used + counts[i] end
    for i = 0, n - used - 1 do local k = i % #counts + 1; counts[k] = counts[k] + 1 end
  else
    for i, v in ipairs(lengths) do
      if v % 1 ~= 0 then error('random_split: lengths must be integers or fractions summing to 1', 2) end
      counts[i] = v
    end
    if total ~= n then
      error(('random_split: lengths sum to %d but the dataset has %d samples'):format(total, n), 2)
    end
  end
  if seed == nil then seed = require('lunet').randint(0, 2 ^ 31 - 1, { 1 }):item() end
  require('lunet.options').seed('random_split', 'seed', seed)
  local perm = ffi.new('int64_t[?]', math.max(n, 1))
  if C.ln_data_permutation(perm, n, seed, SPLIT_EPOCH) ~= 0 then core.raise() end
  local parts, pos = {}, 0
  for i, c in ipairs(counts) do
    local map = ffi.new('int64_t[?]', math.max(c, 1))
    ffi.copy(map, perm + pos, c * 8)
    parts[i] = from_map(ds, map, c)
    pos = pos + c
  end
  return parts
end

return { Subset = Subset, random_split = random_split, len = len }
