-- nn.Module's members by dotted name, as torch's: get_submodule('layer1.0'),
-- get_parameter('layer1.0.conv.weight'), get_buffer('bn.running_mean').
-- Installed by lunet.nn.Module.
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local raise = require('lunet.options').raise

return function(Module)

function Module:get_submodule(target)
  if type(target) ~= 'string' then raise('get_submodule: target must be a string, got ' .. typename(target)) end
  local m = self
  if target == '' then return m end
  for item in (target .. '.'):gmatch('([^.]*)%.') do
    local v = rawget(m, item)
    if v == nil then raise(('get_submodule: %s has no attribute `%s`'):format(m.__name, item)) end
    if not (is_table(v) and rawget(v, '_params')) then raise(('get_submodule: `%s` is not an nn.Module'):format(item)) end
    m = v
  end
  return m
end

local function get_member(fn, list, what, self, target)
  if type(target) ~= 'string' then raise(fn .. ': target must be a string, got ' .. typename(target)) end
  local path, name = target:match('^(.*)%.([^.]*)$')
  local ok, m = pcall(self.get_submodule, self, path or '')
  if not ok then raise((tostring(m):gsub('^[^\n]-get_submodule: ', fn .. ': '))) end
  name = name or target
  if rawget(m, name) == nil then raise(('%s: %s has no attribute `%s`'):format(fn, m.__name, name)) end
  if not m:_has(list, name) then raise(('%s: `%s` is not %s'):format(fn, name, what)) end
  return rawget(m, name)
end
function Module:get_parameter(target) return get_member('get_parameter', '_params', 'a parameter', self, target) end
function Module:get_buffer(target) return get_member('get_buffer', '_buffers', 'a buffer', self, target) end

end
