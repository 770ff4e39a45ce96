-- nn.LazyBatchNorm1d([eps, momentum, affine, track_running_stats][, opts]):
-- nn.BatchNorm1d whose num_features the first forward reads off its input
-- (torch 1.13's LazyBatchNorm1d); then it is an nn.BatchNorm1d. See lazy_class.lua.
return require('lunet.nn.lazy_norm')('BatchNorm', 1)
