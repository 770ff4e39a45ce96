-- nn.KLDivLoss([{reduction = 'mean', log_target = false}]): input holds
-- log-probabilities, target probabilities (log-probabilities with
-- log_target); loss target (log(target) - input). reduction 'batchmean'
-- divides the sum by the batch size (dim 1): the KL divergence per sample;
-- 'mean' (PyTorch's default, kept) divides by every element.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local KLDivLoss = Module:extend('nn.KLDivLoss')

local OPTS = { reduction = 'string', log_target = 'boolean' }
local REDUCTIONS = { 'none', 'mean', 'sum', 'batchmean' }

function KLDivLoss:__init(opts)
  opts = options.check('nn.KLDivLoss', opts, OPTS) or {}
  options.one_of('nn.KLDivLoss', 'reduction', opts.reduction, REDUCTIONS)
  self.opts = { reduction = opts.reduction or 'mean', log_target = opts.log_target or false }
end
function KLDivLoss:forward(x, target) return F.kl_div(x, target, self.opts) end
function KLDivLoss:extra_repr()
  local s = {}
  if self.opts.reduction ~= 'mean' then s[#s + 1] = "reduction '" .. self.opts.reduction .. "'" end
  if self.opts.log_target then s[#s + 1] = 'log_target' end
  if #s > 0 then return table.concat(s, ', ') end
end

return KLDivLoss
