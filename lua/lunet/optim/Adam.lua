-- lunet.optim.Adam and AdamW (Kingma & Ba; Loshchilov & Hutter), as
-- torch.optim.Adam / AdamW: bias-corrected moments, optional amsgrad,
-- weight decay added to the gradient (Adam) or applied to the weights
-- (AdamW: p = p * (1 - lr * weight_decay)). One fused C kernel per param
-- (ln_adam_step_). State: step, exp_avg, exp_avg_sq (, max_exp_avg_sq).
local ffi = require 'ffi'
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'
local C = lunet.C

local function nonneg(v) return v >= 0 end

local function check(self, fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'eps', 'epsilon value', nonneg, '>= 0')
  num(fn, g, 'weight_decay', 'weight_decay value', nonneg, '>= 0')
  Optimizer.betas(fn, g)
end

local function update(self, group, p, g, st)
  local hp = self._hp
  if st.step == nil then
    st.step = 0
    st.exp_avg, st.exp_avg_sq = lunet.zeros_like(p), lunet.zeros_like(p)
  end
  if group.amsgrad and st.max_exp_avg_sq == nil then st.max_exp_avg_sq = lunet.zeros_like(p) end
  st.step = st.step + 1
  hp.lr, hp.beta1, hp.beta2, hp.eps = group.lr, group.betas[1], group.betas[2], group.eps
  hp.weight_decay, hp.step = group.weight_decay, st.step
  hp.amsgrad, hp.maximize = group.amsgrad and 1 or 0, group.maximize and 1 or 0
  local vmax = group.amsgrad and st.max_exp_avg_sq.p or nil
  if C.ln_adam_step_(p.p, g.p, st.exp_avg.p, st.exp_avg_sq.p, vmax, hp) ~= 0 then
    Optimizer.c_fail(self.name .. ':step')
  end
end

local function make(name, decoupled, weight_decay)
  local class = Optimizer.subclass {
    lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = weight_decay,
    amsgrad = false, maximize = false,
  }
  class.check, class.update = check, update
  class.positional = {'lr', 'betas', 'eps', 'weight_decay', 'amsgrad'}
  -- optim.Adam(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8,
  --   weight_decay = 0 (AdamW: 1e-2), amsgrad = false, maximize = false}),
  --   or PyTorch's positional Adam(params, lr, betas, eps, weight_decay, amsgrad)
  local function new(params, ...)
    local self = Optimizer.new(class, name, params, ...)
    self._hp = ffi.new('ln_adam_params')
    self._hp.decoupled = decoupled
    return self
  end
  return setmetatable(class, {__index = Optimizer, __call = function(_, ...) return new(...) end})
end

return {Adam = make('Adam', 0, 0), AdamW = make('AdamW', 1, 1e-2)}
