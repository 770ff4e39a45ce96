-- lunet.anomaly: find the op that first produced NaN or Inf (PyTorch's
-- torch.autograd.detect_anomaly).
--   lunet.detect_anomaly(function() local loss = model(x):sum(); loss:backward() end)
--   lunet.set_detect_anomaly(true) ... lunet.set_detect_anomaly(false)
-- While on, every op recorded by autograd (forward) and every backward
-- function checks its floating-point result; the first NaN/Inf raises an
-- error naming the op, the direction, and how many elements are bad, e.g.
--   detect_anomaly: forward of log produced NaN (1 of 4 elements, shape {4})
--   backward of sqrt: detect_anomaly: the gradient for input 1 has Inf (...)
-- Only ops on tensors that require grad are recorded, hence checked. The
-- checks cost a reduction and a sync per op: a debugging mode.
local A = require 'lunet.autograd'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local T = require 'lunet.tensor'
local raise = require('lunet.options').raise

local M = {}

-- nil when t is finite, else a description like "NaN (2 of 6 elements, shape {2,3})"
local function bad(t)
  if not T.is_tensor(t) or not t:is_floating_point() or t:numel() == 0 then return nil end
  local old = A.set_grad_enabled(false)
  local ok, nan, inf = pcall(function()
    return t:isnan():sum():item(), t:isinf():sum():item()
  end)
  A.set_grad_enabled(old)
  if not ok or (nan == 0 and inf == 0) then return nil end
  local kind = nan > 0 and inf > 0 and 'NaN and Inf' or nan > 0 and 'NaN' or 'Inf'
  return ('%s (%d of %d elements, shape {%s})'):format(kind, nan + inf, t:numel(), table.concat(t:size(), ','))
end
M.nonfinite = bad

local function hook(dir, node, a, b, c)
  local name = node and node.name or '?'
  if dir == 'forward' then
    local what = bad(a)
    -- (at the user's line that ran the op: where to look)
    if what then raise(('detect_anomaly: forward of %s produced %s'):format(name, what)) end
    return
  end
  local grads = node.ni and is_table(a) and a or { a, b, c }
  for i = 1, node.ni or 3 do
    local what = bad(grads[i])
    if what then
      raise(('detect_anomaly: the gradient for input %d has %s'):format(i, what))
    end
  end
end

function M.is_enabled() return A.anomaly_hook ~= nil end

-- set_detect_anomaly(on) -> the previous setting
function M.set_detect_anomaly(on)
  if type(on) ~= 'boolean' then raise('set_detect_anomaly: expected true or false, got ' .. typename(on)) end
  local old = A.anomaly_hook ~= nil
  A.anomaly_hook = on and hook or nil
  return old
end

-- detect_anomaly(fn, ...) -> fn's results; the mode is restored after, on error too
function M.detect_anomaly(fn, ...)
  if type(fn) ~= 'function' then error('detect_anomaly: expected a function, got ' .. typename(fn), 2) end
  local old = M.set_detect_anomaly(true)
  local res = { pcall(fn, ...) }
  M.set_detect_anomaly(old)
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

return M
