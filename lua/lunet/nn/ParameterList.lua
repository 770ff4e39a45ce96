-- nn.ParameterList{p1, p2, ...}: holds parameters registered as '0', '1', ...
-- (PyTorch's state_dict keys, as nn.ModuleList's children) so parameters(),
-- state_dict, :to(), zero_grad and optimizers see them. pl[i] is the i-th
-- (1-based: torch's pl[i-1]), #pl the count, ipairs(pl) or pl:ipairs()
-- walks them; pl:append(p), pl:extend{...}, pl:insert(i, p), pl[i] = p
-- replaces one. A plain tensor given becomes a parameter (requires_grad), as
-- torch's Parameter(t); a non-leaf one is detached first (torch's shares its data).
local Module = require 'lunet.nn.Module'
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename

local ParameterList = Module:extend('nn.ParameterList')

-- (the parameters live in the array part, so #pl and ipairs(pl) work; their
-- torch names '0', '1', ... resolve to it, which is how Module's walks find them)
ParameterList.__index = function(self, k)
  if type(k) == 'string' and k:match('^%d+$') then return rawget(self, tonumber(k) + 1) end
  return ParameterList[k]
end

-- t as a parameter: a floating-point leaf requiring grad (shared with lunet.nn.ParameterDict)
function ParameterList.as_parameter(fn, t, what, level)
  if not T.is_tensor(t) then error(('%s: %s must be a tensor, got %s'):format(fn, what, typename(t)), level + 1) end
  if not t:is_floating_point() then
    error(('%s: %s must be a floating-point tensor to be a parameter, got %s'):format(fn, what, t.dtype), level + 1)
  end
  if not t:is_leaf() then t = t:detach() end
  if not t.requires_grad then t.requires_grad = true end
  return t
end
local as_parameter = ParameterList.as_parameter

function ParameterList:__init(list, more)
  if more ~= nil then options.fail('nn.ParameterList', 'takes one list of tensors, got a second argument') end
  if list ~= nil and (not is_table(list) or T.is_tensor(list)) then options.fail('nn.ParameterList', 'expected a list of tensors, got ' .. typename(list)) end
  self:extend(list or {})
end

-- (#self, the array part: a parameter registered by name is not in the list)
function ParameterList:append(p)
  local n = #self
  p = as_parameter('nn.ParameterList', p, ('parameter %d'):format(n + 1), 2)
  table.insert(self._params, tostring(n))
  rawset(self, n + 1, p)
  return self
end

function ParameterList:extend(list)
  if not is_table(list) or T.is_tensor(list) then error('nn.ParameterList: extend expects a list of tensors, got ' .. typename(list), 2) end
  for k in pairs(list) do
    if type(k) ~= 'number' or k % 1 ~= 0 or k < 1 then
      error(('nn.ParameterList: extend expects a list of tensors, got the key %s'):format(tostring(k)), 2)
    end
  end
  for i = 1, table.maxn(list) do
    if list[i] == nil then error(('nn.ParameterList: parameter %d is nil'):format(i), 2) end
    self:append(list[i])
  end
  return self
end

-- insert(i, p): p becomes the i-th (1..#pl+1), the ones after it move up (and are renamed)
function ParameterList:insert(i, p)
  local n = #self
  if type(i) ~= 'number' or i % 1 ~= 0 or i < 1 or i > n + 1 then
    error(('nn.ParameterList: insert index must be an integer in 1..%d, got %s'):format(n + 1, tostring(i)), 2)
  end
  p = as_parameter('nn.ParameterList', p, 'parameter', 2)
  for j = n, i, -1 do rawset(self, j + 1, rawget(self, j)) end
  rawset(self, i, p)
  table.insert(self._params, tostring(n))
  return self
end

-- pl[i] = p replaces the i-th (1..#pl); other keys are a module's fields
ParameterList.__newindex = function(self, k, v)
  local i = type(k) == 'number' and k or type(k) == 'string' and k:match('^%d+$') and tonumber(k) + 1
  if i then
    local n = #self
    if i % 1 ~= 0 or i < 1 or i > n then
      error(('nn.ParameterList: index %s out of range 1..%d (append adds one)'):format(tostring(k), n), 2)
    end
    return rawset(self, i, as_parameter('nn.ParameterList', v, ('parameter %d'):format(i), 2))
  end
  return Module.__newindex(self, k, v)
end

function ParameterList:size() return #self end

-- for i, p in pl:ipairs() do ... end (as ipairs(pl))
function ParameterList:ipairs() return ipairs(self) end

-- torch's repr: one line per parameter, under its torch name
function ParameterList.describe(p)
  local dev = p.device ~= nil and tostring(p.device) or 'cpu'
  return ('Parameter containing: [%s of size %s%s]'):format(p.dtype, table.concat(p:size(), 'x'),
    dev:match('^cpu') and '' or ' (' .. dev .. ')')
end

function ParameterList:repr(indent)
  indent = indent or ''
  local lines = { self.__name .. ' {' }
  for _, n in ipairs(self._params) do
    lines[#lines + 1] = indent .. '  (' .. n .. '): ' .. ParameterList.describe(self[n])
  end
  lines[#lines + 1] = indent .. '}'
  return table.concat(lines, '\n')
end

function ParameterList:forward() error('nn.ParameterList: has no forward; use its parameters', 2) end

return ParameterList
