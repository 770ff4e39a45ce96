-- nn.ConstantPad3d(padding, value): pads the last three dims of any input with value;
-- padding a number or {left, right, top, bottom, front, back}, as torch's
return require('lunet.nn.padding')('ConstantPad3d', 3, 'constant')
