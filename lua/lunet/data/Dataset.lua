-- lunet.data.Dataset: the dataset protocol and a small class helper.
--
-- A dataset is anything with a length and `ds:get(i)` (i = 1..#ds) that
-- returns an input (a tensor) and a target (a number or a tensor):
--
--   local Squares = data.Dataset:extend('Squares')
--   function Squares:__init(n) self.n = n end
--   function Squares:__len() return self.n end
--   function Squares:get(i) return lunet.tensor{i}, i * i end
--   local ds = Squares(10)      -- #ds == 10, ds:get(3), ds[3]
--
-- Objects of these classes are userdata proxies, so `#ds` works under
-- LuaJIT (whose tables ignore __len). Plain tables with a `__len` method in
-- their metatable, or a `len` method, work too: data.len(ds) finds it.
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local class_mt = {
  __index = function(cls, k) local p = rawget(cls, '__parent'); return p and p[k] end,
  __tostring = function(cls) return 'class ' .. cls.__name end,
}

-- A class: call it to make an instance; cls.__init(obj, ...) sets it up.
local function class(name, parent)
  return setmetatable({ __name = name, __parent = parent }, class_mt)
end

-- An instance: a userdata proxy (so # and tostring work), fields in a plain
-- table, methods from the class; obj[i] with a number is obj:get(i).
local function new(cls, ...)
  local fields = setmetatable({ __class = cls }, { __index = cls })
  local obj = newproxy(true)
  local mt = getmetatable(obj)
  mt.__index = function(_, k)
    local v = fields[k]
    if v == nil and type(k) == 'number' and fields.get then return obj:get(k) end
    return v
  end
  mt.__newindex = fields
  mt.__len = function(self) return self:__len() end
  mt.__tostring = function(self) return self:__tostring() end
  if cls.__init then
    -- errors of a constructor point at the caller's line, not at lunet's files
    local ok, err = pcall(cls.__init, obj, ...)
    if not ok then
      if type(err) ~= 'string' then error(err, 2) end
      err = err:gsub('^[^\n]-lunet/data/[%w_]+%.lua:%d+: ', '', 1)
      -- (an error lunet already located at the caller's line keeps that one location)
      local at = debug.getinfo(2, 'Sl')
      local here = at and at.currentline > 0 and ('%s:%d: '):format(at.short_src, at.currentline)
      if here and err:sub(1, #here) == here then error(err, 0) end
      error(err, 2)
    end
  end
  return obj
end
class_mt.__call = new

local Dataset = class('Dataset')
Dataset.class, Dataset.new = class, new

function Dataset.extend(parent, name) return class(name or 'Dataset', parent) end

function Dataset:__len() error(self.__name .. ': __len is not implemented', 2) end
function Dataset:get(i) error(self.__name .. ': get is not implemented', 2) end
function Dataset:__tostring() return ('%s(%d samples)'):format(self.__name, self:__len()) end

-- True when obj is an instance of class `base` or of a class extending it.
function Dataset.is_a(obj, base)
  if type(obj) ~= 'userdata' and not is_table(obj) then return false end
  local ok, cls = pcall(function() return obj.__class end)
  while ok and cls do
    if cls == base then return true end
    cls = rawget(cls, '__parent')
  end
  return false
end

return Dataset
