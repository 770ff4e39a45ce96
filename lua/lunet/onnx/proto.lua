-- lunet.onnx.proto: the protobuf wire format, only what ONNX's messages need
-- (varints, fixed32 floats, length-delimited fields, packed repeated
-- numbers). Writing: builders that return strings. Reading: decode(schema,
-- bytes) -> a table, every length checked against the bytes left, so a
-- corrupt file is an error naming what is wrong, never a crash or a hang.
local ffi = require 'ffi'
local bit = require 'bit'

local M = {}

local f32 = ffi.new('float[1]')
local u64 = ffi.typeof('uint64_t')
local i64 = ffi.typeof('int64_t')

-- ---- writing ------------------------------------------------------------------------

-- an integer as a varint (negative ones as 10-byte two's complement, as int64)
local function varint(n)
  if n >= 0 and n < 2 ^ 53 then
    local out = {}
    repeat
      local b = n % 128
      n = (n - b) / 128
      out[#out + 1] = string.char(n > 0 and b + 128 or b)
    until n == 0
    return table.concat(out)
  end
  local u, out = ffi.cast(u64, ffi.cast(i64, n)), {}
  repeat
    local b = tonumber(bit.band(u, 0x7f))
    u = bit.rshift(u, 7)
    out[#out + 1] = string.char(u ~= 0 and b + 128 or b)
  until u == 0
  return table.concat(out)
end
M.varint = varint

local function key(field, wire) return varint(field * 8 + wire) end

function M.int(field, n) return key(field, 0) .. varint(n) end
function M.bytes(field, s) return key(field, 2) .. varint(#s) .. s end
M.msg, M.str = M.bytes, M.bytes
function M.float(field, x)
  f32[0] = x
  return key(field, 5) .. ffi.string(f32, 4)
end
-- repeated int64 / float, unpacked (onnx.proto is proto2: AttributeProto's
-- ints and floats and TensorProto's dims are not packed)
function M.ints(field, list)
  local parts = {}
  for i = 1, #list do parts[i] = M.int(field, list[i]) end
  return table.concat(parts)
end
function M.floats(field, list)
  local parts = {}
  for i = 1, #list do parts[i] = M.float(field, list[i]) end
  return table.concat(parts)
end
-- packed repeated int64 / float
function M.packed_ints(field, list)
  local parts = {}
  for i = 1, #list do parts[i] = varint(list[i]) end
  return M.bytes(field, table.concat(parts))
end
function M.packed_floats(field, list)
  local a = ffi.new('float[?]', math.max(#list, 1))
  for i = 1, #list do a[i - 1] = list[i] end
  return M.bytes(field, ffi.string(a, 4 * #list))
end

-- ---- reading ------------------------------------------------------------------------

-- A schema maps field numbers to {name, kind[, schema]}; kind is 'int',
-- 'float', 'bytes', 'msg' (then schema), 'ints' or 'floats' (repeated,
-- packed or not); a name ending in '[]' is a repeated field (a list).
-- Unknown fields are skipped.

local Reader = {}
Reader.__index = Reader

local function fail(r, what) error(('%s: %s at byte %d'):format(r.fn, what, r.pos), 0) end

-- a varint at r.pos (a Lua number; int64 values read as signed)
local function read_varint(r)
  local p, lim, buf = r.pos, r.lim, r.buf
  local n, scale = 0, 1
  for i = 0, 9 do
    if p >= lim then fail(r, 'truncated varint') end
    local b = buf[p]
    p = p + 1
    if i < 7 then
      n = n + (b % 128) * scale
      scale = scale * 128
      if b < 128 then r.pos = p; return n end
    else
      -- past 49 bits: redo it in 64-bit integers (large or negative int64)
      local u, q = ffi.new(u64, 0), r.pos
      for k = 0, 9 do
        if q >= lim then fail(r, 'truncated varint') end
        local c = buf[q]
        q = q + 1
        u = bit.bor(u, bit.lshift(ffi.cast(u64, c % 128), 7 * k))
        if c < 128 then r.pos = q; return tonumber(ffi.cast(i64, u)) end
      end
      fail(r, 'varint longer than 10 bytes')
    end
  end
  fail(r, 'varint longer than 10 bytes')
end

local function read_bytes_range(r)
  local len = read_varint(r)
  if len < 0 or len > r.lim - r.pos then fail(r, ('length %d runs past the end'):format(len)) end
  local a = r.pos
  r.pos = a + len
  return a, a + len
end

local function read_float(r)
  if r.lim - r.pos < 4 then fail(r, 'truncated float') end
  ffi.copy(f32, r.buf + r.pos, 4)
  r.pos = r.pos + 4
  return tonumber(f32[0])
end

local function skip(r, wire)
  if wire == 0 then read_varint(r)
  elseif wire == 1 then
    if r.lim - r.pos < 8 then fail(r, 'truncated fixed64') end
    r.pos = r.pos + 8
  elseif wire == 2 then read_bytes_range(r)
  elseif wire == 5 then
    if r.lim - r.pos < 4 then fail(r, 'truncated fixed32') end
    r.pos = r.pos + 4
  else fail(r, ('bad wire type %d'):format(wire)) end
end

local WIRE = { int = 0, float = 5, bytes = 2, msg = 2, ints = 0, floats = 5 }

local decode_range
local function put(out, name, v)
  local list = name:match('^(.*)%[%]$')
  if list then
    local t = out[list] or {}
    t[#t + 1] = v
    out[list] = t
  else
    out[name] = v
  end
end

function decode_range(r, schema, a, b, depth)
  if depth > 32 then fail(r, 'messages nested too deep') end
  local out, saved = {}, r.lim
  r.pos, r.lim = a, b
  while r.pos < b do
    local k = read_varint(r)
    local field, wire = math.floor(k / 8), k % 8
    if field < 1 then fail(r, ('bad field number %d'):format(field)) end
    local spec = schema[field]
    local kind = spec and spec[2]
    if not spec then
      skip(r, wire)
    elseif kind == 'ints' or kind == 'floats' then
      local list = out[spec[1]] or {}
      out[spec[1]] = list
      local one = kind == 'ints' and read_varint or read_float
      if wire == 2 then   -- packed
        local s, e = read_bytes_range(r)
        local after = r.pos
        r.pos = s
        local outer = r.lim
        r.lim = e
        while r.pos < e do list[#list + 1] = one(r) end
        r.pos, r.lim = after, outer
      elseif wire == WIRE[kind] then
        list[#list + 1] = one(r)
      else
        fail(r, ('field %d has wire type %d'):format(field, wire))
      end
    elseif wire ~= WIRE[kind] then
      fail(r, ('field %s has wire type %d'):format(spec[1], wire))
    elseif kind == 'int' then put(out, spec[1], read_varint(r))
    elseif kind == 'float' then put(out, spec[1], read_float(r))
    elseif kind == 'bytes' then
      local s, e = read_bytes_range(r)
      put(out, spec[1], ffi.string(r.buf + s, e - s))
    else   -- msg
      local s, e = read_bytes_range(r)
      local after = r.pos
      put(out, spec[1], decode_range(r, spec[3], s, e, depth + 1))
      r.pos, r.lim = after, b
    end
  end
  r.lim = saved
  return out
end

-- decode(schema, bytes, fn): the message in bytes as a table; errors start
-- with fn (e.g. 'onnx.load: corrupt file m.onnx')
function M.decode(schema, s, fn)
  local r = setmetatable({ buf = ffi.cast('const uint8_t *', s), pos = 0, lim = #s, fn = fn, keep = s }, Reader)
  return decode_range(r, schema, 0, #s, 0)
end

-- ---- ONNX's messages (onnx.proto, the fields lunet reads) --------------------------------

local S = {}
S.Dimension = { { 'dim_value', 'int' }, { 'dim_param', 'bytes' } }
S.Shape = { { 'dim[]', 'msg', S.Dimension } }
S.TensorType = { { 'elem_type', 'int' }, { 'shape', 'msg', S.Shape } }
S.Type = { { 'tensor_type', 'msg', S.TensorType } }
S.ValueInfo = { { 'name', 'bytes' }, { 'type', 'msg', S.Type } }
S.Tensor = { { 'dims', 'ints' }, { 'data_type', 'int' }, nil, { 'float_data', 'floats' }, { 'int32_data', 'ints' },
  nil, { 'int64_data', 'ints' }, { 'name', 'bytes' }, { 'raw_data', 'bytes' }, [13] = { 'external_data[]', 'bytes' },
  [14] = { 'data_location', 'int' } }
S.Attribute = { { 'name', 'bytes' }, { 'f', 'float' }, { 'i', 'int' }, { 's', 'bytes' }, { 't', 'msg', S.Tensor },
  { 'g', 'bytes' }, { 'floats', 'floats' }, { 'ints', 'ints' }, { 'strings[]', 'bytes' }, { 'tensors[]', 'msg', S.Tensor },
  [20] = { 'type', 'int' } }
S.Node = { { 'input[]', 'bytes' }, { 'output[]', 'bytes' }, { 'name', 'bytes' }, { 'op_type', 'bytes' },
  { 'attribute[]', 'msg', S.Attribute }, [7] = { 'domain', 'bytes' } }
S.Graph = { { 'node[]', 'msg', S.Node }, { 'name', 'bytes' }, [5] = { 'initializer[]', 'msg', S.Tensor },
  [11] = { 'input[]', 'msg', S.ValueInfo }, [12] = { 'output[]', 'msg', S.ValueInfo },
  [15] = { 'sparse_initializer[]', 'bytes' } }
S.OpsetId = { { 'domain', 'bytes' }, { 'version', 'int' } }
S.Model = { { 'ir_version', 'int' }, { 'producer_name', 'bytes' }, { 'producer_version', 'bytes' },
  [7] = { 'graph', 'msg', S.Graph }, [8] = { 'opset_import[]', 'msg', S.OpsetId } }
M.schema = S

return M
