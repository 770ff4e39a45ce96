-- lunet.nn.dropout_class(name, f): the class of a dropout module
-- nn.<name>([p = 0.5[, inplace = false]]) or nn.<name>{p, inplace}, whose
-- forward is f(x, p, training, inplace) (its nn.functional form). What the
-- channel and alpha dropouts share; each file keeps its doc and its f.
local Module = require 'lunet.nn.Module'
local options = require 'lunet.options'

local OPTS, POSITIONAL = { p = 'number', inplace = 'boolean' }, { 'p', 'inplace' }

return function(name, f)
  local NAME = 'nn.' .. name
  local class = Module:extend(NAME)
  function class:__init(...)
    local o = options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {}
    local a = o.p
    if a ~= nil and not (a >= 0 and a <= 1) then   -- (NaN too)
      options.fail(NAME, 'p must be a number in [0, 1], got ' .. tostring(a))
    end
    self.p = a or 0.5
    self.inplace = o.inplace == true
  end
  function class:forward(x) return f(x, self.p, self.training, self.inplace) end
  function class:extra_repr() return 'p ' .. self.p .. (self.inplace and ', inplace' or '') end
  return class
end
