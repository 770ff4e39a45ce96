-- nn.MaxPool2d(kernel_size[, {stride = kernel_size, padding = 0, dilation = 1, ceil_mode = false}])
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local MaxPool2d = Module:extend('nn.MaxPool2d')

function MaxPool2d:__init(k, opts)
  if k == nil then error('nn.MaxPool2d: expected kernel_size', 3) end
  opts = opts or {}
  if type(opts) == 'number' then opts = { stride = opts } end
  self.kernel_size = k
  self.opts = { stride = opts.stride, padding = opts.padding, dilation = opts.dilation, ceil_mode = opts.ceil_mode }
end

function MaxPool2d:forward(x) return F.max_pool2d(x, self.kernel_size, self.opts) end

local function s(v) if type(v) == 'table' then return v[1] .. 'x' .. v[2] end return v .. 'x' .. v end

function MaxPool2d:extra_repr()
  local o = self.opts
  local r = s(self.kernel_size)
  if o.stride then r = r .. ', stride ' .. s(o.stride) end
  if o.padding and o.padding ~= 0 then r = r .. ', pad ' .. s(o.padding) end
  if o.dilation and o.dilation ~= 1 then r = r .. ', dilation ' .. s(o.dilation) end
  if o.ceil_mode then r = r .. ', ceil' end
  return r
end

return MaxPool2d
