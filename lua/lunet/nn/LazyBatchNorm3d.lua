-- nn.LazyBatchNorm3d([eps, momentum, affine, track_running_stats][, opts]):
-- nn.BatchNorm3d whose num_features the first forward reads off its input
-- (torch 1.13's LazyBatchNorm3d); then it is an nn.BatchNorm3d. See lazy_class.lua.
return require('lunet.nn.lazy_norm')('BatchNorm', 3)
