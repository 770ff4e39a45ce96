-- nn.ConvTranspose3d(in_channels, out_channels, kernel_size[, {stride = 1,
-- padding = 0, output_padding = 0, groups = 1, bias = true, dilation = 1,
-- padding_mode = 'zeros', dtype, device}]), or PyTorch's positional form
-- nn.ConvTranspose3d(cin, cout, k, stride, padding, output_padding, groups, bias, dilation[, opts]);
-- each size a number or {d, h, w}. Input (N, C, D, H, W) or (C, D, H, W);
-- weight (in, out/groups, kD, kH, kW), bias (out), as torch's state_dict.
-- m(x[, output_size]) picks output_padding to reach output_size ({D, H, W} or
-- {N, C, D, H, W}).
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local common = require 'lunet.nn.conv_common'

local NAME = 'nn.ConvTranspose3d'
local ConvTranspose3d = Module:extend(NAME)

function ConvTranspose3d:__init(cin, cout, k, ...) common.init(self, NAME, 3, true, cin, cout, k, ...) end

ConvTranspose3d.reset_parameters = common.reset_parameters

function ConvTranspose3d:forward(x, output_size)
  return F.conv_transpose3d(x, self.weight, self.bias, common.transposed_opts(self, NAME, x, output_size))
end

ConvTranspose3d.extra_repr = common.extra_repr

return ConvTranspose3d
