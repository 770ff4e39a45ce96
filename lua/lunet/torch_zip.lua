-- lunet.torch_zip: the zip container of torch.save's files (PyTorch >= 1.6):
-- read its central directory (ZIP64 too) and entries by position, and write
-- one atomically (entries stored, data 64-byte aligned, as torch writes).
-- POSIX calls through the FFI: pread reads an entry's bytes straight into a
-- tensor's memory, so a large checkpoint costs about one read of the file.
-- Every inconsistency is an error naming the caller and the file.
local ffi = require 'ffi'
local bit = require 'bit'
local util = require 'lunet.util'

for _, d in ipairs {
  'int open(const char *path, int flags, ...);', 'int close(int fd);',
  'int64_t pread(int fd, void *buf, size_t n, int64_t off);',
  'int64_t lseek(int fd, int64_t off, int whence);',
  'char *strerror(int errnum);', 'int access(const char *path, int mode);',
  'unsigned long crc32(unsigned long crc, const uint8_t *buf, unsigned len);',
} do pcall(ffi.cdef, d) end
local C = ffi.C
local O_RDONLY, O_NONBLOCK, O_CLOEXEC, SEEK_END = 0, 0x800, 0x80000, 2
local zlib   -- (liblunet.so links zlib: crc32 comes from there)

local M = {}
local floor = math.floor

local function oserr() return ffi.string(C.strerror(ffi.errno())) end

local function u16(s, i) local a, b = s:byte(i, i + 1); return a + b * 256 end
local function u32(s, i) local a, b, c, d = s:byte(i, i + 3); return a + b * 256 + c * 65536 + d * 16777216 end
local function u64(s, i) return u32(s, i) + u32(s, i + 4) * 4294967296 end
local function p16(v) return string.char(v % 256, floor(v / 256) % 256) end
local function p32(v) return p16(v % 65536) .. p16(floor(v / 65536) % 65536) end

