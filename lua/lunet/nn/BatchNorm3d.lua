-- nn.BatchNorm3d(num_features[, opts]): batch norm over (N, C, D, H, W), run
-- as BatchNorm2d on the view (N, C, D*H, W); see BatchNorm.lua
local BatchNorm = require 'lunet.nn.BatchNorm'
local is_tensor = require('lunet.tensor').is_tensor

local BatchNorm3d = BatchNorm:extend('nn.BatchNorm3d')
BatchNorm3d.__init = BatchNorm.__init

function BatchNorm3d:forward(x)
  if not is_tensor(x) then return BatchNorm.forward(self, x) end   -- (which names the problem)
  if x:dim() ~= 5 then
    require('lunet.options').raise(('nn.BatchNorm3d: expected a 5-d input (N, C, D, H, W), got %d-d'):format(x:dim()))
  end
  local s = x:size()
  return BatchNorm.forward(self, x:reshape(s[1], s[2], s[3] * s[4], s[5])):view(s)
end

return BatchNorm3d
