-- nn.AvgPool1d(kernel_size[, {stride = kernel_size, padding = 0, ceil_mode = false, count_include_pad = true}]),
-- or PyTorch's positional form nn.AvgPool1d(k, stride, padding, ceil_mode, count_include_pad[, opts]).
-- Input (N, C, L) or (C, L).
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local AvgPool1d = Module:extend('nn.AvgPool1d')

local OPTS = { stride = 'number|table', padding = 'number|table', ceil_mode = 'boolean',
  count_include_pad = 'boolean' }
local POSITIONAL = { 'stride', 'padding', 'ceil_mode', 'count_include_pad' }

function AvgPool1d:__init(k, ...)
  local name = 'nn.AvgPool1d'
  if k == nil then options.fail(name, 'expected kernel_size (a number or {n})') end
  local opts = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
  self.kernel_size = options.single(name, 'kernel_size', k, 1)
  self.stride = options.single(name, 'stride', opts.stride, 1) or self.kernel_size
  self.padding = options.single(name, 'padding', opts.padding, 0) or 0
  self.ceil_mode, self.count_include_pad = opts.ceil_mode == true, opts.count_include_pad ~= false
  self.opts = { stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
    count_include_pad = self.count_include_pad }
end

function AvgPool1d:forward(x) return F.avg_pool1d(x, self.kernel_size, self.opts) end

function AvgPool1d:extra_repr()
  local r = tostring(self.kernel_size)
  if self.stride ~= self.kernel_size then r = r .. ', stride ' .. self.stride end
  if self.padding ~= 0 then r = r .. ', pad ' .. self.padding end
  if self.ceil_mode then r = r .. ', ceil' end
  if not self.count_include_pad then r = r .. ', exclude pad' end
  return r
end

return AvgPool1d
