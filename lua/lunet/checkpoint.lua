-- lunet.checkpoint: save and load a whole training state (model, optimizer,
-- scheduler, RNG, loader position, counters) as ONE safetensors file.
-- Tensors anywhere in the state tree become entries named by their path
-- ("model.0.weight", "optimizer.state.1.momentum_buffer"), so PyTorch can read
-- the weights; everything else goes to the metadata as JSON ("lunet.state").
-- lunet.save writes atomically: a crash leaves the previous file intact.
local json = require 'lunet.json'
local T = require 'lunet.tensor'

local checkpoint = {}
local TENSOR = '__tensor__'   -- placeholder in the JSON tree

local function flatten(value, path, tensors)
  if T.is_tensor(value) then
    tensors[path] = value
    return { [TENSOR] = path }
  end
  if type(value) ~= 'table' then return value end
  local out = {}
  for k, v in pairs(value) do
    local key = type(k) == 'number' and ('#' .. k) or tostring(k)
    out[key] = flatten(v, path == '' and tostring(k) or (path .. '.' .. tostring(k)), tensors)
  end
  return out
end

local function unflatten(value, tensors, file)
  if type(value) ~= 'table' then return value end
  if value[TENSOR] then
    local t = tensors[value[TENSOR]]
    if not t then error(('checkpoint.load: %s: tensor %s is missing'):format(file, value[TENSOR]), 0) end
    return t
  end
  local out = {}
  for k, v in pairs(value) do
    local key = k:sub(1, 1) == '#' and tonumber(k:sub(2)) or k
    out[key] = unflatten(v, tensors, file)
  end
  return out
end

function checkpoint.save(path, state)
  if type(path) ~= 'string' then error('checkpoint.save: path must be a string', 2) end
  if type(state) ~= 'table' then error('checkpoint.save: state must be a table', 2) end
  local lunet = require 'lunet'
  local tensors = {}
  local tree = flatten(state, '', tensors)
  lunet.save(path, tensors, { ['lunet.state'] = json.encode(tree), format = 'lunet-checkpoint-1' })
end

function checkpoint.load(path, opts)
  if type(path) ~= 'string' then error('checkpoint.load: path must be a string', 2) end
  local lunet = require 'lunet'
  local tensors, meta = lunet.load(path, opts)
  if not meta or not meta['lunet.state'] then
    error(('checkpoint.load: %s is not a lunet checkpoint (no lunet.state metadata)'):format(path), 2)
  end
  local ok, tree = pcall(json.decode, meta['lunet.state'])
  if not ok then error(('checkpoint.load: %s: bad metadata: %s'):format(path, tree), 2) end
  return unflatten(tree, tensors, path)
end

return checkpoint
