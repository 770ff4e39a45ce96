-- nn.utils.rnn.PackedSequence, as torch's: a batch of sequences of
-- different lengths, sorted by length decreasing and packed time step by
-- time step. Fields data (sum(batch_sizes), *): step t's batch_sizes[t]
-- rows one after the other; batch_sizes (int64, on the CPU: how many
-- sequences are still running at each step); sorted_indices (int64,
-- 1-based: sorted row i is the caller's sequence sorted_indices[i]) and
-- unsorted_indices (its inverse), or nil when the input was already sorted.
-- Made by pack_padded_sequence / pack_sequence (nn/rnn_pack.lua); RNN, LSTM
-- and GRU take and return one.
local lunet = require 'lunet'
local options = require 'lunet.options'
local core = require 'lunet.core'

local PackedSequence = { __name = 'nn.utils.rnn.PackedSequence' }
PackedSequence.__index = PackedSequence

local function index_tensor(fn, what, v)
  if v == nil then return nil end
  if core.is_table(v) and getmetatable(v) == nil then v = lunet.tensor(v, { dtype = 'int64' }) end
  if not lunet.is_tensor(v) or v.ndim ~= 1 or v.dtype ~= 'int64' then
    options.fail(fn, what .. ' must be a 1-D int64 tensor (or a list of integers), got ' .. core.typename(v))
  end
  return v
end

-- the inverse of a permutation (1-based int64): a batch-sized list, not data
local function invert(p)
  local l, inv = p:tolist(), {}
  for i, j in ipairs(l) do inv[j] = i end
  return lunet.tensor(inv, { dtype = 'int64' })
end

-- PackedSequence(data, batch_sizes[, sorted_indices[, unsorted_indices]])
function PackedSequence.new(data, batch_sizes, sorted_indices, unsorted_indices)
  local fn = 'PackedSequence'
  if not lunet.is_tensor(data) or data.ndim < 1 then
    options.fail(fn, 'data must be a tensor of at least 1 dim, got ' .. core.typename(data))
  end
  batch_sizes = index_tensor(fn, 'batch_sizes', batch_sizes)
  if batch_sizes == nil then options.fail(fn, 'batch_sizes is required') end
  sorted_indices = index_tensor(fn, 'sorted_indices', sorted_indices)
  unsorted_indices = index_tensor(fn, 'unsorted_indices', unsorted_indices)
  if sorted_indices and not unsorted_indices then unsorted_indices = invert(sorted_indices) end
  local self = setmetatable({ data = data, batch_sizes = batch_sizes, sorted_indices = sorted_indices,
    unsorted_indices = unsorted_indices }, PackedSequence)
  local bs, total = batch_sizes:tolist(), 0   -- (a list per time step, for the loops over steps)
  for t, b in ipairs(bs) do
    if b < 1 or (t > 1 and b > bs[t - 1]) then
      options.fail(fn, 'batch_sizes must be positive and non-increasing, got {' .. table.concat(bs, ', ') .. '}')
    end
    total = total + b
  end
  if #bs == 0 or total ~= data:size(1) then
    options.fail(fn, ('batch_sizes sum to %d but data has %d rows'):format(total, data:size(1)))
  end
  if sorted_indices and sorted_indices:size(1) ~= bs[1] then
    options.fail(fn, ('sorted_indices has %d entries for a batch of %d'):format(sorted_indices:size(1), bs[1]))
  end
  self._bs = bs
  return self
end

function PackedSequence.is_packed(x) return getmetatable(x) == PackedSequence end

PackedSequence.invert = invert

-- the same sequences with data (and the indices) moved or cast, as torch's .to
function PackedSequence:to(...)
  return PackedSequence.new(self.data:to(...), self.batch_sizes, self.sorted_indices, self.unsorted_indices)
end

function PackedSequence:__tostring()
  return ('PackedSequence(data=%s %s, batch_sizes={%s}%s)'):format(table.concat(self.data:size(), 'x'),
    self.data.dtype, table.concat(self._bs, ', '), self.sorted_indices
      and (', sorted_indices={%s}'):format(table.concat(self.sorted_indices:tolist(), ', ')) or '')
end

return setmetatable(PackedSequence, { __call = function(_, ...) return PackedSequence.new(...) end })
