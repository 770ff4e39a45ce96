-- nn.ModuleList{m1, m2, ...}: holds modules (registered as '0', '1', ... so
-- their parameters and state_dict keys are PyTorch's) without a forward of
-- its own; list[i] is the i-th module (1-based), list:append(m), list:ipairs().
local Module = require 'lunet.nn.Module'
local container = require 'lunet.nn.container'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)

local ModuleList = Module:extend('nn.ModuleList')

ModuleList.__index = function(self, k)
  if type(k) == 'number' then
    local names = rawget(self, '_children')
    return names and names[k] and rawget(self, names[k])
  end
  return ModuleList[k]
end

-- list[i] = m replaces the i-th module (lunet.nn.container); other keys as any module's
ModuleList.__newindex = function(self, k, v)
  if type(k) == 'number' then return container.set_item(self, 'nn.ModuleList', k, v) end
  return Module.__newindex(self, k, v)
end

function ModuleList:__init(list)
  if list ~= nil and not is_table(list) then error('nn.ModuleList: expected a list of modules, got ' .. typename(list), 3) end
  for i = 1, table.maxn(list or {}) do
    if list[i] == nil then error(('nn.ModuleList: module %d is nil'):format(i), 3) end
    self:append(list[i])
  end
end

function ModuleList:append(m)
  if not is_table(m) or not m._params then
    error(('nn.ModuleList: append expects an nn.Module, got %s'):format(typename(m)), 2)
  end
  self:add_module(tostring(#self._children), m)
  return self
end

-- insert(i, m), pop([i]), extend(list): lunet.nn.container (torch's, 1-based)
function ModuleList:insert(i, m) return container.insert(self, 'nn.ModuleList', i, m) end
function ModuleList:pop(i) return container.pop(self, 'nn.ModuleList', i) end
-- (on the class itself, extend is Module.extend: nn.ModuleList:extend('models.X') subclasses it)
function ModuleList:extend(list)
  if rawget(self, '_params') == nil then return Module.extend(self, list) end
  return container.extend(self, 'nn.ModuleList', list)
end

function ModuleList:size() return #self._children end

-- for i, m in list:ipairs() do ... end
function ModuleList:ipairs()
  local i = 0
  return function()
    i = i + 1
    local n = self._children[i]
    if n then return i, self[n] end
  end
end

function ModuleList:forward() error('nn.ModuleList: has no forward; call its modules', 2) end

return ModuleList
