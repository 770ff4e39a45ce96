-- lunet.torch_format: PyTorch's own checkpoint files (torch.save, >= 1.6's
-- zip format), read and written without Python:
--   local sd = lunet.load('resnet18.pth')            -- (lunet.load sees the zip magic)
--   lunet.save_torch('m.pth', model:state_dict())     -- torch.load reads it
-- Reading is torch.load(weights_only=True): only tensors and containers
-- (lunet/torch_pickle.lua says how Python values map to Lua). Tensors that
-- share a storage in the file share it after loading (views keep their
-- offsets and strides). A malformed file is an error naming it.
local ffi = require 'ffi'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local zip = require 'lunet.torch_zip'
local pickle = require 'lunet.torch_pickle'
local check_options = require('lunet.options').check
local typename = core.typename

local M = {}

-- torch's storage classes <-> lunet's dtypes
local STORAGE = {
  FloatStorage = 'float32', DoubleStorage = 'float64', HalfStorage = 'float16', BFloat16Storage = 'bfloat16',
  LongStorage = 'int64', IntStorage = 'int32', ByteStorage = 'uint8', BoolStorage = 'bool',
}
local STORAGE_OF = {}
for k, v in pairs(STORAGE) do STORAGE_OF[v] = k end
local UNSUPPORTED = { CharStorage = 'int8', ShortStorage = 'int16', ComplexFloatStorage = 'complex64',
  ComplexDoubleStorage = 'complex128', QInt8Storage = 'qint8', QUInt8Storage = 'quint8', QInt32Storage = 'qint32' }

local function is_int(v, lo) return type(v) == 'number' and v % 1 == 0 and v >= (lo or 0) and v < 2^53 end

-- the tuple of non-negative integers t (a size or stride), checked
local function ints(fail, t, what)
  if type(t) ~= 'table' then fail('corrupt tensor record: %s is not a tuple', what) end
  local out = {}
  for k = 1, #t do
    if not is_int(t[k]) then fail('corrupt tensor record: %s holds %s', what, tostring(t[k])) end
    out[k] = t[k]
  end
  if #out > 8 then fail('tensor of %d dims (lunet has at most 8)', #out) end
  return out
end

local function rebuild_tensor(fail)
  return function(a)
    local st, off = a[1], a[2]
    if not T.is_tensor(st) then fail('corrupt tensor record: its storage is %s', typename(st)) end
    if not is_int(off) then fail('corrupt tensor record: storage offset %s', tostring(off)) end
    local size, stride = ints(fail, a[3], 'size'), ints(fail, a[4], 'stride')
    if #size ~= #stride then fail('corrupt tensor record: %d sizes, %d strides', #size, #stride) end
    local last, empty = off, false
    for k = 1, #size do
      if size[k] == 0 then empty = true end
      last = last + (size[k] - 1) * stride[k]
    end
    local numel = st:numel()
    if not empty and last >= numel or off > numel then
      fail('corrupt tensor record: a view reaches element %d of a storage of %d', last, numel)
    end
    return st:as_strided(size, stride, off)
  end
end

local function globals_for(fail)
  local g = {
    ['collections.OrderedDict'] = function(args, kind)
      if #args > 0 then fail('OrderedDict with arguments is not supported') end
      local d = {}
      kind[d] = 'dict'
      return d
    end,
    ['torch._utils._rebuild_tensor_v2'] = rebuild_tensor(fail),
    ['torch._utils._rebuild_parameter'] = function(a) return a[1] end,
    ['torch._utils._rebuild_parameter_with_state'] = function(a) return a[1] end,
    -- (subclasses: the tensor itself; the class names are markers only)
    ['torch._tensor._rebuild_from_type_v2'] = function(a, kind)
      local f, args = a[1], a[3]
      if kind[f] ~= 'global' or type(f.fn) ~= 'function' or kind[args] ~= 'tuple' then fail('corrupt _rebuild_from_type_v2') end
      return f.fn(args, kind)
    end,
    ['torch.Tensor'] = 'torch.Tensor', ['torch.nn.parameter.Parameter'] = 'torch.nn.parameter.Parameter',
  }
  for name, dt in pairs(STORAGE) do g['torch.' .. name] = { dtype = dt } end
  for name, dt in pairs(UNSUPPORTED) do g['torch.' .. name] = { dtype = dt, unsupported = true } end
  return g
