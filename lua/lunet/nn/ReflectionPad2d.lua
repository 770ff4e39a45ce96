-- nn.ReflectionPad2d(padding): mirrors (N, C, H, W) or (C, H, W) input, the
-- edge not repeated (each padding below its dim's size); padding a number or
-- {left, right, top, bottom}
return require('lunet.nn.padding')('ReflectionPad2d', 2, 'reflect')
