-- nn.Dropout2d([p = 0.5[, inplace = false]]) or nn.Dropout2d{p, inplace}: input
-- (N, C, H, W); in training zeroes whole channels with probability p (lunet's
-- seeded RNG) and scales the kept ones by 1/(1-p); identity in eval. inplace
-- overwrites the input and returns it (PyTorch's nn.Dropout2d(p, True))
local F = require 'lunet.nn.functional'
return require('lunet.nn.dropout_class')('Dropout2d', F.dropout2d)
