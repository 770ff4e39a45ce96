-- nn.utils.rnn, as torch.nn.utils.rnn: pad_sequence; PackedSequence,
-- pack_padded_sequence, pad_packed_sequence, pack_sequence (nn/rnn_pack.lua).
--   nn.utils.rnn.pad_sequence({a, b, c}, {batch_first = true, padding_value = -1})
local lunet = require 'lunet'
local core = require 'lunet.core'
local options = require 'lunet.options'
local fail = options.fail
local is_table, typename = core.is_table, core.typename

local rnn = {}

local OPTS = { batch_first = 'boolean', padding_value = 'number' }

-- pad_sequence(sequences[, opts]) (or torch's positional batch_first,
-- padding_value): the tensors {L_i, *} (same trailing sizes, dtype and
-- device) padded to the longest L with padding_value and stacked: {L, B, *},
-- or {B, L, *} with batch_first. Differentiable: each one padded by a cat.
function rnn.pad_sequence(sequences, batch_first, padding_value)
  local fn = 'pad_sequence'
  if is_table(batch_first) then
    if padding_value ~= nil then fail(fn, 'give the options as a table or as (batch_first, padding_value), not both') end
    local o = options.check(fn, batch_first, OPTS)
    batch_first, padding_value = o.batch_first, o.padding_value
  end
  if batch_first ~= nil and type(batch_first) ~= 'boolean' then fail(fn, 'batch_first must be a boolean, got ' .. typename(batch_first)) end
  if padding_value ~= nil and type(padding_value) ~= 'number' then fail(fn, 'padding_value must be a number, got ' .. typename(padding_value)) end
  if not is_table(sequences) or getmetatable(sequences) ~= nil then fail(fn, 'sequences must be a list of tensors, got ' .. typename(sequences)) end
  local n = table.maxn(sequences)
  if n == 0 then fail(fn, 'received an empty list of sequences') end
  local first = sequences[1]
  local longest = 0
  for i = 1, n do
    local s = sequences[i]
    if not lunet.is_tensor(s) then fail(fn, ('sequences[%d] is a %s, not a tensor'):format(i, typename(s))) end
    if s:dim() < 1 then fail(fn, ('sequences[%d] is 0-d; each needs a length (dim 1)'):format(i)) end
    local a, b = first:size(), s:size()
    table.remove(a, 1); table.remove(b, 1)
    if table.concat(a, ',') ~= table.concat(b, ',') or s.dtype ~= first.dtype or s.device ~= first.device then
      fail(fn, ('sequences[%d] is {%s} %s on %s, sequences[1] {%s} %s on %s: all must share their sizes after the first,'
        .. ' dtype and device'):format(i, table.concat(s:size(), ','), s.dtype, s.device, table.concat(first:size(), ','),
        first.dtype, first.device))
    end
    longest = math.max(longest, s:size(1))
  end
  local padded = {}
  for i = 1, n do
    local s = sequences[i]
    local l = s:size(1)
    if l < longest then
      local shape = s:size()
      shape[1] = longest - l
      s = lunet.cat({ s, lunet.full(shape, padding_value or 0, { dtype = s.dtype, device = s.device }) }, 1)
    end
    padded[i] = s
  end
  return lunet.stack(padded, batch_first and 1 or 2)
end

rnn.PackedSequence = require 'lunet.nn.PackedSequence'
local pack = require 'lunet.nn.rnn_pack'
rnn.pack_padded_sequence, rnn.pad_packed_sequence = pack.pack_padded_sequence, pack.pad_packed_sequence
rnn.pack_sequence = pack.pack_sequence

return rnn
