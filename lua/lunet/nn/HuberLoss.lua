-- nn.HuberLoss([{reduction = 'mean', delta = 1}]): 0.5 d^2 where |d| < delta,
-- else delta (|d| - 0.5 delta) (d = input - target)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local HuberLoss = Module:extend('nn.HuberLoss')

local OPTS = { reduction = 'string', delta = 'number' }

function HuberLoss:__init(opts)
  opts = options.check('nn.HuberLoss', opts, OPTS) or {}
  options.one_of('nn.HuberLoss', 'reduction', opts.reduction, options.REDUCTIONS)
  local delta = opts.delta or 1
  if not (delta > 0) then options.fail('nn.HuberLoss', 'delta must be > 0, got ' .. tostring(delta)) end
  self.opts = { reduction = opts.reduction or 'mean', delta = delta }
end
function HuberLoss:forward(x, target) return F.huber_loss(x, target, self.opts) end
function HuberLoss:extra_repr()
  local s = 'delta ' .. self.opts.delta
  if self.opts.reduction ~= 'mean' then s = s .. ", reduction '" .. self.opts.reduction .. "'" end
  return s
end

return HuberLoss
