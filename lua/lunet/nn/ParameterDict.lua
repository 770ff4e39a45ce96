-- nn.ParameterDict{name = tensor, ...}: holds parameters under their names
-- (state_dict keys as torch's) so parameters(), state_dict, :to(), zero_grad
-- and optimizers see them. As nn.ModuleDict, a Lua table has no order, so
-- they are kept in sorted name order (torch sorts a plain dict given to it
-- too). pd[name] (or pd.name) is a parameter, pd[name] = t adds or replaces
-- one; pd:keys(), pd:values(), pd:items() ({name, p} pairs), pd:size(),
-- pd:contains(name), pd:get(name[, default]), pd:update{...}, pd:pop(name),
-- pd:clear(). A plain tensor becomes a parameter (requires_grad), as torch's.
local Module = require 'lunet.nn.Module'
local ParameterList = require 'lunet.nn.ParameterList'
local options = require 'lunet.options'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local is_table, typename = core.is_table, core.typename

local ParameterDict = Module:extend('nn.ParameterDict')

local function check_name(name, level)
  if type(name) ~= 'string' then
    error(('nn.ParameterDict: names must be strings, got %s %s'):format(typename(name), tostring(name)), level + 1)
  end
  if name == '' or name:find('.', 1, true) then
    error(("nn.ParameterDict: name '%s' must be non-empty and contain no '.'"):format(name), level + 1)
  end
  if ParameterDict[name] ~= nil or name == 'training' or name == '_params' or name == '_buffers'
      or name == '_children' or name == '_hooks' then
    error(("nn.ParameterDict: name '%s' is taken by the module's own methods or fields"):format(name), level + 1)
  end
end

-- adds or replaces name, keeping _params sorted
local function put(self, name, t, level)
  check_name(name, level + 1)
  local p = ParameterList.as_parameter('nn.ParameterDict', t, name, level + 1)
  local ps = self._params
  if not self:_has('_params', name) then
    local i = #ps + 1
    while i > 1 and ps[i - 1] > name do i = i - 1 end
    table.insert(ps, i, name)
  end
  rawset(self, name, p)
end

function ParameterDict:__init(dict, more)
  if more ~= nil then options.fail('nn.ParameterDict', 'takes one table {name = tensor, ...}, got a second argument') end
  if dict ~= nil and (not is_table(dict) or T.is_tensor(dict)) then
    options.fail('nn.ParameterDict', 'expected a table {name = tensor, ...}, got ' .. typename(dict))
  end
  self:update(dict or {})
end

-- pd:update{name = tensor, ...} (or another ParameterDict): adds or replaces each
function ParameterDict:update(dict)
  if not is_table(dict) or T.is_tensor(dict) then
    error('nn.ParameterDict: update expects a table {name = tensor, ...}, got ' .. typename(dict), 2)
  end
  if getmetatable(dict) == ParameterDict then
    for _, e in ipairs(dict:items()) do put(self, e[1], e[2], 2) end
    return self
  end
  local names = {}
  for k in pairs(dict) do check_name(k, 2); names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do put(self, k, dict[k], 2) end
  return self
end

ParameterDict.__newindex = function(self, k, v)
  if rawget(self, '_params') and type(k) == 'string' and T.is_tensor(v) then return put(self, k, v, 2) end
  return Module.__newindex(self, k, v)
end

function ParameterDict:keys()
  local out = {}
  for i, n in ipairs(self._params) do out[i] = n end
  return out
end
function ParameterDict:values()
  local out = {}
  for i, n in ipairs(self._params) do out[i] = rawget(self, n) end
  return out
end
function ParameterDict:items()
  local out = {}
  for i, n in ipairs(self._params) do out[i] = { n, rawget(self, n) } end
  return out
end
function ParameterDict:size() return #self._params end
function ParameterDict:contains(name) return type(name) == 'string' and self:_has('_params', name) end
function ParameterDict:get(name, default)
  if self:contains(name) then return rawget(self, name) end
  return default
end

-- removes name and returns its parameter
function ParameterDict:pop(name)
  for i, n in ipairs(self._params) do
    if n == name then
      local p = rawget(self, n)
      table.remove(self._params, i)
      rawset(self, n, nil)
      return p
    end
  end
  error(("nn.ParameterDict: pop: no parameter named '%s'"):format(tostring(name)), 2)
end

function ParameterDict:clear()
  for _, n in ipairs(self._params) do rawset(self, n, nil) end
  self._params = {}
end

function ParameterDict:repr(indent)
  indent = indent or ''
  local lines = { self.__name .. ' {' }
  for _, n in ipairs(self._params) do
    lines[#lines + 1] = indent .. '  (' .. n .. '): ' .. ParameterList.describe(rawget(self, n))
  end
  lines[#lines + 1] = indent .. '}'
  return table.concat(lines, '\n')
end

function ParameterDict:forward() error('nn.ParameterDict: has no forward; use its parameters', 2) end

return ParameterDict
