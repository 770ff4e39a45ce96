-- nn.ReflectionPad1d(padding): mirrors (N, C, W) or (C, W) input along W, the
-- edge not repeated (each padding below W); padding a number or {left, right}
return require('lunet.nn.padding')('ReflectionPad1d', 1, 'reflect')
