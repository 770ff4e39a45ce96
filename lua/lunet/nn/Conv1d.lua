-- nn.Conv1d(in_channels, out_channels, kernel_size[, {stride = 1, padding = 0
-- (a number, 'same' or 'valid'), dilation = 1, groups = 1, bias = true,
-- padding_mode = 'zeros' ('reflect', 'replicate', 'circular'), dtype,
-- device}]), or PyTorch's positional form
-- nn.Conv1d(cin, cout, k, stride, padding, dilation, groups, bias[, opts]).
-- Input (N, C, L) or (C, L); weight {out, in/groups, k}, bias {out}, as
-- torch's state_dict (F.conv1d runs it on conv2d's kernels).
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local common = require 'lunet.nn.conv_common'

local Conv1d = Module:extend('nn.Conv1d')

function Conv1d:__init(cin, cout, k, ...) common.init(self, 'nn.Conv1d', 1, false, cin, cout, k, ...) end

Conv1d.reset_parameters = common.reset_parameters

function Conv1d:forward(x) return F.conv1d(common.padded(self, x), self.weight, self.bias, self._opts) end

Conv1d.extra_repr = common.extra_repr

return Conv1d
