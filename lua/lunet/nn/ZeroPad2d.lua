-- nn.ZeroPad2d(padding): pads the last two dims of any input (at least 2-d)
-- with zeros; padding a number (every side) or {left, right, top, bottom}
return require('lunet.nn.padding')('ZeroPad2d', 2, 'constant', 0)
