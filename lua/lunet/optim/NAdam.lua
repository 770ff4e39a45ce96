-- lunet.optim.NAdam (Dozat, Adam with Nesterov momentum), as torch.optim.NAdam:
--   g = g (+ weight_decay * p);  exp_avg, exp_avg_sq as Adam's
--   mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)),  mu_product = mu_1 ... mu_t
--   denom = sqrt(exp_avg_sq / (1 - beta2^t)) + eps
--   p = p - lr * (1 - mu_t) / (1 - mu_product) * g / denom
--         - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * exp_avg / denom
-- One fused C kernel per param (ln_nadam_step_). State: step, mu_product (a
-- number rounded to float32 at each product, as PyTorch 1.13's float32
-- tensor), exp_avg, exp_avg_sq. PyTorch 1.13's NAdam has no maximize.
local ffi = require 'ffi'
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'
local C = lunet.C

local NAdam = Optimizer.subclass {
  lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3,
}

local function nonneg(v) return v >= 0 end

function NAdam:check(fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'eps', 'epsilon value', nonneg, '>= 0')
  Optimizer.betas(fn, g)
  num(fn, g, 'weight_decay', 'weight_decay value', nonneg, '>= 0')
  num(fn, g, 'momentum_decay', 'momentum_decay value', nonneg, '>= 0')
end

-- optim.NAdam(params, {lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8,
--   weight_decay = 0, momentum_decay = 4e-3}), or PyTorch's positional
--   NAdam(params, lr, betas, eps, weight_decay, momentum_decay)
NAdam.positional = {'lr', 'betas', 'eps', 'weight_decay', 'momentum_decay'}
local function new(params, ...)
  local self = Optimizer.new(NAdam, 'NAdam', params, ...)
  self._hp = ffi.new('ln_nadam_params')
  self._f32 = ffi.new('float[1]')
  return self
end

function NAdam:update(group, p, g, st)
  local hp, f32 = self._hp, self._f32
  if st.step == nil then
    st.step, st.mu_product = 0, 1
    st.exp_avg, st.exp_avg_sq = lunet.zeros_like(p), lunet.zeros_like(p)
  end
  st.step = st.step + 1
  local beta1 = group.betas[1]
  local mu = beta1 * (1 - 0.5 * 0.96 ^ (st.step * group.momentum_decay))
  -- mu_product *= mu in float32, as torch's float32 tensor (both factors
  -- float32: their product is exact in a double, then rounded once)
  f32[0] = mu
  f32[0] = st.mu_product * f32[0]
  st.mu_product = f32[0]
  hp.lr, hp.beta1, hp.beta2, hp.eps = group.lr, beta1, group.betas[2], group.eps
  hp.weight_decay, hp.momentum_decay = group.weight_decay, group.momentum_decay
  hp.mu_product, hp.step = st.mu_product, st.step
  if C.ln_nadam_step_(p.p, g.p, st.exp_avg.p, st.exp_avg_sq.p, hp) ~= 0 then Optimizer.c_fail('NAdam:step') end
end

return setmetatable(NAdam, {__index = Optimizer, __call = function(_, ...) return new(...) end})
