-- nn.AlphaDropout([p = 0.5[, inplace = false]]) or nn.AlphaDropout{p, inplace}: SELU's
-- dropout: in training each element is set with probability p to SELU's
-- negative saturation, then all go through the affine map that keeps mean 0
-- and variance 1 (PyTorch's formula); identity in eval
local F = require 'lunet.nn.functional'
return require('lunet.nn.dropout_class')('AlphaDropout', F.alpha_dropout)
