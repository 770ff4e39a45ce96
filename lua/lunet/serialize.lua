-- lunet.serialize: tensors to and from safetensors files (the format of
-- Hugging Face's safetensors, read by PyTorch and NumPy).
--   lunet.save(path, {w = t, b = u}, {epoch = '3'})   -- atomic write
--   local tensors, metadata = lunet.load(path, {device = 'cpu:1'})
-- Loading a file never runs code; a corrupt file gives an error naming it.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local check_options = require('lunet.options').check
local C = core.C

local M = {}

-- lunet.load's metadata table carries this metatable, so that
-- model:load_state_dict(lunet.load(path)) (the metadata passed on as a
-- second argument) reads it as no options, as torch.load returns one value
M.Metadata = { __name = 'lunet.Metadata' }

pcall(ffi.cdef, 'int access(const char *path, int mode);')
pcall(ffi.cdef, 'char *strerror(int errnum);')

-- A Lua string may hold a NUL byte; C would read it cut short there (another
-- file, another name): refuse it instead.
local function no_nul(fn, what, s, level)
  if s:find('\0', 1, true) then
    error(('%s: %s contains a NUL byte (%q)'):format(fn, what, s), level + 1)
  end
end
M.no_nul = no_nul

-- Whether path names something (of any kind), without opening it: opening a
-- FIFO to find out would wait for a writer.
function M.exists(path)
  return type(path) == 'string' and not path:find('\0', 1, true) and ffi.C.access(path, 0) == 0
end

-- Whether a save to path can go ahead, without writing or opening anything:
-- true, or false and why (path is a folder; its folder is missing or not
-- writable). (fit asks before training, not at the first checkpoint.)
function M.writable(path)
  if M.exists(path .. '/.') then return false, 'it is a directory' end
  local dir = path:match('^(.*)/[^/]*$') or '.'
  if dir == '' then dir = '/' end
  if ffi.C.access(dir, 3) ~= 0 then return false, ffi.string(ffi.C.strerror(ffi.errno())) end   -- (W_OK | X_OK)
  return true
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

-- save(path, tensors, metadata?): tensors maps names to tensors; metadata
-- maps strings to strings (numbers are written as their decimal text).
function M.save(path, tensors, metadata)
  if type(path) ~= 'string' or path == '' then
    error('save: path must be a non-empty string, got ' .. typename(path), 2)
  end
  if not is_table(tensors) then
    error('save: tensors must be a table of name = tensor, got ' .. typename(tensors), 2)
  end
  if metadata ~= nil and not is_table(metadata) then
    error('save: metadata must be a table of strings, got ' .. typename(metadata), 2)
  end
  no_nul('save', 'the path', path, 2)
  local keys = sorted_keys(tensors)
  local n = #keys
  local names = ffi.new('const char *[?]', n + 1)
  local ptrs = ffi.new('ln_tensor *[?]', n + 1)
  for i, k in ipairs(keys) do
    local v = tensors[k]
    if type(k) ~= 'string' then
      error(('save: tensor names must be strings, got %s key %s'):format(typename(k), tostring(k)), 2)
    end
    no_nul('save', 'tensor name', k, 2)
    if not T.is_tensor(v) then
      error(("save: '%s' must be a tensor, got %s"):format(k, typename(v)), 2)
    end
    names[i - 1], ptrs[i - 1] = k, v.p
  end
  local mkeys, m = metadata and sorted_keys(metadata) or {}, 0
  local mk = ffi.new('const char *[?]', #mkeys + 1)
  local mv = ffi.new('const char *[?]', #mkeys + 1)
  local keep = {}   -- anchors the converted strings while C reads them
  for _, k in ipairs(mkeys) do
    local v = metadata[k]
    if type(k) ~= 'string' then
      error(('save: metadata keys must be strings, got %s'):format(typename(k)), 2)
    end
    if type(v) == 'number' then v = (v % 1 == 0 and v == v and math.abs(v) < 2^53) and ('%d'):format(v) or ('%.17g'):format(v) end
    no_nul('save', 'metadata key', k, 2)
    if type(v) ~= 'string' then
      error(("save: metadata '%s' must be a string, got %s"):format(k, typename(v)), 2)
    end
    no_nul('save', ("the value of metadata '%s'"):format(k), v, 2)
    keep[#keep + 1] = v
    mk[m], mv[m] = k, v
    m = m + 1
  end
  if C.ln_st_save(path, n, names, ptrs, m, mk, mv) ~= 0 then core.raise() end
  return path
end

-- A file opened for reading single tensors (large checkpoints):
--   local r = lunet.serialize.open(path)
--   r:names() (file order), r:info(name) -> {dtype =, shape =}, r.metadata,
--   r:get(name[, {device =}]) -> tensor, r:close() (also on collection)
local Reader = {}
Reader.__index = Reader

local info_dtype, info_ndim = ffi.new('int[1]'), ffi.new('int[1]')
local info_shape = ffi.new('int64_t[8]')

function M.open(path)
  if type(path) ~= 'string' or path == '' then
    error('open: path must be a non-empty string, got ' .. typename(path), 2)
  end
  no_nul('open', 'the path', path, 2)
  local f = C.ln_st_open(path)
  if f == nil then core.raise() end
  f = ffi.gc(f, C.ln_st_close)
  local r = setmetatable({ path = path, f = f, index = {}, order = {}, metadata = {} }, Reader)
  for i = 0, C.ln_st_count(f) - 1 do
    local name = ffi.string(C.ln_st_name(f, i))
    r.index[name], r.order[i + 1] = i, name
  end
  for i = 0, C.ln_st_meta_count(f) - 1 do
    r.metadata[ffi.string(C.ln_st_meta_key(f, i))] = ffi.string(C.ln_st_meta_value(f, i))
  end
  return r
end

local function entry(r, fn, name)
  if not r.f then error(('%s: %s is closed'):format(fn, r.path), 3) end
  local i = r.index[name]
  if not i then error(("%s: %s has no tensor '%s'"):format(fn, r.path, tostring(name)), 3) end
  return i
end

function Reader:names()
  local out = {}
  for k, v in ipairs(self.order) do out[k] = v end
  return out
end

function Reader:info(name)
  local i = entry(self, 'info', name)
  C.ln_st_info(self.f, i, info_dtype, info_ndim, info_shape)
  local shape = {}
  for d = 0, info_ndim[0] - 1 do shape[d + 1] = tonumber(info_shape[d]) end
  return { dtype = core.dtypes[info_dtype[0]], shape = shape }
end

local LOAD_OPTS = { device = true }

function Reader:get(name, opts)
  check_options('get', opts, LOAD_OPTS)
  local i = entry(self, 'get', name)
  local p = C.ln_st_tensor(self.f, i, core.device_id('get', opts and opts.device))
  if p == nil then core.raise() end
  return T.wrap(p)
end

function Reader:close()
  if self.f then
    local f = self.f
    self.f = nil
    ffi.gc(f, nil)
    C.ln_st_close(f)
  end
end

Reader.__tostring = function(self)
  return ('safetensors file %s (%d tensors%s)'):format(self.path, #self.order, self.f and '' or ', closed')
end

-- load(path[, {device = 'cpu:0'}]) -> {name = tensor, ...}, {key = value, ...}
function M.load(path, opts)
  if type(path) ~= 'string' or path == '' then
    error('load: path must be a non-empty string, got ' .. typename(path), 2)
  end
  if opts ~= nil and not is_table(opts) then
    error('load: options must be a table, got ' .. typename(opts), 2)
  end
  no_nul('load', 'the path', path, 2)
  check_options('load', opts, LOAD_OPTS)
  -- torch.save's files (zip, or the legacy pickle) go to lunet.torch_format
  local magic = require('lunet.torch_zip').sniff(path, 4)
  if magic == 'PK\3\4' or magic == '\128\2\138\10' then return require('lunet.torch_format').load(path, opts) end
  local device = core.device_id('load', opts and opts.device)
  local f = C.ln_st_open(path)
  if f == nil then core.raise() end
  f = ffi.gc(f, C.ln_st_close)
  local out, meta = {}, setmetatable({}, M.Metadata)
  for i = 0, C.ln_st_count(f) - 1 do
    local p = C.ln_st_tensor(f, i, device)
    if p == nil then core.raise() end
    out[ffi.string(C.ln_st_name(f, i))] = T.wrap(p)
  end
  for i = 0, C.ln_st_meta_count(f) - 1 do
    meta[ffi.string(C.ln_st_meta_key(f, i))] = ffi.string(C.ln_st_meta_value(f, i))
  end
  ffi.gc(f, nil)
  C.ln_st_close(f)
  return out, meta
end

return M
