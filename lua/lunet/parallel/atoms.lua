-- lunet.parallel.atoms: the units a pipeline cuts a model into.
--
--   atoms.of(model) -> { {module = m, name = '0'}, {module = m2, name = '3.1'}, ... }
--
-- An nn.Sequential is flattened in order, nested Sequentials included; any
-- other module (a BasicBlock, a user's container, a layer) is one atom. name
-- is the atom's path in the unwrapped model, so that its parameters' names
-- there are name .. '.' .. the atom's own (model:state_dict()'s keys). A
-- model that is not a Sequential is a single atom named ''.
-- atoms.named_parameters(list, from, to): {{name, tensor}, ...} of atoms from..to.
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local atoms = {}

local Sequential   -- (loaded on first use: lunet.nn loads lunet.parallel's users)

local function is_sequential(m)
  Sequential = Sequential or require 'lunet.nn.Sequential'
  local mt = getmetatable(m)
  -- a Sequential subclass with its own forward is a user's container: an atom
  return mt == Sequential and require('lunet.nn.hooks').plain(m)
end

local function walk(m, prefix, out)
  for _, n in ipairs(m._children) do
    local child = m[n]
    local name = prefix == '' and n or prefix .. '.' .. n
    if is_sequential(child) then walk(child, name, out)
    else out[#out + 1] = { module = child, name = name } end
  end
  return out
end

function atoms.of(model)
  if not is_table(model) or not rawget(model, '_params') then
    error('atoms.of: expected an nn.Module, got ' .. typename(model), 2)
  end
  if not is_sequential(model) then return { { module = model, name = '' } } end
  return walk(model, '', {})
end

-- {{full name, tensor}, ...} of the parameters of atoms list[from..to]
function atoms.named_parameters(list, from, to)
  local out = {}
  for i = from or 1, to or #list do
    local a = list[i]
    for _, e in ipairs(a.module:named_parameters(a.name)) do out[#out + 1] = e end
  end
  return out
end

return atoms
