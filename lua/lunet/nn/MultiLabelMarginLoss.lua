-- nn.MultiLabelMarginLoss([{reduction = 'mean'}]): for input (N, C) or (C) and
-- an integer target of its shape holding each sample's labels 1..C, ended by
-- the first 0 (torch's labels + 1: its -1 terminator is lunet's 0), the sum
-- over its labels j and the other classes i of max(0, 1 - x[j] + x[i]), / C
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local MultiLabelMarginLoss = Module:extend('nn.MultiLabelMarginLoss')
local NAME, L = 'nn.MultiLabelMarginLoss', F._internal.margin_more

function MultiLabelMarginLoss:__init(opts) self.opts = L.reduction_opts(NAME, opts) end

function MultiLabelMarginLoss:forward(x, target) return L.multilabel_margin_loss(NAME, x, target, self.opts) end

function MultiLabelMarginLoss:extra_repr()
  if self.opts.reduction ~= 'mean' then return "reduction '" .. self.opts.reduction .. "'" end
end

return MultiLabelMarginLoss
