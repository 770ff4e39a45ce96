-- lunet.nn.lazy_conv(nd, transposed): the class of nn.LazyConv<nd>d or
-- nn.LazyConvTranspose<nd>d(out_channels, kernel_size[, ...][, opts]): the
-- regular convolution's arguments but in_channels, which the first forward
-- reads off its input ((C, ...) or (N, C, ...)). See lazy_class.lua.
local options = require 'lunet.options'
local common = require 'lunet.nn.conv_common'

return function(nd, transposed)
  local kind = (transposed and 'ConvTranspose' or 'Conv') .. nd .. 'd'
  local name = 'nn.Lazy' .. kind
  return require('lunet.nn.lazy_class')({
    name = name, regular = require('lunet.nn.' .. kind), field = 'in_channels',
    dims = { nd + 1, nd + 2 }, channel = -(nd + 1), keys = { 'weight' },
    -- (in_channels = groups passes the divisibility check; the regular
    -- module's own checks say what else is wrong)
    probe = function(args)
      if type(args[1]) ~= 'number' or (type(args[2]) ~= 'number' and type(args[2]) ~= 'table') then
        options.fail(name, 'expected (out_channels, kernel_size[, stride, padding, ...][, opts])')
      end
      local o = options.positional(name, transposed and common.TRANSPOSED_POSITIONAL or common.POSITIONAL,
        unpack(args, 3, args.n)) or {}
      local g = o.groups
      if not (type(g) == 'number' and g >= 1 and g % 1 == 0 and g < 2 ^ 31) then return 1 end
      if args[1] % g ~= 0 then   -- (the regular module's message would blame in_channels too)
        options.fail(name, ('out_channels %s must be divisible by groups %d'):format(tostring(args[1]), g))
      end
      return g
    end,
    -- (a convolution's weight is (out, in/groups, k...), a transposed one's (in, out/groups, k...))
    from_tensor = function(self, _, t)
      if t:dim() ~= nd + 2 then return nil end
      return transposed and t:size(1) or t:size(2) * self.groups
    end,
  })
end