end

local LOAD_OPTS = { device = true }

-- load(path[, {device =}]) -> the object torch.save wrote (a state_dict: name -> tensor), only
function M.load(path, opts)
  if type(path) ~= 'string' or path == '' then error('load: path must be a non-empty string, got ' .. typename(path), 2) end
  require('lunet.serialize').no_nul('load', 'the path', path, 2)
  check_options('load', opts, LOAD_OPTS)
  local device = opts and opts.device
  local r = zip.open('load', path)
  local function fail(msg, ...) r:fail(msg, ...) end
  local ok, res = pcall(function()
    if r.size >= 2 and r:read(0, 2, 'the magic') == '\128\2' then
      fail('the legacy (PyTorch < 1.6) format is not supported: re-save it with torch >= 1.6 (torch.save writes the zip format)')
    end
    local entries = r:directory()
    local pkl
    for name, e in pairs(entries) do
      if name:match('^[^/]*/data%.pkl$') then
        if pkl then fail('more than one data.pkl') end
        pkl = e
      end
    end
    if not pkl then fail('not a torch checkpoint (no <name>/data.pkl in the zip)') end
    local prefix = pkl.name:match('^([^/]*/)')
    local bo = entries[prefix .. 'byteorder']
    if bo and r:entry_string(bo) ~= 'little' then fail('big-endian checkpoints are not supported') end
    local storages = {}
    local function persistent_load(pid, kind)
      if kind[pid] ~= 'tuple' or pid[1] ~= 'storage' then fail('corrupt pickle: unknown persistent id') end
      local ty, key, numel = pid[2], pid[3], pid[5]
      if type(ty) ~= 'table' or type(ty.value) ~= 'table' or not ty.value.dtype then fail('corrupt pickle: storage type') end
      if ty.value.unsupported then fail('%s tensors (%s) are not supported: lunet has no %s dtype', ty.value.dtype, ty.name, ty.value.dtype) end
      if type(key) ~= 'string' or not is_int(numel) then fail('corrupt pickle: storage record') end
      local st = storages[key]
      if st then
        if st:numel() ~= numel or st.dtype ~= ty.value.dtype then fail("storage '%s' is used with two sizes or dtypes", key) end
        return st
      end
      local e = entries[prefix .. 'data/' .. key]
      if not e then fail("storage '%s' is missing (no entry %sdata/%s)", key, prefix, key) end
      local es = core.C.ln_dtype_size(core.dtype_id('load', ty.value.dtype))
      if e.usize ~= numel * es then fail("entry '%s' holds %d bytes, its storage of %d %s needs %d", e.name, e.usize, numel, ty.value.dtype, numel * es) end
      st = T.wrap(core.C.ln_empty(1, ffi.new('int64_t[1]', numel), core.dtype_id('load', ty.value.dtype), 0))
      if numel > 0 then r:entry_into(e, st:data_ptr(), numel * es) end
      if device then st = st:to(device) end
      storages[key] = st
      return st
    end
    local obj = pickle.load(r:entry_string(pkl), fail, globals_for(fail), persistent_load)
    return obj
  end)
  r:close()
  if not ok then error(res, 0) end
  -- (one value: model:load_state_dict(lunet.load(p)) must not get a second as options)
  return res
end

