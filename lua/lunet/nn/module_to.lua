-- nn.Module's moves between devices and dtypes: m:to(...), float(), double(),
-- half(), bfloat16(), type(dtype), cpu(k), cuda(k); share_memory() refused.
-- Each moves the tensors in place (the same Lua objects), so optimizers and
-- other holders of a parameter see the move. Installed by lunet.nn.Module.
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local autograd = require 'lunet.autograd'
local options = require 'lunet.options'
local raise = options.raise

return function(Module)

-- Replace t's contents by u's (another device or dtype) while keeping the
-- Lua object, so optimizers and other holders of t see the move.
local function swap_into(t, u)
  local old, new = t.p, u.p
  if old == new then return end
  new.grad_flag, old.grad_flag = old.grad_flag, 0
  t.p, u.p = new, old
end
Module._swap_into = swap_into

-- applies cast to every parameter (and its gradient) and buffer, in place
local function apply_cast(self, cast)
  local function move(t)
    local u = cast(t)
    if u ~= t then
      local g = t.grad
      swap_into(t, u)
      if g then t.grad = autograd.no_grad(move, g) end
    end
    return t
  end
  autograd.no_grad(function()
    for _, p in ipairs(self:parameters()) do move(p) end
    for _, b in ipairs(self:buffers()) do move(b) end
  end)
  return self
end

-- m:to('cpu:1'), m:to('float64'), m:to{device=..., dtype=...}, m:to(tensor)
-- (its device and dtype, as torch's): moves parameters (floating ones for
-- dtype), their gradients and buffers, in place
local FLOAT_DTYPES = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
function Module:to(what, more)
  local opts = what
  if type(what) == 'string' then
    if core.dtype_ids[what] then opts = { dtype = what }
    else opts = { device = what, dtype = more } end
  elseif T.is_tensor(what) then
    opts = { device = what.device, dtype = what.dtype }
  elseif not is_table(what) then
    error('to: expected a device, a dtype or {device=, dtype=}, got ' .. typename(what), 2)
  else
    options.check('to', what, { device = true, dtype = true })
  end
  -- (an integer dtype left the float parameters as they were, silently)
  local dt = opts.dtype and core.dtype_ids[opts.dtype]
  if dt and not FLOAT_DTYPES[core.dtypes[dt]] then
    raise(('to: a module moves to a floating-point dtype (float32, float64, float16, bfloat16), got %s'):format(opts.dtype))
  end
  return apply_cast(self, function(t)
    local u = t
    if opts.device then u = u:to({ device = opts.device }) end
    if opts.dtype and t:is_floating_point() then u = u:to({ dtype = opts.dtype }) end
    return u
  end)
end
function Module:float() return self:to('float32') end
function Module:double() return self:to('float64') end
function Module:half() return self:to('float16') end
function Module:bfloat16() return self:to('bfloat16') end

-- type(dtype): casts EVERY parameter and buffer, integer ones too (torch's
-- Module.type), unlike to(dtype), which leaves those as they are
function Module:type(dtype)
  local dt = type(dtype) == 'string' and core.dtype_ids[dtype]
  if not dt then raise('type: expected a dtype name (float32, float64, float16, bfloat16), got ' .. tostring(dtype)) end
  if not FLOAT_DTYPES[core.dtypes[dt]] then
    raise(('type: a module casts to a floating-point dtype (its parameters require grad), got %s'):format(dtype))
  end
  return apply_cast(self, function(t) return t:to({ dtype = dtype }) end)
end

local function device_index(fn, k)
  if k ~= nil and (type(k) ~= 'number' or k % 1 ~= 0) then raise(fn .. ': device index must be an integer, got ' .. tostring(k)) end
  return k or 0
end
function Module:cpu(k) return self:to('cpu:' .. device_index('cpu', k)) end
function Module:cuda(k) return self:to('cuda:' .. device_index('cuda', k)) end

-- (torch moves storages to shared memory for torch.multiprocessing; lunet has
-- no processes sharing a module, so doing nothing would hide that)
function Module:share_memory()
  raise('share_memory: not supported: lunet has no torch.multiprocessing; train in parallel with ' ..
    'lunet.parallel.DataParallel or DistributedDataParallel instead')
end

end
