-- nn.LazyInstanceNorm3d([eps, momentum, affine, track_running_stats][, opts]):
-- nn.InstanceNorm3d whose num_features the first forward reads off its input
-- (torch 1.13's LazyInstanceNorm3d); then it is an nn.InstanceNorm3d. See lazy_class.lua.
return require('lunet.nn.lazy_norm')('InstanceNorm', 3)
