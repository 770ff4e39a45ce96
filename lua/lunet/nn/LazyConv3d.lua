-- nn.LazyConv3d(out_channels, kernel_size[, stride, padding, dilation, groups,
-- bias][, opts]): nn.Conv3d whose in_channels the first forward reads off
-- its input (torch 1.13's LazyConv3d); then it is an nn.Conv3d. See lazy_class.lua.
return require('lunet.nn.lazy_conv')(3, false)
