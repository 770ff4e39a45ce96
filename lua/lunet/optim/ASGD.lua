-- lunet.optim.ASGD (averaged SGD, Polyak & Juditsky), as torch.optim.ASGD:
--   g = g (+ weight_decay * p);  p = p * (1 - lambd * eta) - eta * g
--   ax = p while mu == 1, else ax = ax + mu * (p - ax)
--   eta = lr / (1 + lambd * lr * step)^alpha;  mu = 1 / max(1, step - t0)
-- Composed from tensor ops under no_grad (three elementwise passes; not worth
-- a fused kernel). State: step, eta, mu (numbers) and ax, the averaged params
-- (what one evaluates with). eta and mu are rounded to float32, as PyTorch
-- 1.13 keeps them in default-dtype tensors, so float64 runs match it.
local ffi = require 'ffi'
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'

local ASGD = Optimizer.subclass {
  lr = 1e-2, lambd = 1e-4, alpha = 0.75, t0 = 1e6, weight_decay = 0, maximize = false,
}

local function nonneg(v) return v >= 0 end
local function any(v) return v > -math.huge and v < math.huge end

function ASGD:check(fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'weight_decay', 'weight_decay value', nonneg, '>= 0')
  num(fn, g, 'lambd', 'lambd value', any, 'a finite number')
  num(fn, g, 'alpha', 'alpha value', any, 'a finite number')
  num(fn, g, 't0', 't0 value', any, 'a finite number')
end

local f32 = ffi.new('float[1]')
local function float32(x) f32[0] = x; return tonumber(f32[0]) end

-- optim.ASGD(params, {lr = 1e-2, lambd = 1e-4, alpha = 0.75, t0 = 1e6,
--   weight_decay = 0, maximize = false}), or PyTorch's positional
--   ASGD(params, lr, lambd, alpha, t0, weight_decay)
ASGD.positional = {'lr', 'lambd', 'alpha', 't0', 'weight_decay'}
local function new(params, ...) return Optimizer.new(ASGD, 'ASGD', params, ...) end

function ASGD:update(group, p, g, st)
  if st.step == nil then
    st.step, st.eta, st.mu = 0, float32(group.lr), 1
    st.ax = lunet.zeros_like(p)
  end
  st.step = st.step + 1
  local step, eta, mu, lambd = st.step, st.eta, st.mu, group.lambd
  lunet.no_grad(function()
    if group.maximize then g = g:neg() end
    if group.weight_decay ~= 0 then g = g:add(p, group.weight_decay) end
    p:mul_(1 - lambd * eta)
    p:add_(g, -eta)
    if mu ~= 1 then st.ax:add_(p:sub(st.ax):mul(mu)) else st.ax:copy_(p) end
  end)
  st.eta = float32(group.lr / (1 + lambd * group.lr * step) ^ group.alpha)
  st.mu = float32(1 / math.max(1, step - group.t0))
end

return setmetatable(ASGD, {__index = Optimizer, __call = function(_, ...) return new(...) end})
