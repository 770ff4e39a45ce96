-- nn.ConvTranspose1d(in_channels, out_channels, kernel_size[, {stride = 1,
-- padding = 0, output_padding = 0, groups = 1, bias = true, dilation = 1,
-- padding_mode = 'zeros', dtype, device}]), or PyTorch's positional form
-- nn.ConvTranspose1d(cin, cout, k, stride, padding, output_padding, groups, bias, dilation[, opts]).
-- Input (N, C, L) or (C, L); weight (in, out/groups, k), bias (out), as
-- torch's state_dict (F.conv_transpose1d runs it on conv_transpose2d).
-- m(x[, output_size]) picks output_padding to reach output_size ({L} or {N, C, L}).
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local common = require 'lunet.nn.conv_common'

local NAME = 'nn.ConvTranspose1d'
local ConvTranspose1d = Module:extend(NAME)

function ConvTranspose1d:__init(cin, cout, k, ...) common.init(self, NAME, 1, true, cin, cout, k, ...) end

ConvTranspose1d.reset_parameters = common.reset_parameters

function ConvTranspose1d:forward(x, output_size)
  return F.conv_transpose1d(x, self.weight, self.bias, common.transposed_opts(self, NAME, x, output_size))
end

ConvTranspose1d.extra_repr = common.extra_repr

return ConvTranspose1d
