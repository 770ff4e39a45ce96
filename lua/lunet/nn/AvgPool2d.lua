-- nn.AvgPool2d(kernel_size[, {stride = kernel_size, padding = 0, ceil_mode = false, count_include_pad = true}]),
-- or PyTorch's positional form nn.AvgPool2d(k, stride, padding, ceil_mode, count_include_pad[, opts])
local Module = require 'lunet.nn.Module'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local AvgPool2d = Module:extend('nn.AvgPool2d')

local OPTS = { stride = 'number|table', padding = 'number|table', ceil_mode = 'boolean',
  count_include_pad = 'boolean' }
local POSITIONAL = { 'stride', 'padding', 'ceil_mode', 'count_include_pad' }

function AvgPool2d:__init(k, ...)
  if type(k) ~= 'number' and not is_table(k) then
    options.fail('nn.AvgPool2d', 'expected kernel_size (a number or {h, w}), got ' .. typename(k))
  end
  local opts = options.check('nn.AvgPool2d', options.positional('nn.AvgPool2d', POSITIONAL, ...), OPTS) or {}
  options.pair('nn.AvgPool2d', 'kernel_size', k, 1)
  options.pair('nn.AvgPool2d', 'stride', opts.stride, 1)
  options.pair('nn.AvgPool2d', 'padding', opts.padding, 0)
  self.kernel_size = k
  self.opts = { stride = opts.stride, padding = opts.padding, ceil_mode = opts.ceil_mode,
    count_include_pad = opts.count_include_pad }
end

function AvgPool2d:forward(x) return F.avg_pool2d(x, self.kernel_size, self.opts) end

local function s(v) if is_table(v) then return v[1] .. 'x' .. v[2] end return v .. 'x' .. v end

function AvgPool2d:extra_repr()
  local o = self.opts
  local r = s(self.kernel_size)
  if o.stride then r = r .. ', stride ' .. s(o.stride) end
  if o.padding and o.padding ~= 0 then r = r .. ', pad ' .. s(o.padding) end
  if o.ceil_mode then r = r .. ', ceil' end
  if o.count_include_pad == false then r = r .. ', exclude pad' end
  return r
end

return AvgPool2d
