-- lunet.optim.Rprop (Riedmiller & Braun), as torch.optim.Rprop:
--   s = sign(g * prev);  step_size *= (s > 0: etaplus, s < 0: etaminus, else 1),
--   clamped to step_sizes;  g = 0 where s < 0;  p = p - sign(g) * step_size;  prev = g
-- Composed from tensor ops under no_grad (a handful of elementwise passes; Rprop
-- is for small full-batch problems, where a fused kernel would not pay).
-- State: step, prev, step_size (filled with the group's lr at the first step).
local lunet = require 'lunet'
local Optimizer = require 'lunet.optim.Optimizer'
local is_table = require('lunet.core').is_table

local Rprop = Optimizer.subclass {
  lr = 1e-2, etas = {0.5, 1.2}, step_sizes = {1e-6, 50}, maximize = false,
}

local function nonneg(v) return v >= 0 end

local function pair(fn, g, key, what)
  local v = g[key]
  if not is_table(v) or type(v[1]) ~= 'number' or type(v[2]) ~= 'number' or v[1] ~= v[1] or v[2] ~= v[2] then
    Optimizer.fail(fn, ('%s must be a table of two numbers {%s}'):format(key, what))
  end
  return v
end

function Rprop:check(fn, g)
  Optimizer.number(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  local e = pair(fn, g, 'etas', 'etaminus, etaplus')
  if not (0 < e[1] and e[1] < 1 and 1 < e[2]) then
    Optimizer.fail(fn, ('invalid eta values: %s, %s (expected 0 < etaminus < 1 < etaplus)'):format(
      tostring(e[1]), tostring(e[2])))
  end
  local s = pair(fn, g, 'step_sizes', 'min, max')
  if not (s[1] >= 0 and s[1] <= s[2]) then
    Optimizer.fail(fn, ('invalid step_sizes: %s, %s (expected 0 <= min <= max)'):format(tostring(s[1]), tostring(s[2])))
  end
end

-- optim.Rprop(params, {lr = 1e-2, etas = {0.5, 1.2}, step_sizes = {1e-6, 50},
--   maximize = false}), or PyTorch's positional Rprop(params, lr, etas, step_sizes)
Rprop.positional = {'lr', 'etas', 'step_sizes'}
local function new(params, ...) return Optimizer.new(Rprop, 'Rprop', params, ...) end

function Rprop:update(group, p, g, st)
  if st.step == nil then
    st.step = 0
    st.prev = lunet.zeros_like(p)
    st.step_size = lunet.full_like(p, group.lr)
  end
  st.step = st.step + 1
  local etaminus, etaplus = group.etas[1], group.etas[2]
  lunet.no_grad(function()
    if group.maximize then g = g:neg() end
    local s = g:mul(st.prev):sign()
    local down = s:lt(0)
    -- (the factor in p's dtype, as torch's sign tensor it overwrites)
    local factor = lunet.ones_like(p):masked_fill_(s:gt(0), etaplus):masked_fill_(down, etaminus)
    st.step_size:mul_(factor):clamp_(group.step_sizes[1], group.step_sizes[2])
    local gz = g:masked_fill(down, 0)   -- (after a sign change: no move now, no sign next time)
    p:sub_(gz:sign():mul_(st.step_size))
    st.prev:copy_(gz)
  end)
end

return setmetatable(Rprop, {__index = Optimizer, __call = function(_, ...) return new(...) end})
