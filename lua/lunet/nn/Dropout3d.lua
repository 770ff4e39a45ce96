-- nn.Dropout3d([p = 0.5[, inplace = false]]) or nn.Dropout3d{p, inplace}: input
-- (N, C, D, H, W) or (C, D, H, W); in training zeroes whole channels with
-- probability p (lunet's seeded RNG) and scales the kept ones by 1/(1-p);
-- identity in eval. inplace overwrites the input and returns it
local F = require 'lunet.nn.functional'
return require('lunet.nn.dropout_class')('Dropout3d', F.dropout3d)
