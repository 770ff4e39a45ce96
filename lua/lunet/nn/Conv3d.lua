-- nn.Conv3d(in_channels, out_channels, kernel_size[, {stride = 1, padding = 0
-- (a number, {d, h, w}, 'same' or 'valid'), dilation = 1, groups = 1, bias = true,
-- padding_mode = 'zeros' ('reflect', 'replicate', 'circular'), dtype,
-- device}]), or PyTorch's positional form
-- nn.Conv3d(cin, cout, k, stride, padding, dilation, groups, bias[, opts]).
-- Input (N, C, D, H, W) or (C, D, H, W); weight {out, in/groups, kD, kH, kW},
-- bias {out}, as torch's state_dict (F.conv3d runs it on conv2d's kernels).
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local common = require 'lunet.nn.conv_common'

local Conv3d = Module:extend('nn.Conv3d')

function Conv3d:__init(cin, cout, k, ...) common.init(self, 'nn.Conv3d', 3, false, cin, cout, k, ...) end

Conv3d.reset_parameters = common.reset_parameters

function Conv3d:forward(x) return F.conv3d(common.padded(self, x), self.weight, self.bias, self._opts) end

Conv3d.extra_repr = common.extra_repr

return Conv3d
