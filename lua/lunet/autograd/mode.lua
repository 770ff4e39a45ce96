-- lunet.autograd.mode: grad mode, the one switch every recording op reads
-- (S.grad_enabled), and the state the autograd modules share: S is the public
-- lunet.autograd table itself (anomaly mode sets S.anomaly_hook on it).
-- One per process (kept in the registry): the Tensor metatype keeps the
-- methods of the first load, so a reload must find the same state.
local typename = require('lunet.core').typename   -- (type, or 'tensor')
local registry = debug.getregistry()
if registry.lunet_autograd_state then return registry.lunet_autograd_state end

local S = { grad_enabled = true }
registry.lunet_autograd_state = S

function S.is_grad_enabled() return S.grad_enabled end
function S.set_grad_enabled(on) local old = S.grad_enabled; S.grad_enabled = not not on; return old end

local function run_with(mode, fn, ...)
  local old = S.grad_enabled
  S.grad_enabled = mode
  local res = { pcall(fn, ...) }
  S.grad_enabled = old
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

-- lunet.no_grad(fn, ...): run fn with recording off, return its results
function S.no_grad(fn, ...)
  if type(fn) ~= 'function' then error('no_grad: expected a function, got ' .. typename(fn), 2) end
  return run_with(false, fn, ...)
end
function S.enable_grad(fn, ...)
  if type(fn) ~= 'function' then error('enable_grad: expected a function, got ' .. typename(fn), 2) end
  return run_with(true, fn, ...)
end

return S
