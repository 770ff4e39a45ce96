-- nn.LazyConvTranspose1d(out_channels, kernel_size[, stride, padding,
-- output_padding, groups, bias, dilation][, opts]): nn.ConvTranspose1d whose
-- in_channels the first forward reads off its input (torch 1.13's
-- LazyConvTranspose1d); then it is an nn.ConvTranspose1d. See lazy_class.lua.
return require('lunet.nn.lazy_conv')(1, true)
