-- nn.L1Loss([{reduction = 'mean'}]): mean(|input - target|)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local L1Loss = Module:extend('nn.L1Loss')

local OPTS = { reduction = 'string' }

function L1Loss:__init(opts)
  opts = options.check('nn.L1Loss', opts, OPTS) or {}
  options.one_of('nn.L1Loss', 'reduction', opts.reduction, options.REDUCTIONS)
  self.opts = { reduction = opts.reduction or 'mean' }
end
function L1Loss:forward(x, target) return F.l1_loss(x, target, self.opts) end
function L1Loss:extra_repr()
  if self.opts.reduction ~= 'mean' then return "reduction '" .. self.opts.reduction .. "'" end
end

return L1Loss
