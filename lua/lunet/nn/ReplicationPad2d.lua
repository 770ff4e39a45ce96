-- nn.ReplicationPad2d(padding): repeats the edge values of (N, C, H, W) or
-- (C, H, W) input; padding a number or {left, right, top, bottom}
return require('lunet.nn.padding')('ReplicationPad2d', 2, 'replicate')
