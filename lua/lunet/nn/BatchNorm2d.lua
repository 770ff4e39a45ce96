-- nn.BatchNorm2d(num_features[, opts]): batch norm over (N, C, H, W); see BatchNorm.lua
local BatchNorm = require 'lunet.nn.BatchNorm'

local BatchNorm2d = BatchNorm:extend('nn.BatchNorm2d')
BatchNorm2d.__init = BatchNorm.__init

function BatchNorm2d:check_input(x)
  if x:dim() ~= 4 then error(('nn.BatchNorm2d: expected a 4-d input (N, C, H, W), got %d-d'):format(x:dim()), 4) end
end

return BatchNorm2d
