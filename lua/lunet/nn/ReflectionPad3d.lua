-- nn.ReflectionPad3d(padding): mirrors (N, C, D, H, W) or (C, D, H, W) input, the
-- edge not repeated (each padding below its dim's size); padding a number or
-- {left, right, top, bottom, front, back}
return require('lunet.nn.padding')('ReflectionPad3d', 3, 'reflect')
