-- nn.LazyInstanceNorm1d([eps, momentum, affine, track_running_stats][, opts]):
-- nn.InstanceNorm1d whose num_features the first forward reads off its input
-- (torch 1.13's LazyInstanceNorm1d); then it is an nn.InstanceNorm1d. See lazy_class.lua.
return require('lunet.nn.lazy_norm')('InstanceNorm', 1)
