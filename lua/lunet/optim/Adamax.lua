-- lunet.optim.Adamax (Kingma & Ba, the infinity-norm Adam), as torch.optim.Adamax:
--   g = g (+ weight_decay * p);  exp_avg = beta1 * exp_avg + (1 - beta1) * g
--   exp_inf = max(beta2 * exp_inf, |g| + eps)
--   p = p - lr / (1 - beta1^step) * exp_avg / exp_inf
-- One fused C kernel per param (ln_adamax_step_). State: step, exp_avg, exp_inf.
local ffi = require 'ffi'
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'
local C = lunet.C

local Adamax = Optimizer.subclass {
  lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, maximize = false,
}

local function nonneg(v) return v >= 0 end

function Adamax:check(fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'eps', 'epsilon value', nonneg, '>= 0')
  Optimizer.betas(fn, g)
  num(fn, g, 'weight_decay', 'weight_decay value', nonneg, '>= 0')
end

-- optim.Adamax(params, {lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8,
--   weight_decay = 0, maximize = false}), or PyTorch's positional
--   Adamax(params, lr, betas, eps, weight_decay)
Adamax.positional = {'lr', 'betas', 'eps', 'weight_decay'}
local function new(params, ...)
  local self = Optimizer.new(Adamax, 'Adamax', params, ...)
  self._hp = ffi.new('ln_adamax_params')
  return self
end

function Adamax:update(group, p, g, st)
  local hp = self._hp
  if st.step == nil then
    st.step = 0
    st.exp_avg, st.exp_inf = lunet.zeros_like(p), lunet.zeros_like(p)
  end
  st.step = st.step + 1
  hp.lr, hp.beta1, hp.beta2, hp.eps = group.lr, group.betas[1], group.betas[2], group.eps
  hp.weight_decay, hp.step, hp.maximize = group.weight_decay, st.step, group.maximize and 1 or 0
  if C.ln_adamax_step_(p.p, g.p, st.exp_avg.p, st.exp_inf.p, hp) ~= 0 then Optimizer.c_fail('Adamax:step') end
end

return setmetatable(Adamax, {__index = Optimizer, __call = function(_, ...) return new(...) end})