function M.crc32(crc, ptr, n)
  if not zlib then
    local ok, lib = pcall(function() local _ = C.crc32; return C end)
    if not ok then ok, lib = pcall(ffi.load, 'z') end
    zlib = ok and lib or ffi.load('libz.so.1')
  end
  ptr = ffi.cast('const uint8_t *', ptr)
  while n > 0 do   -- (zlib's length is an unsigned int)
    local k = math.min(n, 2^30)
    crc = tonumber(zlib.crc32(crc, ptr, k))
    ptr, n = ptr + k, n - k
  end
  return crc
end

-- ---- reading --------------------------------------------------------------
local Reader = {}
Reader.__index = Reader

function Reader:fail(msg, ...) error(('%s: %s: ' .. msg):format(self.fn, self.path, ...), 0) end

-- n bytes at off into ptr; the whole range must lie in the file
function Reader:read_into(ptr, off, n, what)
  if off < 0 or n < 0 or off + n > self.size then
    self:fail('truncated or corrupt: %s (bytes %d..%d) lies past the end of the file (%d bytes)', what, off, off + n, self.size)
  end
  local p, done = ffi.cast('uint8_t *', ptr), 0
  while done < n do
    local k = tonumber(C.pread(self.fd[0], p + done, math.min(n - done, 2^30), off + done))
    if k < 0 then self:fail('read failed: %s', oserr()) end
    if k == 0 then self:fail('truncated while reading %s', what) end
    done = done + k
  end
end

function Reader:read(off, n, what)
  if off < 0 or n < 0 or off + n > self.size then   -- (before allocating: a corrupt n may be any size)
    self:fail('truncated or corrupt: %s (bytes %d..%d) lies past the end of the file (%d bytes)', what, off, off + n, self.size)
  end
  local buf = ffi.new('uint8_t[?]', math.max(n, 1))
  self:read_into(buf, off, n, what)
  return ffi.string(buf, n)
end

local function close_box(b) if b[0] >= 0 then C.close(b[0]); b[0] = -1 end end
function Reader:close() ffi.gc(self.fd, nil); close_box(self.fd) end

-- the first bytes of path (nil if it cannot be read): the format's magic
function M.sniff(path, n)
  if type(path) ~= 'string' or path:find('\0', 1, true) or C.access(path .. '/.', 0) == 0 then return nil end
  local fd = C.open(path, bit.bor(O_RDONLY, O_NONBLOCK, O_CLOEXEC))
  if fd < 0 then return nil end
  local buf = ffi.new('uint8_t[?]', n)
  local k = tonumber(C.pread(fd, buf, n, 0))
  C.close(fd)
  return k > 0 and ffi.string(buf, k) or nil
end

-- open(fn, path): regular files only (a FIFO or device has no size to seek)
function M.open(fn, path)
  if C.access(path .. '/.', 0) == 0 then error(('%s: %s: not a regular file (it is a directory)'):format(fn, path), 0) end
  local fd = C.open(path, bit.bor(O_RDONLY, O_NONBLOCK, O_CLOEXEC))
  if fd < 0 then error(('%s: cannot open %s: %s'):format(fn, path, oserr()), 0) end
  local box = ffi.gc(ffi.new('int[1]', fd), close_box)
  local size = tonumber(C.lseek(fd, 0, SEEK_END))
  if size < 0 then close_box(box); error(('%s: %s: not a regular file'):format(fn, path), 0) end
  return setmetatable({ fn = fn, path = path, fd = box, size = size }, Reader)
end

-- the central directory: r.entries[name] = {name, method, csize, usize, crc, lho}
function Reader:directory()
  local tail_n = math.min(self.size, 65557)
  local tail = self:read(self.size - tail_n, tail_n, 'the end of the zip')
  local p, at = nil, 1
  while true do   -- the last end-of-central-directory record
    local q = tail:find('PK\5\6', at, true)
    if not q then break end
    p, at = q, q + 1
  end
  if not p or p + 21 > #tail then self:fail('not a zip file (no end of central directory; truncated?)') end
  local count, cd_size, cd_off = u16(tail, p + 10), u32(tail, p + 12), u32(tail, p + 16)
  if (count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_off == 0xFFFFFFFF) and p > 20
     and tail:sub(p - 20, p - 17) == 'PK\6\7' then   -- ZIP64: sizes in the zip64 record
    local z64 = self:read(u64(tail, p - 20 + 8), 56, 'the zip64 end of central directory')
    if z64:sub(1, 4) ~= 'PK\6\6' then self:fail('corrupt zip64 end of central directory') end
    count, cd_size, cd_off = u64(z64, 33), u64(z64, 41), u64(z64, 49)
  end
  if count > cd_size / 46 then self:fail('corrupt zip: %d entries cannot fit in a %d-byte directory', count, cd_size) end
  local cd = self:read(cd_off, cd_size, 'the central directory')
  local entries, i = {}, 1
  for _ = 1, count do
    if i + 45 > #cd or cd:sub(i, i + 3) ~= 'PK\1\2' then self:fail('corrupt zip central directory (at byte %d)', cd_off + i - 1) end
    local nl, el, cl = u16(cd, i + 28), u16(cd, i + 30), u16(cd, i + 32)
    if i + 45 + nl + el + cl > #cd then self:fail('corrupt zip central directory (entry past its end)') end
    local e = { name = cd:sub(i + 46, i + 45 + nl), method = u16(cd, i + 10), crc = u32(cd, i + 16),
                csize = u32(cd, i + 20), usize = u32(cd, i + 24), lho = u32(cd, i + 42) }
    local x, xend = i + 46 + nl, i + 46 + nl + el
    while x + 3 < xend do   -- the zip64 extra field: the 0xFFFFFFFF fields, in order
      local id, len = u16(cd, x), u16(cd, x + 2)
      if id == 1 then
        local y = x + 4
        for _, k in ipairs { 'usize', 'csize', 'lho' } do
          if e[k] == 0xFFFFFFFF and y + 7 < x + 4 + len + 1 then e[k], y = u64(cd, y), y + 8 end
        end
      end
      x = x + 4 + len
    end
    entries[e.name] = e
    i = i + 46 + nl + el + cl
  end
  self.entries = entries
  return entries
end

-- where entry e's bytes start (after its local header)
function Reader:data_offset(e)
  if not e.data then
    local h = self:read(e.lho, 30, ("the local header of '%s'"):format(e.name))
    if h:sub(1, 4) ~= 'PK\3\4' then self:fail("corrupt zip: bad local header for '%s'", e.name) end
    e.data = e.lho + 30 + u16(h, 27) + u16(h, 29)
  end
  return e.data
end

function Reader:check_stored(e)
  if e.method ~= 0 then
    self:fail("entry '%s' is compressed (zip method %d); only stored entries are read (torch.save writes them stored)", e.name, e.method)
  end
  if e.csize ~= e.usize then self:fail("corrupt zip: stored entry '%s' has sizes %d and %d", e.name, e.csize, e.usize) end
end

-- entry e's bytes as a string (small entries: the pickle, the version)
function Reader:entry_string(e)
  self:check_stored(e)
  return self:read(self:data_offset(e), e.usize, ("entry '%s'"):format(e.name))
end

-- entry e's bytes into ptr (n bytes: the caller's storage size)
function Reader:entry_into(e, ptr, n)
  self:check_stored(e)
  if e.usize ~= n then self:fail("entry '%s' holds %d bytes, its storage needs %d", e.name, e.usize, n) end
  self:read_into(ptr, self:data_offset(e), n, ("entry '%s'"):format(e.name))
