-- nn.LazyLinear(out_features[, bias][, {bias = true, dtype, device}]):
-- nn.Linear whose in_features the first forward reads off its input's last
-- dim (torch 1.13's LazyLinear); then it is an nn.Linear. See lazy_class.lua.
local options = require 'lunet.options'

return require('lunet.nn.lazy_class')({
  name = 'nn.LazyLinear', regular = require 'lunet.nn.Linear', field = 'in_features',
  dims = { 1, 2, 3, 4, 5, 6, 7, 8 }, channel = -1, expected = 'an at least 1-d', keys = { 'weight' },
  probe = function(args)
    if type(args[1]) ~= 'number' then options.fail('nn.LazyLinear', 'expected (out_features[, bias][, opts])') end
    return 1
  end,
  from_tensor = function(_, _, t) return t:dim() == 2 and t:size(2) end,
})
