-- nn.LazyConvTranspose2d(out_channels, kernel_size[, stride, padding,
-- output_padding, groups, bias, dilation][, opts]): nn.ConvTranspose2d whose
-- in_channels the first forward reads off its input (torch 1.13's
-- LazyConvTranspose2d); then it is an nn.ConvTranspose2d. See lazy_class.lua.
return require('lunet.nn.lazy_conv')(2, true)
