-- nn.Fold(output_size, kernel_size[, {dilation = 1, padding = 0, stride = 1}]),
-- or torch's positional nn.Fold(output_size, kernel_size, dilation, padding,
-- stride): columns (N, C*kh*kw, L) summed back into (N, C, H, W), where each
-- block came from (nn.Unfold's adjoint), as torch's
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local Unfold = require 'lunet.nn.Unfold'
local options = require 'lunet.options'
local core = require 'lunet.core'

local Fold = Module:extend('nn.Fold')

function Fold:__init(output_size, k, ...)
  if type(output_size) ~= 'number' and not core.is_table(output_size) then
    options.fail('nn.Fold', 'expected output_size (a number or {h, w}), got ' .. core.typename(output_size))
  end
  options.pair('nn.Fold', 'output_size', output_size, 1)
  self.opts = Unfold.geometry('nn.Fold', k, ...)
  self.output_size, self.kernel_size = output_size, k
end

function Fold:forward(x) return F.fold(x, self.output_size, self.kernel_size, self.opts) end

function Fold:extra_repr()
  local o = self.output_size
  return 'output_size ' .. (core.is_table(o) and '{' .. o[1] .. ', ' .. o[2] .. '}' or o) .. ', kernel_size '
    .. Unfold.geometry_repr(self.kernel_size, self.opts)
end

return Fold
