-- nn.Conv2d(in_channels, out_channels, kernel_size[, {stride = 1, padding = 0
-- (a number, {h, w}, 'same' or 'valid'), dilation = 1, groups = 1, bias = true,
-- padding_mode = 'zeros' ('reflect', 'replicate', 'circular'), dtype,
-- device}]), or PyTorch's positional form
-- nn.Conv2d(cin, cout, k, stride, padding, dilation, groups, bias[, opts])
local Module = require 'lunet.nn.Module'
local plain = require('lunet.nn.hooks').plain   -- (no forward of its own, no hooks: fusable)
local F = require 'lunet.nn.functional'
local common = require 'lunet.nn.conv_common'

local Conv2d = Module:extend('nn.Conv2d')

function Conv2d:__init(cin, cout, k, ...) common.init(self, 'nn.Conv2d', 2, false, cin, cout, k, ...) end

Conv2d.reset_parameters = common.reset_parameters

function Conv2d:forward(x) return F.conv2d(common.padded(self, x), self.weight, self.bias, self._opts) end

-- Inference fusion (used by nn.Sequential and nn.BasicBlock, see fusable):
-- relu?(bn(self(x)) + residual?) in one kernel, bn an nn.BatchNorm2d in eval
-- mode with running statistics; the same composition of differentiable ops
-- when a gradient is recorded. Parameters and state_dict are untouched.
function Conv2d:forward_fused(x, bn, residual, relu)
  return F.conv2d_fused(x, self.weight, self.bias, self._opts, bn.weight, bn.bias, bn.running_mean,
    bn.running_var, bn.eps, residual, relu)
end

-- true when conv -> bn can run as one fused kernel: exactly an nn.Conv2d and
-- an nn.BatchNorm2d (not subclasses or instances with their own forward), the
-- batch norm in eval mode on its running statistics, channels matching.
local BatchNorm2d
function Conv2d.fusable(conv, bn)
  BatchNorm2d = BatchNorm2d or require 'lunet.nn.BatchNorm2d'
  return getmetatable(conv) == Conv2d and getmetatable(bn) == BatchNorm2d and not bn.training
    and bn.track_running_stats and bn.num_features == conv.out_channels and conv.padding_mode == 'zeros'
    and plain(conv) and plain(bn)
end

Conv2d.extra_repr = common.extra_repr

return Conv2d
