-- nn.LazyBatchNorm2d([eps, momentum, affine, track_running_stats][, opts]):
-- nn.BatchNorm2d whose num_features the first forward reads off its input
-- (torch 1.13's LazyBatchNorm2d); then it is an nn.BatchNorm2d. See lazy_class.lua.
return require('lunet.nn.lazy_norm')('BatchNorm', 2)