-- ---- writing ------------------------------------------------------------------
local function le_bytes(v, n)  -- n little-endian bytes of integer v (int64 two's complement)
  local x, out = ffi.cast('uint64_t', ffi.cast('int64_t', v)), {}
  for k = 1, n do out[k] = string.char(tonumber(x % 256)); x = x / 256 end
  return table.concat(out)
end

local dbl = ffi.new('union { double d; uint8_t b[8]; }')

-- the pickle of obj (protocol 2), tensors' contiguous copies appended to storages
local function pickle_obj(obj, storages)
  local out, depth = {}, 0
  local function w(s) out[#out + 1] = s end
  local function int(v)
    if type(v) == 'number' and v >= -2^31 and v < 2^31 then w('J' .. le_bytes(v, 4))
    else w('\138\8' .. le_bytes(v, 8)) end
  end
  local function str(s) w('X' .. le_bytes(#s, 4) .. s) end
  local function tuple(t) w('('); for _, v in ipairs(t) do int(v) end; w('t') end
  local value
  local function tensor(t, where)
    local c = t:to('cpu:0'):contiguous()
    if c:storage_offset() ~= 0 or c:numel() > 0 and c:data_ptr() == nil then c = c:clone() end
    local st = STORAGE_OF[c.dtype]
    if not st then error(('save_torch: %s: dtype %s has no torch storage'):format(where, c.dtype), 0) end
    storages[#storages + 1] = c
    local size, stride = {}, {}
    for d = 1, c:dim() do size[d], stride[d] = c:size(d), c:stride(d) end
    w('ctorch._utils\n_rebuild_tensor_v2\n((X\7\0\0\0storagectorch\n' .. st .. '\n')
    str(tostring(#storages - 1)); str('cpu'); int(c:numel()); w('tQ')
    int(0); tuple(size); tuple(stride)
    w('\137ccollections\nOrderedDict\n)Rt')   -- requires_grad False, no hooks
    w('R')
  end
  function value(v, where)
    local tv = type(v)
    if T.is_tensor(v) then tensor(v, where)
    elseif tv == 'string' then str(v)
    elseif tv == 'boolean' then w(v and '\136' or '\137')
    elseif tv == 'number' then
      if v % 1 == 0 and math.abs(v) < 2^53 then int(v)
      else
        dbl.d = v
        local b = {}
        for k = 0, 7 do b[k + 1] = string.char(dbl.b[7 - k]) end
        w('G' .. table.concat(b))
      end
    elseif tv == 'cdata' and ffi.istype('int64_t', v) then int(v)
    elseif tv == 'table' then
      depth = depth + 1
      if depth > 100 then error(('save_torch: %s: tables nest deeper than 100 (a cycle?)'):format(where), 0) end
      local n, keys = #v, {}
      for k in pairs(v) do keys[#keys + 1] = k end
      if n > 0 and #keys == n then   -- a sequence: a list
        w(']('); for k = 1, n do value(v[k], where .. '[' .. k .. ']') end; w('e')
      else
        table.sort(keys, function(a, b)
          if type(a) == type(b) then return a < b end
          return type(a) == 'number'
        end)
        w('}(')
        for _, k in ipairs(keys) do
          if type(k) == 'string' then str(k)
          elseif type(k) == 'number' and k % 1 == 0 then int(k)
          else error(('save_torch: %s: keys must be strings or integers, got %s'):format(where, typename(k)), 0) end
          value(v[k], where .. '.' .. tostring(k))
        end
        w('u')
      end
      depth = depth - 1
    else
      error(('save_torch: %s: cannot write a %s (tensors, tables, numbers, strings, booleans)'):format(where, typename(v)), 0)
    end
  end
  w('\128\2')
  value(obj, 'the object')
  w('.')
  return table.concat(out)
end

-- save_torch(path, obj): obj (a state_dict, or a table of tables, numbers,
-- strings, booleans and tensors) as torch.save writes it; atomic
function M.save(path, obj)
  if type(path) ~= 'string' or path == '' then error('save_torch: path must be a non-empty string, got ' .. typename(path), 2) end
  require('lunet.serialize').no_nul('save_torch', 'the path', path, 2)
  if type(obj) ~= 'table' and not T.is_tensor(obj) then
    error('save_torch: obj must be a table of name = tensor (or a tensor), got ' .. typename(obj), 2)
  end
  local storages = {}
  local ok, data = pcall(pickle_obj, obj, storages)
  if not ok then error(data, 2) end
  local name = (path:match('([^/]*)$'):gsub('%.[^.]*$', ''))
  if name == '' or not name:match('^[%w_%-]+$') then name = 'archive' end
  local zw = zip.create('save_torch', path)
  zw:add(name .. '/data.pkl', data)
  for k, c in ipairs(storages) do
    local nb = c:numel() * core.C.ln_dtype_size(core.dtype_id('save_torch', c.dtype))
    zw:add(name .. '/data/' .. (k - 1), nb > 0 and c:data_ptr() or '', nb)
  end
  zw:add(name .. '/version', '3\n')
  zw:finish()
  return path
end

return M
