-- nn.LazyInstanceNorm2d([eps, momentum, affine, track_running_stats][, opts]):
-- nn.InstanceNorm2d whose num_features the first forward reads off its input
-- (torch 1.13's LazyInstanceNorm2d); then it is an nn.InstanceNorm2d. See lazy_class.lua.
return require('lunet.nn.lazy_norm')('InstanceNorm', 2)
