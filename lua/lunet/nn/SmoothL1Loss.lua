-- nn.SmoothL1Loss([{reduction = 'mean', beta = 1}]): 0.5 d^2 / beta where
-- |d| < beta, else |d| - 0.5 beta (d = input - target); beta = 0 is L1
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local SmoothL1Loss = Module:extend('nn.SmoothL1Loss')

local OPTS = { reduction = 'string', beta = 'number' }

function SmoothL1Loss:__init(opts)
  opts = options.check('nn.SmoothL1Loss', opts, OPTS) or {}
  options.one_of('nn.SmoothL1Loss', 'reduction', opts.reduction, options.REDUCTIONS)
  local beta = opts.beta or 1
  if not (beta >= 0) then options.fail('nn.SmoothL1Loss', 'beta must be >= 0, got ' .. tostring(beta)) end
  self.opts = { reduction = opts.reduction or 'mean', beta = beta }
end
function SmoothL1Loss:forward(x, target) return F.smooth_l1_loss(x, target, self.opts) end
function SmoothL1Loss:extra_repr()
  local s = 'beta ' .. self.opts.beta
  if self.opts.reduction ~= 'mean' then s = s .. ", reduction '" .. self.opts.reduction .. "'" end
  return s
end

return SmoothL1Loss
