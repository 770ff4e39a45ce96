-- nn.MaxPool3d(kernel_size[, {stride = kernel_size, padding = 0, dilation = 1,
-- ceil_mode = false}]), or PyTorch's positional form
-- nn.MaxPool3d(k, stride, padding, dilation, return_indices, ceil_mode[, opts]);
-- each size a number or {d, h, w}. Input (N, C, D, H, W) or (C, D, H, W).
-- return_indices is refused (F.max_pool3d is separable, it has no 3-d index).
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local MaxPool3d = Module:extend('nn.MaxPool3d')

local OPTS = { stride = 'number|table', padding = 'number|table', dilation = 'number|table',
  return_indices = 'boolean', ceil_mode = 'boolean' }
local POSITIONAL = { 'stride', 'padding', 'dilation', 'return_indices', 'ceil_mode' }

local function list(name, what, v, min) return { options.triple(name, what, v, min) } end

function MaxPool3d:__init(k, ...)
  local name = 'nn.MaxPool3d'
  if k == nil then options.fail(name, 'expected kernel_size (a number or {d, h, w})') end
  local opts = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
  if opts.return_indices then options.fail(name, 'return_indices is not supported') end
  self.kernel_size = list(name, 'kernel_size', k, 1)
  self.stride = opts.stride ~= nil and list(name, 'stride', opts.stride, 1) or self.kernel_size
  self.padding = list(name, 'padding', opts.padding or 0, 0)
  self.dilation = list(name, 'dilation', opts.dilation or 1, 1)
  self.ceil_mode = opts.ceil_mode == true
  self.opts = { stride = self.stride, padding = self.padding, dilation = self.dilation, ceil_mode = self.ceil_mode }
end

function MaxPool3d:forward(x) return F.max_pool3d(x, self.kernel_size, self.opts) end

local function s(v) return v[1] .. 'x' .. v[2] .. 'x' .. v[3] end
local function is(v, n) return v[1] == n and v[2] == n and v[3] == n end

function MaxPool3d:extra_repr()
  local r = s(self.kernel_size)
  if self.stride ~= self.kernel_size then r = r .. ', stride ' .. s(self.stride) end
  if not is(self.padding, 0) then r = r .. ', pad ' .. s(self.padding) end
  if not is(self.dilation, 1) then r = r .. ', dilation ' .. s(self.dilation) end
  if self.ceil_mode then r = r .. ', ceil' end
  return r
end

return MaxPool3d
