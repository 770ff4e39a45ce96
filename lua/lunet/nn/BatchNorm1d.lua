-- nn.BatchNorm1d(num_features[, opts]): batch norm over (N, C) or (N, C, L); see BatchNorm.lua
local BatchNorm = require 'lunet.nn.BatchNorm'

local BatchNorm1d = BatchNorm:extend('nn.BatchNorm1d')
BatchNorm1d.__init = BatchNorm.__init

function BatchNorm1d:check_input(x)
  if x:dim() ~= 2 and x:dim() ~= 3 then
    require('lunet.options').raise(('nn.BatchNorm1d: expected a 2-d or 3-d input (N, C[, L]), got %d-d'):format(x:dim()))
  end
end

return BatchNorm1d
