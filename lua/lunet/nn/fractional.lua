-- The fractional max pools' shared body, over F.fractional_max_pool2d/3d:
-- nn.FractionalMaxPool2d/3d(kernel_size[, output_size[, output_ratio[,
-- return_indices = false[, _random_samples]]]]) or (kernel_size, {...}), as
-- torch's: exactly one of output_size and output_ratio (each ratio in (0, 1)).
-- Without _random_samples each forward draws new windows from lunet's RNG.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local is_table = require('lunet.core').is_table

local OPTS = { output_size = 'number|table', output_ratio = 'number|table', return_indices = 'boolean',
  _random_samples = 'tensor' }
local POSITIONAL = { 'output_size', 'output_ratio', 'return_indices', '_random_samples' }
local CHECK = { nil, options.pair, options.triple }

local function show(v) return is_table(v) and '{' .. table.concat(v, ', ') .. '}' or tostring(v) end

return function(nd)
  local name = ('nn.FractionalMaxPool%dd'):format(nd)
  local fn = F[('fractional_max_pool%dd'):format(nd)]
  local Pool = Module:extend(name)

  function Pool:__init(k, ...)
    if type(k) ~= 'number' and not is_table(k) then
      options.fail(name, 'expected kernel_size (a number or a list), got ' .. type(k))
    end
    local o = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
    CHECK[nd](name, 'kernel_size', k, 1)
    CHECK[nd](name, 'output_size', o.output_size, 1)
    if (o.output_size == nil) == (o.output_ratio == nil) then
      options.fail(name, 'takes one of output_size and output_ratio')
    end
    local r = o.output_ratio
    if r ~= nil then
      local t = is_table(r) and r or { r, r, r }
      for i = 1, nd do
        if type(t[i]) ~= 'number' or not (t[i] > 0 and t[i] < 1) or is_table(r) and #r ~= nd then
          options.fail(name, 'output_ratio must be in (0, 1) (a number or a list of ' .. nd .. '), got ' .. show(r))
        end
      end
    end
    self.kernel_size = k
    self.opts = { output_size = o.output_size, output_ratio = r, return_indices = o.return_indices == true,
      _random_samples = o._random_samples }
  end

  function Pool:forward(x) return fn(x, self.kernel_size, self.opts) end

  function Pool:extra_repr()
    local o = self.opts
    return ('kernel_size %s, %s %s'):format(show(self.kernel_size), o.output_size and 'output_size' or 'output_ratio',
      show(o.output_size or o.output_ratio))
  end

  return Pool
end
