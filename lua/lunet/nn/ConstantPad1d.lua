-- nn.ConstantPad1d(padding, value): pads the last dim of any input with value;
-- padding a number or {left, right}, as torch's
return require('lunet.nn.padding')('ConstantPad1d', 1, 'constant')
