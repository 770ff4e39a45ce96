-- nn.ConvTranspose2d(in_channels, out_channels, kernel_size[, {stride = 1,
-- padding = 0, output_padding = 0, groups = 1, bias = true, dilation = 1,
-- padding_mode = 'zeros', dtype, device}]), or PyTorch's positional form
-- nn.ConvTranspose2d(cin, cout, k, stride, padding, output_padding, groups, bias, dilation[, opts]).
-- The weight is (in_channels, out_channels/groups, kH, kW), as PyTorch's;
-- m(x[, output_size]) picks output_padding to reach output_size ({H, W} or
-- {N, C, H, W}) when the stride leaves the size ambiguous, as PyTorch's forward.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local common = require 'lunet.nn.conv_common'

local NAME = 'nn.ConvTranspose2d'
local ConvTranspose2d = Module:extend(NAME)

function ConvTranspose2d:__init(cin, cout, k, ...) common.init(self, NAME, 2, true, cin, cout, k, ...) end

ConvTranspose2d.reset_parameters = common.reset_parameters

function ConvTranspose2d:forward(x, output_size)
  return F.conv_transpose2d(x, self.weight, self.bias, common.transposed_opts(self, NAME, x, output_size))
end

ConvTranspose2d.extra_repr = common.extra_repr

return ConvTranspose2d
