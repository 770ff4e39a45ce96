-- nn.AvgPool3d(kernel_size[, {stride = kernel_size, padding = 0, ceil_mode = false,
-- count_include_pad = true}]), or PyTorch's positional form
-- nn.AvgPool3d(k, stride, padding, ceil_mode, count_include_pad[, opts]); each
-- size a number or {d, h, w}. Input (N, C, D, H, W) or (C, D, H, W).
-- divisor_override is refused.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local AvgPool3d = Module:extend('nn.AvgPool3d')

local OPTS = { stride = 'number|table', padding = 'number|table', ceil_mode = 'boolean',
  count_include_pad = 'boolean', divisor_override = 'number' }
local POSITIONAL = { 'stride', 'padding', 'ceil_mode', 'count_include_pad', 'divisor_override' }

local function list(name, what, v, min) return { options.triple(name, what, v, min) } end

function AvgPool3d:__init(k, ...)
  local name = 'nn.AvgPool3d'
  if k == nil then options.fail(name, 'expected kernel_size (a number or {d, h, w})') end
  local opts = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
  if opts.divisor_override ~= nil then options.fail(name, 'divisor_override is not supported') end
  self.kernel_size = list(name, 'kernel_size', k, 1)
  self.stride = opts.stride ~= nil and list(name, 'stride', opts.stride, 1) or self.kernel_size
  self.padding = list(name, 'padding', opts.padding or 0, 0)
  self.ceil_mode, self.count_include_pad = opts.ceil_mode == true, opts.count_include_pad ~= false
  self.opts = { stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
    count_include_pad = self.count_include_pad }
end

function AvgPool3d:forward(x) return F.avg_pool3d(x, self.kernel_size, self.opts) end

local function s(v) return v[1] .. 'x' .. v[2] .. 'x' .. v[3] end

function AvgPool3d:extra_repr()
  local r, p = s(self.kernel_size), self.padding
  if self.stride ~= self.kernel_size then r = r .. ', stride ' .. s(self.stride) end
  if p[1] + p[2] + p[3] ~= 0 then r = r .. ', pad ' .. s(p) end
  if self.ceil_mode then r = r .. ', ceil' end
  if not self.count_include_pad then r = r .. ', exclude pad' end
  return r
end

return AvgPool3d
