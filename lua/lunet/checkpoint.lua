-- lunet.checkpoint: save and load a whole training state (model, optimizer,
-- scheduler, RNG, loader position, counters) as ONE safetensors file.
-- Tensors anywhere in the state tree become entries named by their path
-- ("model.0.weight", "optimizer.state.1.momentum_buffer"), so PyTorch can read
-- the weights; everything else goes to the metadata as JSON ("lunet.state"):
-- numbers (inf and NaN too), strings, booleans and tables of them under string
-- or number keys; anything else, or a table inside itself, is an error.
-- lunet.save writes atomically: a crash leaves the previous file intact.
-- A crc32 of the payload (every tensor's name, dtype, shape and bytes, then
-- the state JSON) goes in the metadata ("lunet.crc32") and is checked on load:
-- a flipped bit anywhere in the data gives an error, not a silently bad model.
local ffi = require 'ffi'
local json = require 'lunet.json'
local T = require 'lunet.tensor'
local core = require 'lunet.core'
local is_table = core.is_table
local serialize = require 'lunet.serialize'

local checkpoint = {}
local TENSOR = '__tensor__'   -- placeholder in the JSON tree

local NUMBER = '__number__'  -- JSON has no inf or NaN: {"__number__": "inf"}
local SPECIAL = { inf = math.huge, ['-inf'] = -math.huge, nan = 0 / 0 }

local raise = require('lunet.options').raise
local function where(path) return path == '' and 'the state' or ('state.' .. path) end

-- the state as a JSON tree, its tensors in tensors[path]; on an ancestor
-- table (a cycle), a value JSON cannot hold or two tensors at one name: an
-- error naming the path (was a stack overflow, a dropped value or one
-- tensor written over another)
local function flatten(value, path, tensors, parents)
  if T.is_tensor(value) then
    if tensors[path] then
      raise(('checkpoint.save: two tensors would be saved as %q (a key with a \'.\' in it); rename one'):format(path))
    end
    tensors[path] = value
    return { [TENSOR] = path }
  end
  local tv = type(value)
  if tv == 'number' then
    if value ~= value then return { [NUMBER] = 'nan' } end
    if value == math.huge or value == -math.huge then return { [NUMBER] = value > 0 and 'inf' or '-inf' } end
    return value
  end
  if tv == 'string' or tv == 'boolean' then return value end
  if not is_table(value) then
    raise(('checkpoint.save: %s is a %s; a checkpoint holds tensors, numbers, strings, booleans and tables of them')
      :format(where(path), tv))
  end
  if parents[value] then raise(('checkpoint.save: %s holds a table that contains it (a cycle)'):format(where(path))) end
  parents[value] = true
  local out = {}
  for k, v in pairs(value) do
    local tk = type(k)
    if tk ~= 'string' and tk ~= 'number' then
      raise(('checkpoint.save: %s has a %s key; keys must be strings or numbers'):format(where(path), tk))
    end
    local key = tk == 'number' and ('#' .. k) or k
    out[key] = flatten(v, path == '' and tostring(k) or (path .. '.' .. tostring(k)), tensors, parents)
  end
  parents[value] = nil
  return out
end

local function unflatten(value, tensors, file, depth)
  depth = (depth or 0) + 1
  if depth > 200 then error('nested too deeply', 0) end
  if not is_table(value) then return value end
  if value[TENSOR] then
    local t = tensors[value[TENSOR]]
    if not t then error(('tensor %s is missing'):format(tostring(value[TENSOR])), 0) end
    return t
  end
  if value[NUMBER] ~= nil and next(value, next(value)) == nil then
    local x = SPECIAL[value[NUMBER]]
    if not x then error(('%s is not a number'):format(tostring(value[NUMBER])), 0) end
    return x
  end
  local out = {}
  for k, v in pairs(value) do
    local key = type(k) == 'string' and k:sub(1, 1) == '#' and tonumber(k:sub(2)) or k
    out[key] = unflatten(v, tensors, file, depth)
  end
  return out
end

local crc_out = ffi.new('uint32_t[1]')
local function crc_str(crc, s)
  local buf = T.wrap(core.C.ln_from_buffer(s, 1, ffi.new('int64_t[1]', #s), core.C.LN_UINT8, 0))
  if core.C.ln_tensor_crc32(buf.p, crc, crc_out) ~= 0 then core.raise() end
  return crc_out[0]
end

-- the payload's crc32 as 8 hex digits: tensors in name order, then the JSON
local function payload_crc(tensors, tree_json)
  local names = {}
  for k in pairs(tensors) do names[#names + 1] = k end
  table.sort(names)
  local crc = 0
  for _, k in ipairs(names) do
    local t = tensors[k]
    crc = crc_str(crc, ('%s\0%s\0%s\0'):format(k, tostring(t.dtype), table.concat(t:size(), ',')))
    if core.C.ln_tensor_crc32(t.p, crc, crc_out) ~= 0 then core.raise() end
    crc = crc_out[0]
  end
  crc = crc_str(crc, tree_json)
  return ('%08x'):format(crc)
end
checkpoint.payload_crc = payload_crc

function checkpoint.save(path, state)
  if type(path) ~= 'string' then error('checkpoint.save: path must be a string', 2) end
  if not is_table(state) then error('checkpoint.save: state must be a table', 2) end
  serialize.no_nul('checkpoint.save', 'the path', path, 2)
  local lunet = require 'lunet'
  local tensors = {}
  local tree = flatten(state, '', tensors, {})
  local text = json.encode(tree)
  local ok, err = pcall(lunet.save, path, tensors, { ['lunet.state'] = text, format = 'lunet-checkpoint-1',
                              ['lunet.crc32'] = payload_crc(tensors, text) })
  -- (raised at the caller's line: "checkpoint.save: save: run.ckpt: write failed: No space left on device")
  if not ok then error('checkpoint.save: ' .. tostring(err):gsub('^[^:\n]*:%d+: ', '', 1), 2) end
end

function checkpoint.load(path, opts)
  if type(path) ~= 'string' then error('checkpoint.load: path must be a string', 2) end
  serialize.no_nul('checkpoint.load', 'the path', path, 2)
  require('lunet.options').check('checkpoint.load', opts, { device = true })
  local lunet = require 'lunet'
  local okl, tensors, meta = pcall(lunet.load, path, opts)
  if not okl then error('checkpoint.load: ' .. tostring(tensors):gsub('^[^:\n]*:%d+: ', '', 1), 2) end
  if not meta or not meta['lunet.state'] then
    error(('checkpoint.load: %s is not a lunet checkpoint (no lunet.state metadata)'):format(path), 2)
  end
  local want = meta['lunet.crc32']
  if want then   -- (files from before the checksum have none)
    local got = payload_crc(tensors, meta['lunet.state'])
    if got ~= want then
      error(('checkpoint.load: %s: checksum mismatch (stored crc32 %s, computed %s): the file is corrupt'):format(
        path, want, got), 2)
    end
  end
  local ok, tree = pcall(json.decode, meta['lunet.state'])
  if not ok then error(('checkpoint.load: %s: bad metadata: %s'):format(path, tree), 2) end
  -- (a hostile file may hold any JSON: a bad tree is an error naming the file)
  local ok2, state = pcall(unflatten, tree, tensors, path)
  if not ok2 or not is_table(state) then
    error(('checkpoint.load: %s: bad lunet.state: %s'):format(path,
      ok2 and ('a ' .. type(state) .. ', not an object') or tostring(state):gsub('^[^:]*:%d+: ', '')), 2)
  end
  return state
end

return checkpoint
