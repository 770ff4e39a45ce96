-- lunet.autograd.hooks: gradient hooks. t:register_hook(fn) and
-- t:register_post_accumulate_grad_hook(fn) (installed on the Tensor table),
-- and run(hooks, g), which the engine calls with a tensor's gradient.
local T = require 'lunet.tensor'
local typename = require('lunet.core').typename   -- (type, or 'tensor')
local G = require 'lunet.autograd.graph'
local record, is_tensor, same_shape = T.record, T.is_tensor, G.same_shape

local H = {}

-- a hook's replacement must be a gradient of the tensor: a tensor of g's
-- shape, dtype and device (anything else was silently used, or failed far
-- from the hook)
local function shape_str(t) return '{' .. table.concat(t:size(), ',') .. '}' end
local function hook_result(r, g)
  if not is_tensor(r) then
    error(('a gradient hook returned a %s; expected a tensor or nil'):format(typename(r)), 0)
  end
  if not same_shape(r, g) or r.p.dtype_id ~= g.p.dtype_id or r.p.device_id ~= g.p.device_id then
    error(('a gradient hook returned a %s %s tensor on %s; the gradient it replaces is %s %s on %s'):format(
      shape_str(r), r.dtype, r.device, shape_str(g), g.dtype, g.device), 0)
  end
  return r
end

function H.run(hooks, g)
  for i = 1, #hooks do
    local r = hooks[i](g)
    if r ~= nil then g = hook_result(r, g) end
  end
  return g
end

-- t:register_hook(fn): fn(grad) runs when t's gradient is computed (before
-- it is accumulated, for a leaf) and may return a replacement of the same
-- shape, dtype and device. Returns a handle with :remove().
-- A non-leaf's hooks go with its node once backward has run. A leaf's stay
-- in its record until removed, or until the tensor is collected: a hook that
-- captures its own tensor (or a module holding it) is a cycle the collector
-- frees.
-- The handle's remove (h.remove() or h:remove()) is made on first access:
-- creating a closure aborts the JIT trace of the caller, and DataParallel
-- registers a hook on every step without ever removing it.
local HookHandle = {}
function HookHandle.__index(h, k)
  if k ~= 'remove' then return nil end
  local list, fn = h.list, h.fn
  local function remove()
    for i = #list, 1, -1 do if list[i] == fn then table.remove(list, i) end end
  end
  rawset(h, 'remove', remove)
  return remove
end

local function add_hook(list_owner, key, fn)
  local list = list_owner[key]
  if not list then list = {}; list_owner[key] = list end
  list[#list + 1] = fn
  return setmetatable({ list = list, fn = fn }, HookHandle)
end

local function register_hook(self, fn)
  if type(fn) ~= 'function' then error('register_hook: expected a function', 2) end
  if self.p.grad_flag == 0 then error("register_hook: tensor does not require grad", 2) end
  local r = record(self, true)
  if r.grad_fn then return add_hook(r.grad_fn, 'hooks', fn) end
  return add_hook(r, 'hooks', fn)
end

-- t:register_post_accumulate_grad_hook(fn): for a leaf, fn(t) runs right
-- after t.grad has been updated (data parallelism starts a bucket's
-- all-reduce from here while backward goes on)
local function register_post_accumulate_grad_hook(self, fn)
  if type(fn) ~= 'function' then error('register_post_accumulate_grad_hook: expected a function', 2) end
  local r = record(self, true)
  if r.grad_fn then error('register_post_accumulate_grad_hook: only for leaf tensors', 2) end
  return add_hook(r, 'post_hooks', fn)
end

function H.install(Tensor)
  Tensor.register_hook = register_hook
  Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
end

return H
