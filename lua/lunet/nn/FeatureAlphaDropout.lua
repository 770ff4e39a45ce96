-- nn.FeatureAlphaDropout([p = 0.5[, inplace = false]]) or nn.FeatureAlphaDropout{p, inplace}: AlphaDropout
-- of whole channels of an (N, C, ...) input (at least 2-d); identity in eval
local F = require 'lunet.nn.functional'
return require('lunet.nn.dropout_class')('FeatureAlphaDropout', F.feature_alpha_dropout)
