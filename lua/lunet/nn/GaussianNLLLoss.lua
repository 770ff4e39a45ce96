-- nn.GaussianNLLLoss([{full = false, eps = 1e-6, reduction = 'mean'}]):
-- forward(input, target, var): the negative log-likelihood of target ~
-- N(input, var): (log(var) + (input - target)^2 / var) / 2, var clamped to
-- >= eps (its gradient left as it is); var has the input's shape, or one
-- value per sample (the input's shape without the last dim, or with it 1)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local GaussianNLLLoss = Module:extend('nn.GaussianNLLLoss')
local NAME, L = 'nn.GaussianNLLLoss', F._internal.more_loss

function GaussianNLLLoss:__init(opts) self.opts = L.gaussian_opts(NAME, opts) end

function GaussianNLLLoss:forward(x, target, var) return L.gaussian_nll_loss(NAME, x, target, var, self.opts) end

function GaussianNLLLoss:extra_repr()
  local o, s = self.opts, {}
  if o.full then s[#s + 1] = 'full' end
  if o.eps ~= 1e-6 then s[#s + 1] = 'eps ' .. o.eps end
  if o.reduction ~= 'mean' then s[#s + 1] = "reduction '" .. o.reduction .. "'" end
  if #s > 0 then return table.concat(s, ', ') end
end

return GaussianNLLLoss
