-- nn.SoftMarginLoss([{reduction = 'mean'}]): log(1 + exp(-target input)),
-- target 1 or -1 (two-class logistic loss)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local SoftMarginLoss = Module:extend('nn.SoftMarginLoss')
local NAME, L = 'nn.SoftMarginLoss', F._internal.more_loss

function SoftMarginLoss:__init(opts) self.opts = L.soft_margin_opts(NAME, opts) end

function SoftMarginLoss:forward(x, target) return L.soft_margin_loss(NAME, x, target, self.opts) end

function SoftMarginLoss:extra_repr()
  if self.opts.reduction ~= 'mean' then return "reduction '" .. self.opts.reduction .. "'" end
end

return SoftMarginLoss
