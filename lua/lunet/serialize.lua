-- lunet.serialize: tensors to and from safetensors files (the format of
-- Hugging Face's safetensors, read by PyTorch and NumPy).
--   lunet.save(path, {w = t, b = u}, {epoch = '3'})   -- atomic write
--   local tensors, metadata = lunet.load(path, {device = 'cpu:1'})
-- Loading a file never runs code; a corrupt file gives an error naming it.
local ffi = require 'ffi'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local C = core.C

local M = {}

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
    error('save: path must be a non-empty string, got ' .. type(path), 2)
  end
  if type(tensors) ~= 'table' then
    error('save: tensors must be a table of name = tensor, got ' .. type(tensors), 2)
  end
  if metadata ~= nil and type(metadata) ~= 'table' then
    error('save: metadata must be a table of strings, got ' .. type(metadata), 2)
  end
  local keys = sorted_keys(tensors)
  local n = #keys
  local names = ffi.new('const char *[?]', n + 1)
  local ptrs = ffi.new('ln_tensor *[?]', n + 1)
  for i, k in ipairs(keys) do
    local v = tensors[k]
    if type(k) ~= 'string' then
      error(('save: tensor names must be strings, got %s key %s'):format(type(k), tostring(k)), 2)
    end
    if not T.is_tensor(v) then
      error(("save: '%s' must be a tensor, got %s"):format(k, type(v)), 2)
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
      error(('save: metadata keys must be strings, got %s'):format(type(k)), 2)
    end
    if type(v) == 'number' then v = (v % 1 == 0 and v == v and math.abs(v) < 2^53) and ('%d'):format(v) or ('%.17g'):format(v) end
    if type(v) ~= 'string' then
      error(("save: metadata '%s' must be a string, got %s"):format(k, type(v)), 2)
    end
    keep[#keep + 1] = v
    mk[m], mv[m] = k, v
    m = m + 1
  end
  if C.ln_st_save(path, n, names, ptrs, m, mk, mv) ~= 0 then core.raise() end
  return path
end

-- load(path[, {device = 'cpu:0'}]) -> {name = tensor, ...}, {key = value, ...}
function M.load(path, opts)
  if type(path) ~= 'string' or path == '' then
    error('load: path must be a non-empty string, got ' .. type(path), 2)
  end
  if opts ~= nil and type(opts) ~= 'table' then
    error('load: options must be a table, got ' .. type(opts), 2)
  end
  local device = core.device_id('load', opts and opts.device)
  local f = C.ln_st_open(path)
  if f == nil then core.raise() end
  f = ffi.gc(f, C.ln_st_close)
  local out, meta = {}, {}
  for i = 0, C.ln_st_count(f) - 1 do
    local name = ffi.string(C.ln_st_name(f, i))
    local p = C.ln_st_tensor(f, i, device)
    if p == nil then core.raise() end
    out[name] = T.wrap(p)
  end
  for i = 0, C.ln_st_meta_count(f) - 1 do
    meta[ffi.string(C.ln_st_meta_key(f, i))] = ffi.string(C.ln_st_meta_value(f, i))
  end
  ffi.gc(f, nil)
  C.ln_st_close(f)
  return out, meta
end

return M
