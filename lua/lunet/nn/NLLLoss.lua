-- nn.NLLLoss([{weight, reduction = 'mean', ignore_index = -100}]):
-- loss(logp (N, C), target (N) class ids 1..C)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local NLLLoss = Module:extend('nn.NLLLoss')

local OPTS = { weight = 'tensor', reduction = 'string', ignore_index = 'number' }

function NLLLoss:__init(opts)
  opts = options.check(self.__name, opts, OPTS) or {}   -- (nn.NLLLoss2d's too)
  options.one_of(self.__name, 'reduction', opts.reduction, options.REDUCTIONS)
  self.opts = { weight = opts.weight, reduction = opts.reduction or 'mean', ignore_index = opts.ignore_index or -100 }
  if opts.weight then self:register_buffer('weight', opts.weight) end
end

function NLLLoss:forward(x, target)
  self.opts.weight = self.weight
  return F.nll_loss(x, target, self.opts)
end

function NLLLoss:extra_repr()
  if self.opts.reduction ~= 'mean' then return "reduction '" .. self.opts.reduction .. "'" end
end

return NLLLoss
