-- nn.ReplicationPad3d(padding): repeats the edges of (N, C, D, H, W) or (C, D, H, W)
-- input; padding a number or {left, right, top, bottom, front, back}
return require('lunet.nn.padding')('ReplicationPad3d', 3, 'replicate')
