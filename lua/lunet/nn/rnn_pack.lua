-- nn.utils.rnn's packing, as torch.nn.utils.rnn's: pack_padded_sequence,
-- pad_packed_sequence, pack_sequence (PackedSequence: nn/PackedSequence.lua).
-- All index ops (index_select, narrow, cat, stack) so gradients flow and
-- every backend runs them; the loops are over time steps and over the
-- batch's lengths, never over data.
local lunet = require 'lunet'
local core = require 'lunet.core'
local options = require 'lunet.options'
local PackedSequence = require 'lunet.nn.PackedSequence'
local fail, typename = options.fail, core.typename

local M = {}

-- lengths as a list of integers (a list, or a 1-D integer tensor)
local function lengths_of(fn, lengths, B)
  if lunet.is_tensor(lengths) then
    if lengths.ndim ~= 1 or lengths.dtype:find('int') == nil then
      fail(fn, 'lengths must be a 1-D integer tensor or a list, got a ' .. lengths.ndim .. '-D ' .. lengths.dtype .. ' tensor')
    end
    lengths = lengths:to('cpu'):tolist()
  elseif not core.is_table(lengths) or getmetatable(lengths) ~= nil then
    fail(fn, 'lengths must be a 1-D integer tensor or a list, got ' .. typename(lengths))
  end
  if #lengths ~= B then
    fail(fn, ('expected len(lengths) to be equal to batch_size, but got %d (batch_size=%d)'):format(#lengths, B))
  end
  for i, l in ipairs(lengths) do
    if type(l) ~= 'number' or l % 1 ~= 0 then fail(fn, ('lengths[%d] must be an integer, got %s'):format(i, tostring(l))) end
    if l <= 0 then
      fail(fn, "length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0")
    end
  end
  return lengths
end

local OPTS_PACK = { batch_first = 'boolean', enforce_sorted = 'boolean' }

-- pack_padded_sequence(input, lengths[, {batch_first = false, enforce_sorted = true}])
-- (or torch's positional batch_first, enforce_sorted): input (T, B, *), or
-- (B, T, *) with batch_first, holding sequence b in its first lengths[b] steps.
function M.pack_padded_sequence(input, lengths, ...)
  local fn = 'pack_padded_sequence'
  local o = options.check(fn, options.positional(fn, { 'batch_first', 'enforce_sorted' }, ...), OPTS_PACK) or {}
  if not lunet.is_tensor(input) or input.ndim < 2 then
    fail(fn, 'input must be a tensor of at least 2 dims (T, B, *), got ' ..
      (lunet.is_tensor(input) and input.ndim .. '-D tensor' or typename(input)))
  end
  if o.batch_first then input = input:transpose(1, 2) end
  local T, B = input:size(1), input:size(2)
  if input:numel() == 0 then fail(fn, 'cannot pack empty tensors') end
  lengths = lengths_of(fn, lengths, B)
  local sorted_indices
  if o.enforce_sorted == false then
    local order = {}
    for i = 1, B do order[i] = i end
    -- (stable, as torch's sort on the CPU: ties keep their order)
    table.sort(order, function(a, b) return lengths[a] > lengths[b] or (lengths[a] == lengths[b] and a < b) end)
    local sorted = {}
    for i, j in ipairs(order) do sorted[i] = lengths[j] end
    lengths, sorted_indices = sorted, lunet.tensor(order, { dtype = 'int64', device = input.device })
    input = input:index_select(2, sorted_indices)
  else
    for i = 2, B do
      if lengths[i] > lengths[i - 1] then
        fail(fn, '`lengths` array must be sorted in decreasing order when `enforce_sorted` is true.'
          .. ' You can pass `enforce_sorted = false` to pack_padded_sequence and/or pack_sequence to sidestep'
          .. ' this requirement if you do not need ONNX exportability.')
      end
    end
  end
  if lengths[1] > T then
    fail(fn, ('lengths[%d] is %d but the input has only %d time steps'):format(1, lengths[1], T))
  end
  local bs, pieces, b = {}, {}, B
  for t = 1, lengths[1] do
    while lengths[b] < t do b = b - 1 end
    bs[t], pieces[t] = b, input:select(1, t):narrow(1, 1, b)
  end
  return PackedSequence(lunet.cat(pieces, 1), bs, sorted_indices)
end

local OPTS_PAD = { batch_first = 'boolean', padding_value = 'number', total_length = 'number' }

-- pad_packed_sequence(sequence[, {batch_first = false, padding_value = 0,
-- total_length}]) (or torch's positional ones): padded (T, B, *) (or
-- (B, T, *)) in the caller's batch order, and the lengths (int64).
function M.pad_packed_sequence(seq, ...)
  local fn = 'pad_packed_sequence'
  local o = options.check(fn, options.positional(fn, { 'batch_first', 'padding_value', 'total_length' }, ...), OPTS_PAD) or {}
  if not PackedSequence.is_packed(seq) then fail(fn, 'sequence must be a PackedSequence, got ' .. typename(seq)) end
  local bs, data = seq._bs, seq.data
  local T, B = #bs, bs[1]
  local total = o.total_length or T
  if total % 1 ~= 0 or total < T then
    fail(fn, ('expected total_length to be at least the length of the longest sequence in input, but got'
      .. ' total_length=%s and max sequence length being %d'):format(tostring(o.total_length), T))
  end
  local shape = data:size()
  local function pad(rows)
    shape[1] = rows
    return lunet.full(shape, o.padding_value or 0, { dtype = data.dtype, device = data.device })
  end
  local steps, off = {}, 1
  for t = 1, T do
    local piece = data:narrow(1, off, bs[t])
    steps[t] = bs[t] < B and lunet.cat({ piece, pad(B - bs[t]) }, 1) or piece
    off = off + bs[t]
  end
  local blank = total > T and pad(B) or nil
  for t = T + 1, total do steps[t] = blank end
  local out = lunet.stack(steps, 1)
  local lengths = {}
  for b = 1, B do
    local n = 0
    for t = 1, T do if bs[t] >= b then n = t end end
    lengths[b] = n
  end
  if seq.unsorted_indices then
    out = out:index_select(2, seq.unsorted_indices)
    local l = {}
    for i, j in ipairs(seq.unsorted_indices:tolist()) do l[i] = lengths[j] end
    lengths = l
  end
  if o.batch_first then out = out:transpose(1, 2) end
  return out, lunet.tensor(lengths, { dtype = 'int64' })
end

-- pack_sequence(sequences[, {enforce_sorted = true}]) (or torch's positional
-- enforce_sorted): the list of (L_i, *) tensors packed.
function M.pack_sequence(sequences, ...)
  local fn = 'pack_sequence'
  local o = options.check(fn, options.positional(fn, { 'enforce_sorted' }, ...), { enforce_sorted = 'boolean' }) or {}
  if not core.is_table(sequences) or getmetatable(sequences) ~= nil or #sequences == 0 then
    fail(fn, 'sequences must be a non-empty list of tensors, got ' .. typename(sequences))
  end
  local padded = require('lunet.nn.rnn_utils').pad_sequence(sequences)
  local lengths = {}
  for i = 1, #sequences do lengths[i] = sequences[i]:size(1) end
  return M.pack_padded_sequence(padded, lengths, { enforce_sorted = o.enforce_sorted })
end

return M
