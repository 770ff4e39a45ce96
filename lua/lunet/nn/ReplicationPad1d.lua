-- nn.ReplicationPad1d(padding): repeats the edge values of (N, C, W) or (C, W)
-- input along W; padding a number or {left, right}
return require('lunet.nn.padding')('ReplicationPad1d', 1, 'replicate')
