-- lunet.data.ConcatDataset({ds1, ds2, ...}): the samples of ds1, then those
-- of ds2, ... (torch's). ds[i] / ds:get(i) finds the part by a binary search
-- over the cumulative lengths. The DataLoader batches it in Lua (ds:get per
-- sample), so it takes any mix of datasets; Subset and random_split work on it.
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local Dataset = require 'lunet.data.Dataset'
local len = require('lunet.data.Subset').len

local ConcatDataset = Dataset:extend('ConcatDataset')

function ConcatDataset:__init(datasets)
  if not is_table(datasets) or getmetatable(datasets) ~= nil then
    error('ConcatDataset: expected a list of datasets, got ' .. typename(datasets), 3)
  end
  if #datasets == 0 then error('ConcatDataset: the list of datasets is empty', 3) end
  local cum, total = {}, 0
  for k, ds in ipairs(datasets) do
    local ok, get = pcall(function() return ds.get end)
    if not ok or type(get) ~= 'function' then
      error(('ConcatDataset: datasets[%d] is not a dataset (%s without get)'):format(k, typename(ds)), 3)
    end
    total = total + len(ds)
    cum[k] = total   -- samples in parts 1..k
  end
  self.datasets, self.cumulative_sizes, self.n = datasets, cum, total
end

function ConcatDataset:__len() return self.n end

-- (the part holding sample i, and i's index in it)
function ConcatDataset:locate(i)
  local cum = self.cumulative_sizes
  local lo, hi = 1, #cum
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cum[mid] >= i then hi = mid else lo = mid + 1 end
  end
  return lo, i - (cum[lo - 1] or 0)
end

function ConcatDataset:get(i)
  if type(i) ~= 'number' or i % 1 ~= 0 or i < 1 or i > self.n then
    error(('ConcatDataset:get: index %s out of range 1..%d'):format(tostring(i), self.n), 2)
  end
  local k, j = self:locate(i)
  return self.datasets[k]:get(j)
end

function ConcatDataset:__tostring()
  local parts = {}
  for k, ds in ipairs(self.datasets) do parts[k] = tostring(ds) end
  return ('ConcatDataset(%d samples: %s)'):format(self.n, table.concat(parts, ', '))
end

return ConcatDataset
