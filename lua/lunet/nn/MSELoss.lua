-- nn.MSELoss([{reduction = 'mean'}]): mean((input - target)^2)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local MSELoss = Module:extend('nn.MSELoss')

local OPTS = { reduction = 'string' }

function MSELoss:__init(opts)
  opts = options.check('nn.MSELoss', opts, OPTS)
  options.one_of('nn.MSELoss', 'reduction', opts and opts.reduction, options.REDUCTIONS)
  self.opts = { reduction = opts and opts.reduction or 'mean' } end
function MSELoss:forward(x, target) return F.mse_loss(x, target, self.opts) end
function MSELoss:extra_repr()
  if self.opts.reduction ~= 'mean' then return "reduction '" .. self.opts.reduction .. "'" end
end

return MSELoss
