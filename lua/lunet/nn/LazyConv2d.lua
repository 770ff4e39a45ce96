-- nn.LazyConv2d(out_channels, kernel_size[, stride, padding, dilation, groups,
-- bias][, opts]): nn.Conv2d whose in_channels the first forward reads off
-- its input (torch 1.13's LazyConv2d); then it is an nn.Conv2d. See lazy_class.lua.
return require('lunet.nn.lazy_conv')(2, false)
