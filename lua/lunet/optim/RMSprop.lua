-- lunet.optim.RMSprop, as torch.optim.RMSprop:
--   g = g (+ weight_decay * p);  v = alpha * v + (1 - alpha) * g^2
--   centered: ga = alpha * ga + (1 - alpha) * g;  avg = sqrt(v - ga^2) + eps, else sqrt(v) + eps
--   momentum > 0: buf = momentum * buf + g / avg;  p = p - lr * buf,  else p = p - lr * g / avg
-- One fused C kernel per param (ln_rmsprop_step_). State: step, square_avg
-- (, momentum_buffer, grad_avg).
local ffi = require 'ffi'
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'
local C = lunet.C

local RMSprop = Optimizer.subclass {
  lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false,
  maximize = false,
}

local function nonneg(v) return v >= 0 end

function RMSprop:check(fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'eps', 'epsilon value', nonneg, '>= 0')
  num(fn, g, 'momentum', 'momentum value', nonneg, '>= 0')
  num(fn, g, 'weight_decay', 'weight_decay value', nonneg, '>= 0')
  num(fn, g, 'alpha', 'alpha value', nonneg, '>= 0')
end

-- optim.RMSprop(params, {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0,
--   momentum = 0, centered = false, maximize = false}), or PyTorch's positional
--   RMSprop(params, lr, alpha, eps, weight_decay, momentum, centered)
RMSprop.positional = {'lr', 'alpha', 'eps', 'weight_decay', 'momentum', 'centered'}
local function new(params, ...)
  local self = Optimizer.new(RMSprop, 'RMSprop', params, ...)
  self._hp = ffi.new('ln_rmsprop_params')
  return self
end

function RMSprop:update(group, p, g, st)
  local hp = self._hp
  if st.step == nil then
    st.step = 0
    st.square_avg = lunet.zeros_like(p)
  end
  if group.momentum > 0 and st.momentum_buffer == nil then st.momentum_buffer = lunet.zeros_like(p) end
  if group.centered and st.grad_avg == nil then st.grad_avg = lunet.zeros_like(p) end
  st.step = st.step + 1
  hp.lr, hp.alpha, hp.eps, hp.weight_decay = group.lr, group.alpha, group.eps, group.weight_decay
  hp.momentum, hp.centered, hp.maximize = group.momentum, group.centered and 1 or 0, group.maximize and 1 or 0
  local buf = group.momentum > 0 and st.momentum_buffer.p or nil
  local ga = group.centered and st.grad_avg.p or nil
  if C.ln_rmsprop_step_(p.p, g.p, st.square_avg.p, buf, ga, hp) ~= 0 then Optimizer.c_fail('RMSprop:step') end
end

return setmetatable(RMSprop, {__index = Optimizer, __call = function(_, ...) return new(...) end})
