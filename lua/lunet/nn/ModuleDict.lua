-- nn.ModuleDict{name = module, ...}: holds modules under their names, without
-- a forward of its own. A Lua table has no order, so the children are kept in
-- sorted name order: parameters(), state_dict() and printing are the same on
-- every run. dict[name] (or dict.name) is a module, dict[name] = m adds or
-- replaces one, dict:keys(), dict:values(), dict:items() ({name, module} pairs,
-- in that order), dict:size(), dict:contains(name), dict:update{...}, dict:pop(name).
local Module = require 'lunet.nn.Module'
local options = require 'lunet.options'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename

local ModuleDict = Module:extend('nn.ModuleDict')

-- a name that would hide one of the class's methods or a module's own fields
local function check_name(name, level)
  if type(name) ~= 'string' then
    error(('nn.ModuleDict: names must be strings, got %s %s'):format(typename(name), tostring(name)), level + 1)
  end
  if name == '' or name:find('.', 1, true) then
    error(("nn.ModuleDict: name '%s' must be non-empty and contain no '.'"):format(name), level + 1)
  end
  if ModuleDict[name] ~= nil or name == 'training' or name:sub(1, 1) == '_' and
      (name == '_params' or name == '_buffers' or name == '_children' or name == '_hooks') then
    error(("nn.ModuleDict: name '%s' is taken by the module's own methods or fields"):format(name), level + 1)
  end
end

-- adds or replaces name, keeping _children sorted
local function put(self, name, m, level)
  check_name(name, level + 1)
  if not is_table(m) or not rawget(m, '_params') then
    error(('nn.ModuleDict: %s must be an nn.Module, got %s'):format(name, typename(m)), level + 1)
  end
  local ch = self._children
  if not self:_has('_children', name) then
    local i = #ch + 1
    while i > 1 and ch[i - 1] > name do i = i - 1 end
    table.insert(ch, i, name)
    local ok, err = pcall(Module.add_module, self, name, m)
    if not ok then table.remove(ch, i); error((tostring(err):gsub('^[^:\n]*:%d+: ', '', 1)), level + 1) end
  else
    Module.add_module(self, name, m)
  end
end

function ModuleDict:__init(dict)
  if dict ~= nil and not is_table(dict) then options.fail('nn.ModuleDict', 'expected a table {name = module, ...}, got ' .. typename(dict)) end
  self:update(dict or {})
end

-- dict:update{name = module, ...}: adds or replaces each
function ModuleDict:update(dict)
  if not is_table(dict) then error('nn.ModuleDict: update expects a table {name = module, ...}, got ' .. typename(dict), 2) end
  local names = {}
  for k in pairs(dict) do
    check_name(k, 2)
    names[#names + 1] = k
  end
  table.sort(names)
  for _, k in ipairs(names) do put(self, k, dict[k], 2) end
  return self
end

ModuleDict.__newindex = function(self, k, v)
  if rawget(self, '_params') and type(k) == 'string' and is_table(v) and rawget(v, '_params') then
    return put(self, k, v, 2)
  end
  return Module.__newindex(self, k, v)
end

-- dict:add_module(name, m) keeps the sorted order too
function ModuleDict:add_module(name, m) put(self, tostring(name), m, 2); return m end

function ModuleDict:keys()
  local out = {}
  for i, n in ipairs(self._children) do out[i] = n end
  return out
end

function ModuleDict:values() return self:children() end

function ModuleDict:items() return self:named_children() end

function ModuleDict:size() return #self._children end

function ModuleDict:contains(name) return type(name) == 'string' and self:_has('_children', name) end

-- removes name and returns its module
function ModuleDict:pop(name)
  for i, n in ipairs(self._children) do
    if n == name then
      local m = rawget(self, n)
      table.remove(self._children, i)
      rawset(self, n, nil)
      return m
    end
  end
  error(("nn.ModuleDict: pop: no module named '%s'"):format(tostring(name)), 2)
end

function ModuleDict:forward() error('nn.ModuleDict: has no forward; call its modules', 2) end

return ModuleDict
