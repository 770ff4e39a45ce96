-- nn.ConstantPad2d(padding, value): pads the last two dims of any input with value;
-- padding a number or {left, right, top, bottom}, as torch's
return require('lunet.nn.padding')('ConstantPad2d', 2, 'constant')
