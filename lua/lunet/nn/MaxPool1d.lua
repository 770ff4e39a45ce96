-- nn.MaxPool1d(kernel_size[, {stride = kernel_size, padding = 0, dilation = 1,
-- return_indices = false, ceil_mode = false}]), or PyTorch's positional form
-- nn.MaxPool1d(k, stride, padding, dilation, return_indices, ceil_mode[, opts]).
-- Input (N, C, L) or (C, L); indices are 1-based positions along L.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local MaxPool1d = Module:extend('nn.MaxPool1d')

local OPTS = { stride = 'number|table', padding = 'number|table', dilation = 'number|table',
  return_indices = 'boolean', ceil_mode = 'boolean' }
local POSITIONAL = { 'stride', 'padding', 'dilation', 'return_indices', 'ceil_mode' }

function MaxPool1d:__init(k, ...)
  local name = 'nn.MaxPool1d'
  if k == nil then options.fail(name, 'expected kernel_size (a number or {n})') end
  local opts = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
  self.kernel_size = options.single(name, 'kernel_size', k, 1)
  self.stride = options.single(name, 'stride', opts.stride, 1) or self.kernel_size
  self.padding = options.single(name, 'padding', opts.padding, 0) or 0
  self.dilation = options.single(name, 'dilation', opts.dilation, 1) or 1
  self.ceil_mode, self.return_indices = opts.ceil_mode == true, opts.return_indices == true
  self.opts = { stride = self.stride, padding = self.padding, dilation = self.dilation, ceil_mode = self.ceil_mode,
    return_indices = self.return_indices }
end

function MaxPool1d:forward(x) return F.max_pool1d(x, self.kernel_size, self.opts) end

function MaxPool1d:extra_repr()
  local r = tostring(self.kernel_size)
  if self.stride ~= self.kernel_size then r = r .. ', stride ' .. self.stride end
  if self.padding ~= 0 then r = r .. ', pad ' .. self.padding end
  if self.dilation ~= 1 then r = r .. ', dilation ' .. self.dilation end
  if self.ceil_mode then r = r .. ', ceil' end
  if self.return_indices then r = r .. ', return_indices' end
  return r
end

return MaxPool1d
