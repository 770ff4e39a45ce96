-- lunet.optim.Adadelta (Zeiler), as torch.optim.Adadelta:
--   g = g (+ weight_decay * p);  square_avg = rho * square_avg + (1 - rho) * g^2
--   delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
--   acc_delta = rho * acc_delta + (1 - rho) * delta^2;  p = p - lr * delta
-- One fused C kernel per param (ln_adadelta_step_). State: step, square_avg, acc_delta.
local ffi = require 'ffi'
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'
local C = lunet.C

local Adadelta = Optimizer.subclass {
  lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false,
}

local function nonneg(v) return v >= 0 end
local function unit(v) return v >= 0 and v <= 1 end

function Adadelta:check(fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'rho', 'rho value', unit, 'in [0, 1]')
  num(fn, g, 'eps', 'epsilon value', nonneg, '>= 0')
  num(fn, g, 'weight_decay', 'weight_decay value', nonneg, '>= 0')
end

-- optim.Adadelta(params, {lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0,
--   maximize = false}), or PyTorch's positional Adadelta(params, lr, rho, eps, weight_decay)
Adadelta.positional = {'lr', 'rho', 'eps', 'weight_decay'}
local function new(params, ...)
  local self = Optimizer.new(Adadelta, 'Adadelta', params, ...)
  self._hp = ffi.new('ln_adadelta_params')
  return self
end

function Adadelta:update(group, p, g, st)
  local hp = self._hp
  if st.step == nil then
    st.step = 0
    st.square_avg, st.acc_delta = lunet.zeros_like(p), lunet.zeros_like(p)
  end
  st.step = st.step + 1
  hp.lr, hp.rho, hp.eps, hp.weight_decay = group.lr, group.rho, group.eps, group.weight_decay
  hp.maximize = group.maximize and 1 or 0
  if C.ln_adadelta_step_(p.p, g.p, st.square_avg.p, st.acc_delta.p, hp) ~= 0 then Optimizer.c_fail('Adadelta:step') end
end

return setmetatable(Adadelta, {__index = Optimizer, __call = function(_, ...) return new(...) end})
