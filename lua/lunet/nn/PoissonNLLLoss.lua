-- nn.PoissonNLLLoss([{log_input = true, full = false, eps = 1e-8, reduction = 'mean'}]):
-- the negative log-likelihood of target ~ Poisson(rate): exp(input) -
-- target input when the input is the log-rate (log_input), else input -
-- target log(input + eps); full adds Stirling's approximation of log(target!)
-- where target > 1
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local PoissonNLLLoss = Module:extend('nn.PoissonNLLLoss')
local NAME, L = 'nn.PoissonNLLLoss', F._internal.more_loss

function PoissonNLLLoss:__init(opts) self.opts = L.poisson_opts(NAME, opts) end

function PoissonNLLLoss:forward(x, target) return L.poisson_nll_loss(NAME, x, target, self.opts) end

function PoissonNLLLoss:extra_repr()
  local o, s = self.opts, {}
  if not o.log_input then s[#s + 1] = 'log_input false' end
  if o.full then s[#s + 1] = 'full' end
  if o.eps ~= 1e-8 then s[#s + 1] = 'eps ' .. o.eps end
  if o.reduction ~= 'mean' then s[#s + 1] = "reduction '" .. o.reduction .. "'" end
  if #s > 0 then return table.concat(s, ', ') end
end

return PoissonNLLLoss
