-- lunet.utils.tensorboard.proto: the few pieces of protobuf and TFRecord
-- TensorBoard's event files need, written by hand (no protobuf library):
--   proto.varint(field, n), proto.double(field, x), proto.float(field, x),
--   proto.str(field, s), proto.msg(field, s), proto.doubles(field, list)
-- each return one encoded field as a string (a message is the concatenation
-- of its fields, in field-number order as protobuf writes them). Scalars equal
-- to proto3's default (0, '') are left out as protobuf does, except where the
-- caller says the field is in a oneof (present = true): then 0 is written too.
--   proto.crc32c(s[, crc]), proto.masked_crc(s): CRC32C (Castagnoli), masked as TFRecord
--   proto.record(data): one TFRecord: uint64 length, masked crc of it, data, masked crc of data
--   proto.records(bytes): the records of a file's bytes, each CRC checked (a reader, for tests and tools)
local ffi = require 'ffi'
local bit = require 'bit'
local band, bor, bxor, rshift, lshift = bit.band, bit.bor, bit.bxor, bit.rshift, bit.lshift

local M = {}

-- the byte-at-a-time table of the reflected Castagnoli polynomial 0x82F63B78
local T = ffi.new('uint32_t[256]')
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do c = band(c, 1) ~= 0 and bxor(rshift(c, 1), 0x82F63B78) or rshift(c, 1) end
  T[i] = c
end

function M.crc32c(s, crc)
  local p, c = ffi.cast('const uint8_t *', s), bit.bnot(crc or 0)
  for i = 0, #s - 1 do c = bxor(T[band(bxor(c, p[i]), 0xff)], rshift(c, 8)) end
  return (bit.bnot(c) % 2 ^ 32)
end

-- TFRecord's mask: rotate right by 15, add a constant (a CRC of data that holds CRCs stays useful)
function M.masked_crc(s)
  local c = M.crc32c(s)
  return (bor(rshift(c, 15), lshift(c, 17)) % 2 ^ 32 + 0xa282ead8) % 2 ^ 32
end

local u32, u64, f32, f64 = ffi.new('uint32_t[1]'), ffi.new('uint64_t[1]'), ffi.new('float[1]'), ffi.new('double[1]')
local function le32(v) u32[0] = v; return ffi.string(u32, 4) end   -- (x86 and ARM are little-endian)
M.le32 = le32

-- a base-128 varint: n a number or an int64 (a negative is its two's complement, 10 bytes, as protobuf)
local function raw_varint(n)
  if n >= 0 and n < 128 then return string.char(n) end
  local u, b = ffi.cast('uint64_t', ffi.cast('int64_t', n)), {}
  repeat
    local low = tonumber(u % 128)
    u = u / 128
    b[#b + 1] = u ~= 0 and low + 128 or low
  until u == 0
  return string.char(unpack(b))
end
M.raw_varint = raw_varint
local function key(field, wire) return raw_varint(field * 8 + wire) end

function M.varint(field, n, present)
  if n == 0 and not present then return '' end
  return key(field, 0) .. raw_varint(n)
end

local NAN64, NAN32 = '\0\0\0\0\0\0\248\127', '\0\0\192\127'   -- Python's NaN (LuaJIT's 0/0 has the sign bit)
function M.double(field, x, present)
  if x == 0 and not present then return '' end
  f64[0] = x
  return key(field, 1) .. (x ~= x and NAN64 or ffi.string(f64, 8))
end
function M.float(field, x, present)
  if x == 0 and not present then return '' end
  f32[0] = x
  return key(field, 5) .. (x ~= x and NAN32 or ffi.string(f32, 4))
end

-- length-delimited: a string or bytes (left out when empty) or a message (always written)
function M.str(field, s) if s == '' then return '' end return key(field, 2) .. raw_varint(#s) .. s end
function M.msg(field, s) return key(field, 2) .. raw_varint(#s) .. s end

-- a packed repeated double
function M.doubles(field, list)
  if #list == 0 then return '' end
  local buf = ffi.new('double[?]', #list)
  for i = 1, #list do buf[i - 1] = list[i] end
  return M.msg(field, ffi.string(buf, 8 * #list))
end

function M.record(data)
  u64[0] = #data
  local len = ffi.string(u64, 8)
  return len .. le32(M.masked_crc(len)) .. data .. le32(M.masked_crc(data))
end

-- records(bytes) -> list of data strings; a truncated file or a CRC mismatch is an error
function M.records(bytes, what)
  what = what or 'records'
  local out, pos = {}, 1
  while pos <= #bytes do
    if pos + 11 > #bytes then error(('%s: truncated record header at byte %d'):format(what, pos - 1), 2) end
    local len = bytes:sub(pos, pos + 7)
    ffi.copy(u64, len, 8)
    local n = tonumber(u64[0])
    ffi.copy(u32, bytes:sub(pos + 8, pos + 11), 4)
    if u32[0] ~= M.masked_crc(len) then error(('%s: bad length CRC at byte %d'):format(what, pos - 1), 2) end
    if pos + 15 + n > #bytes then error(('%s: truncated record at byte %d'):format(what, pos - 1), 2) end
    local data = bytes:sub(pos + 12, pos + 11 + n)
    ffi.copy(u32, bytes:sub(pos + 12 + n, pos + 15 + n), 4)
    if u32[0] ~= M.masked_crc(data) then error(('%s: bad data CRC at byte %d'):format(what, pos - 1), 2) end
    out[#out + 1] = data
    pos = pos + 16 + n
  end
  return out
end

-- decode(msg) -> list of {field, wire, value}: a message's fields, values raw
-- (varints as numbers, fixed64/32 as their 8/4 bytes, length-delimited as strings)
function M.decode(s)
  local out, pos = {}, 1
  local function varint()
    local n, mul = 0, 1
    repeat
      local b = s:byte(pos)
      pos = pos + 1
      n = n + (b % 128) * mul
      mul = mul * 128
    until b < 128
    return n
  end
  while pos <= #s do
    local k = varint()
    local field, wire, v = math.floor(k / 8), k % 8, nil
    if wire == 0 then v = varint()
    elseif wire == 1 then v = s:sub(pos, pos + 7); pos = pos + 8
    elseif wire == 5 then v = s:sub(pos, pos + 3); pos = pos + 4
    elseif wire == 2 then local n = varint(); v = s:sub(pos, pos + n - 1); pos = pos + n
    else error('proto.decode: unsupported wire type ' .. wire, 2) end
    out[#out + 1] = { field, wire, v }
  end
  return out
end

function M.to_double(b8) ffi.copy(f64, b8, 8); return f64[0] end
function M.to_float(b4) ffi.copy(f32, b4, 4); return f32[0] end

return M
