-- nn.LazyConv1d(out_channels, kernel_size[, stride, padding, dilation, groups,
-- bias][, opts]): nn.Conv1d whose in_channels the first forward reads off
-- its input (torch 1.13's LazyConv1d); then it is an nn.Conv1d. See lazy_class.lua.
return require('lunet.nn.lazy_conv')(1, false)
