-- nn.FractionalMaxPool3d(kernel_size[, output_size[, output_ratio[, return_indices[, _random_samples]]]]):
-- max pooling over pseudo-random overlapping windows (Graham 2014), as torch's
return require('lunet.nn.fractional')(3)
