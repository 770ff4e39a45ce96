-- lunet.autograd.leaves: detach, detach_, requires_grad_, is_leaf, retain_grad.
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local C = core.C
local wrap, record = T.wrap, T.record

local L = {}

function L.install(Tensor)
  function Tensor.detach(self) return wrap(C.ln_alias(T.need_tensor('detach', self, 'self').p)) end
  function Tensor.detach_(self)
    T.need_tensor('detach_', self, 'self').p.grad_flag = 0
    local r = record(self)
    if r then r.grad_fn = nil end
    return self
  end
  function Tensor.requires_grad_(self, on)
    if on == nil then on = true end
    local r = record(self)
    if r and r.grad_fn and not on then
      error('requires_grad_: cannot turn off requires_grad of a non-leaf tensor; use detach()', 2)
    end
    T.setters.requires_grad(self, on)
    return self
  end
  function Tensor.is_leaf(self)
    local r = record(self)
    return not (r and r.grad_fn)
  end
  -- (the node holds self weakly: self's record holds the node, and a strong
  -- reference back would keep both alive for good)
  local weak_v = { __mode = 'v' }
  function Tensor.retain_grad(self)
    local r = record(self)
    if r and r.grad_fn then r.grad_fn.retain = setmetatable({ self }, weak_v) end
    return self
  end
end

return L
