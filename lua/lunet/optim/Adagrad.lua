-- lunet.optim.Adagrad (Duchi et al.), as torch.optim.Adagrad:
--   g = g (+ weight_decay * p);  sum = sum + g^2
--   p = p - lr / (1 + (step - 1) * lr_decay) * g / (sqrt(sum) + eps)
-- One fused C kernel per param (ln_adagrad_step_). State: step, sum. As in
-- PyTorch 1.13 the state of every param is made by the constructor (sum
-- filled with its initial_accumulator_value), so state_dict() holds it
-- before the first step; params of a group added later get theirs at their
-- first step, from the group's initial_accumulator_value.
local ffi = require 'ffi'
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'
local C = lunet.C

local Adagrad = Optimizer.subclass {
  lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10,
  maximize = false,
}

local function nonneg(v) return v >= 0 end

function Adagrad:check(fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'lr_decay', 'lr_decay value', nonneg, '>= 0')
  num(fn, g, 'weight_decay', 'weight_decay value', nonneg, '>= 0')
  num(fn, g, 'initial_accumulator_value', 'initial_accumulator_value value', nonneg, '>= 0')
  num(fn, g, 'eps', 'epsilon value', nonneg, '>= 0')
end

local function init_state(st, p, value)
  st.step = 0
  st.sum = lunet.full_like(p, value)
end

-- optim.Adagrad(params, {lr = 1e-2, lr_decay = 0, weight_decay = 0,
--   initial_accumulator_value = 0, eps = 1e-10, maximize = false}), or
--   PyTorch's positional Adagrad(params, lr, lr_decay, weight_decay,
--   initial_accumulator_value, eps)
Adagrad.positional = {'lr', 'lr_decay', 'weight_decay', 'initial_accumulator_value', 'eps'}
local function new(params, ...)
  local self = Optimizer.new(Adagrad, 'Adagrad', params, ...)
  self._hp = ffi.new('ln_adagrad_params')
  -- (PyTorch fills every sum with the constructor's value, whatever a group says)
  local init = self.defaults.initial_accumulator_value
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local st = {}
      init_state(st, p, init)
      self.state[p] = st
    end
  end
  return self
end

function Adagrad:update(group, p, g, st)
  local hp = self._hp
  if st.step == nil then init_state(st, p, group.initial_accumulator_value) end
  st.step = st.step + 1
  hp.lr, hp.lr_decay, hp.eps, hp.weight_decay = group.lr, group.lr_decay, group.eps, group.weight_decay
  hp.step, hp.maximize = st.step, group.maximize and 1 or 0
  if C.ln_adagrad_step_(p.p, g.p, st.sum.p, hp) ~= 0 then Optimizer.c_fail('Adagrad:step') end
end

return setmetatable(Adagrad, {__index = Optimizer, __call = function(_, ...) return new(...) end})
