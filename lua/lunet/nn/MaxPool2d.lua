-- nn.MaxPool2d(kernel_size[, {stride = kernel_size, padding = 0, dilation = 1,
-- return_indices = false, ceil_mode = false}]), or PyTorch's positional form
-- nn.MaxPool2d(k, stride, padding, dilation, return_indices, ceil_mode[, opts])
local Module = require 'lunet.nn.Module'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local MaxPool2d = Module:extend('nn.MaxPool2d')

local OPTS = { stride = 'number|table', padding = 'number|table', dilation = 'number|table',
  return_indices = 'boolean', ceil_mode = 'boolean' }
local POSITIONAL = { 'stride', 'padding', 'dilation', 'return_indices', 'ceil_mode' }

function MaxPool2d:__init(k, ...)
  if type(k) ~= 'number' and not is_table(k) then
    options.fail('nn.MaxPool2d', 'expected kernel_size (a number or {h, w}), got ' .. typename(k))
  end
  local opts = options.check('nn.MaxPool2d', options.positional('nn.MaxPool2d', POSITIONAL, ...), OPTS) or {}
  options.pair('nn.MaxPool2d', 'kernel_size', k, 1)
  options.pair('nn.MaxPool2d', 'stride', opts.stride, 1)
  options.pair('nn.MaxPool2d', 'padding', opts.padding, 0)
  options.pair('nn.MaxPool2d', 'dilation', opts.dilation, 1)
  self.kernel_size = k
  self.opts = { stride = opts.stride, padding = opts.padding, dilation = opts.dilation, ceil_mode = opts.ceil_mode,
    return_indices = opts.return_indices }
end

function MaxPool2d:forward(x) return F.max_pool2d(x, self.kernel_size, self.opts) end

local function s(v) if is_table(v) then return v[1] .. 'x' .. v[2] end return v .. 'x' .. v end

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
