-- The max-unpooling modules' shared body, over F.max_unpool1d/2d/3d:
-- nn.MaxUnpool1d/2d/3d(kernel_size[, stride = kernel_size[, padding = 0]])
-- or (kernel_size, {stride, padding}), as torch's; forward(input, indices[,
-- output_size]) takes the output and 1-based indices of the matching max pool.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local is_table = require('lunet.core').is_table

local OPTS, POSITIONAL = { stride = 'number|table', padding = 'number|table' }, { 'stride', 'padding' }
local CHECK = { options.single, options.pair, options.triple }

local function show(v) return is_table(v) and '{' .. table.concat(v, ', ') .. '}' or tostring(v) end

return function(nd)
  local name = ('nn.MaxUnpool%dd'):format(nd)
  local fn = F[('max_unpool%dd'):format(nd)]
  local Unpool = Module:extend(name)

  function Unpool:__init(k, ...)
    if type(k) ~= 'number' and not is_table(k) then
      options.fail(name, 'expected kernel_size (a number or a list), got ' .. type(k))
    end
    local o = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
    CHECK[nd](name, 'kernel_size', k, 1)
    CHECK[nd](name, 'stride', o.stride, 1)
    CHECK[nd](name, 'padding', o.padding, 0)
    self.kernel_size, self.stride, self.padding = k, o.stride or k, o.padding or 0
    self.opts = { stride = self.stride, padding = self.padding }
  end

  function Unpool:forward(x, indices, output_size)
    if output_size == nil then return fn(x, indices, self.kernel_size, self.opts) end
    return fn(x, indices, self.kernel_size, { stride = self.stride, padding = self.padding, output_size = output_size })
  end

  function Unpool:extra_repr()
    return ('kernel_size %s, stride %s, padding %s'):format(show(self.kernel_size), show(self.stride), show(self.padding))
  end

  return Unpool
end
