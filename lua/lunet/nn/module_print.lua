-- nn.Module's copies and printing: clone(), extra_repr(), repr(), tostring
-- (the tree, then the parameter count). Installed by lunet.nn.Module.
local core = require 'lunet.core'
local is_table = core.is_table
local T = require 'lunet.tensor'
local autograd = require 'lunet.autograd'
local is_tensor = T.is_tensor

return function(Module)

local function deep_copy(v, memo)
  if is_tensor(v) then
    if memo[v] then return memo[v] end
    local c = autograd.no_grad(function() return v:clone() end)
    if v.requires_grad then c.requires_grad = true end
    memo[v] = c
    return c
  end
  if not is_table(v) then return v end
  if memo[v] then return memo[v] end
  local c = {}
  memo[v] = c
  for k, x in pairs(v) do c[deep_copy(k, memo)] = deep_copy(x, memo) end
  return setmetatable(c, getmetatable(v))
end

-- a deep copy: new parameters and buffers with the same values, no gradients
function Module:clone() return deep_copy(self, {}) end

-- the one-line description inside the parentheses (layers override)
function Module:extra_repr() return nil end

-- 41418 -> "41,418": every parameter count lunet prints is grouped so
local function group(n)
  local s = tostring(n)
  return (s:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', ''))
end
Module.format_count = group

function Module:repr(indent)
  indent = indent or ''
  local extra = self:extra_repr()
  local head = self.__name .. (extra and '(' .. extra .. ')' or '')
  if #self._children == 0 then return head end
  local lines = { head .. ' {' }
  for _, n in ipairs(self._children) do
    lines[#lines + 1] = indent .. '  (' .. n .. '): ' .. self[n]:repr(indent .. '  ')
  end
  lines[#lines + 1] = indent .. '}'
  return table.concat(lines, '\n')
end

Module.__tostring = function(self)
  local n = self:num_parameters()
  return self:repr() .. ('\n%s parameter%s'):format(group(n), n == 1 and '' or 's')
end

end
