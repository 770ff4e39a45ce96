-- lunet.optim.SGD: stochastic gradient descent with momentum, dampening,
-- Nesterov momentum, weight decay and maximize, as torch.optim.SGD:
--   d = g (+ weight_decay * p);  buf = d on the first step, else
--   buf = momentum * buf + (1 - dampening) * d;  d = nesterov and d + momentum * buf or buf
--   p = p - lr * d
-- One fused C kernel per param (ln_sgd_step_). State: momentum_buffer.
local ffi = require 'ffi'
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'
local C = lunet.C

local SGD = Optimizer.subclass {
  momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false,
}

local function nonneg(v) return v >= 0 end
local function any() return true end

function SGD:check(fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'momentum', 'momentum', nonneg, '>= 0')
  num(fn, g, 'dampening', 'dampening', any, 'a number')
  num(fn, g, 'weight_decay', 'weight_decay', nonneg, '>= 0')
  if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
    Optimizer.fail(fn, 'nesterov momentum requires a momentum and zero dampening')
  end
end

-- optim.SGD(params, {lr = required, momentum = 0, dampening = 0,
--   weight_decay = 0, nesterov = false, maximize = false})
--   or PyTorch's positional SGD(params, lr, momentum, dampening, weight_decay, nesterov)
SGD.positional = {'lr', 'momentum', 'dampening', 'weight_decay', 'nesterov'}
SGD.lr_required = true
local function new(params, ...)
  local self = Optimizer.new(SGD, 'SGD', params, ...)
  self._hp = ffi.new('ln_sgd_params')
  return self
end

function SGD:update(group, p, g, st)
  local hp, buf = self._hp, nil
  hp.lr, hp.momentum, hp.dampening = group.lr, group.momentum, group.dampening
  hp.weight_decay = group.weight_decay
  hp.nesterov, hp.maximize, hp.init_buf = group.nesterov and 1 or 0, group.maximize and 1 or 0, 0
  if group.momentum ~= 0 then
    buf = st.momentum_buffer
    if buf == nil then
      buf = lunet.empty_like(p)
      st.momentum_buffer = buf
      hp.init_buf = 1
    end
  end
  if C.ln_sgd_step_(p.p, g.p, buf and buf.p or nil, hp) ~= 0 then Optimizer.c_fail('SGD:step') end
end

return setmetatable(SGD, {__index = Optimizer, __call = function(_, ...) return new(...) end})
