-- nn.Sequential{m1, m2, ...} or nn.Sequential(m1, m2, ...): applies its
-- modules in order. Children are named '0', '1', ... as in PyTorch (so
-- state_dict keys match), while seq[1] is the first module, as in Lua.
local Module = require 'lunet.nn.Module'
local container = require 'lunet.nn.container'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local fuse = require 'lunet.nn.fuse'

local Sequential = Module:extend('nn.Sequential')

-- seq[i] is the i-th module (1-based); other keys are fields and methods
Sequential.__index = function(self, k)
  if type(k) == 'number' then
    local names = rawget(self, '_children')
    return names and names[k] and rawget(self, names[k])
  end
  return Sequential[k]
end

-- seq[i] = m replaces the i-th module (lunet.nn.container); other keys as any module's
Sequential.__newindex = function(self, k, v)
  if type(k) == 'number' then return container.set_item(self, 'nn.Sequential', k, v) end
  return Module.__newindex(self, k, v)
end

function Sequential:__init(first, ...)
  local list = first
  if not is_table(first) then
    if first ~= nil then error(('nn.Sequential: expected modules (or a list of them), got %s'):format(typename(first)), 3) end
  end
  if first == nil or first._params then list = { first, ... } end
  for i = 1, table.maxn(list) do
    if list[i] == nil then error(('nn.Sequential: module %d is nil'):format(i), 3) end
    self:add(list[i])
  end
end

-- add(module[, name])
function Sequential:add(m, name)
  if not is_table(m) or not m._params then
    error(('nn.Sequential: add expects an nn.Module, got %s'):format(typename(m)), 2)
  end
  self:add_module(name or tostring(#self._children), m)
  return self
end

function Sequential:get(i) return self[self._children[i]] end
-- insert(i, m), pop([i]), extend(list): lunet.nn.container (torch's, 1-based)
function Sequential:insert(i, m) return container.insert(self, 'nn.Sequential', i, m) end
function Sequential:pop(i) return container.pop(self, 'nn.Sequential', i) end
-- (on the class itself, extend is Module.extend: nn.Sequential:extend('models.X') subclasses it)
function Sequential:extend(list)
  if rawget(self, '_params') == nil then return Module.extend(self, list) end
  return container.extend(self, 'nn.Sequential', list)
end
function Sequential:append(m) return self:add(m) end

function Sequential:size() return #self._children end

-- The children run in order; lunet.nn.fuse runs the known runs of them
-- (conv + batch norm + relu, chains of BasicBlocks, ...) as fused ops with
-- the same results.
function Sequential:forward(x) return fuse.forward(self, x) end

return Sequential
