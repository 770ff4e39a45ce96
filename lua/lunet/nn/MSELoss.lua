-- nn.MSELoss([{reduction = 'mean'}]): mean((input - target)^2)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local MSELoss = Module:extend('nn.MSELoss')

function MSELoss:__init(opts)
  if opts ~= nil and type(opts) ~= 'table' then error('nn.MSELoss: options must be a table, got ' .. type(opts), 3) end
  self.opts = { reduction = opts and opts.reduction or 'mean' } end
function MSELoss:forward(x, target) return F.mse_loss(x, target, self.opts) end
function MSELoss:extra_repr()
  if self.opts.reduction ~= 'mean' then return "reduction '" .. self.opts.reduction .. "'" end
end

return MSELoss