end

-- ---- writing ---------------------------------------------------------------
local Writer = {}
Writer.__index = Writer

-- a temporary file beside path, renamed over it by finish (lunet.util's
-- atomic writer, as lunet.save: one implementation, in C)
function M.create(fn, path)
  return setmetatable({ fn = fn, path = path, file = util.atomic_open(fn, path), off = 0, list = {} }, Writer)
end

-- removes the temporary file and raises "fn: cannot write 'path': msg"
function Writer:abort(msg) self.file:abort(msg) end

function Writer:put(ptr, n)
  self.file:write(ptr, n)
  self.off = self.off + n
end
function Writer:puts(s) self:put(s, #s) end

-- add(name, ptr, n): one stored entry, its data 64-byte aligned
function Writer:add(name, ptr, n)
  if type(ptr) == 'string' then ptr, n = ffi.cast('const uint8_t *', ptr), #ptr end
  if self.off + n + 200 >= 0xFFFFFFFF then self:abort('files of 4 GiB or more are not written yet (no ZIP64); use lunet.save') end
  local crc = M.crc32(0, ptr, n)
  local base = self.off + 30 + #name + 4
  local pad = (64 - base % 64) % 64
  self.list[#self.list + 1] = { name = name, crc = crc, n = n, lho = self.off }
  self:puts('PK\3\4' .. p16(20) .. p16(0) .. p16(0) .. p16(0) .. p16(0x21) .. p32(crc) .. p32(n) .. p32(n)
            .. p16(#name) .. p16(4 + pad) .. name .. 'FB' .. p16(pad) .. ('Z'):rep(pad))
  self:put(ptr, n)
end

function Writer:finish()
  local cd_off, parts = self.off, {}
  for _, e in ipairs(self.list) do
    parts[#parts + 1] = 'PK\1\2' .. p16(20) .. p16(20) .. p16(0) .. p16(0) .. p16(0) .. p16(0x21) .. p32(e.crc)
      .. p32(e.n) .. p32(e.n) .. p16(#e.name) .. p16(0) .. p16(0) .. p16(0) .. p16(0) .. p32(0) .. p32(e.lho) .. e.name
  end
  local cd = table.concat(parts)
  self:puts(cd)
  self:puts('PK\5\6' .. p16(0) .. p16(0) .. p16(#self.list) .. p16(#self.list) .. p32(#cd) .. p32(cd_off) .. p16(0))
  self:commit()
end

-- commit(): fsync, rename over path (also for writers of other formats: create, put, commit)
function Writer:commit() self.file:commit() end

return M
