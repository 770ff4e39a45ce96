-- nn.Dropout1d([p = 0.5[, inplace = false]]) or nn.Dropout1d{p, inplace}: input
-- (N, C, L) or (C, L); in training zeroes whole channels with probability p
-- (lunet's seeded RNG) and scales the kept ones by 1/(1-p); identity in eval.
-- inplace overwrites the input and returns it (PyTorch's nn.Dropout1d(p, True))
local F = require 'lunet.nn.functional'
return require('lunet.nn.dropout_class')('Dropout1d', F.dropout1d)
