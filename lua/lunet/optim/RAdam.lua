-- lunet.optim.RAdam (Liu et al., rectified Adam), as torch.optim.RAdam:
--   g = g (+ weight_decay * p);  exp_avg, exp_avg_sq as Adam's
--   rho_inf = 2 / (1 - beta2) - 1,  rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
--   rho_t > 5: p = p - lr * exp_avg / (1 - beta1^t) * rect * sqrt(1 - beta2^t) / (sqrt(exp_avg_sq) + eps),
--     rect = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
--   else:      p = p - lr * exp_avg / (1 - beta1^t)
-- One fused C kernel per param (ln_radam_step_). State: step, exp_avg,
-- exp_avg_sq. PyTorch 1.13's RAdam has no maximize.
local ffi = require 'ffi'
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'
local C = lunet.C

local RAdam = Optimizer.subclass {
  lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0,
}

local function nonneg(v) return v >= 0 end

function RAdam:check(fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'eps', 'epsilon value', nonneg, '>= 0')
  Optimizer.betas(fn, g)
  num(fn, g, 'weight_decay', 'weight_decay value', nonneg, '>= 0')
end

-- optim.RAdam(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8,
--   weight_decay = 0}), or PyTorch's positional RAdam(params, lr, betas, eps, weight_decay)
RAdam.positional = {'lr', 'betas', 'eps', 'weight_decay'}
local function new(params, ...)
  local self = Optimizer.new(RAdam, 'RAdam', params, ...)
  self._hp = ffi.new('ln_radam_params')
  return self
end

function RAdam:update(group, p, g, st)
  local hp = self._hp
  if st.step == nil then
    st.step = 0
    st.exp_avg, st.exp_avg_sq = lunet.zeros_like(p), lunet.zeros_like(p)
  end
  st.step = st.step + 1
  hp.lr, hp.beta1, hp.beta2, hp.eps = group.lr, group.betas[1], group.betas[2], group.eps
  hp.weight_decay, hp.step = group.weight_decay, st.step
  if C.ln_radam_step_(p.p, g.p, st.exp_avg.p, st.exp_avg_sq.p, hp) ~= 0 then Optimizer.c_fail('RAdam:step') end
end

return setmetatable(RAdam, {__index = Optimizer, __call = function(_, ...) return new(...) end})
