-- lunet.optim.clip_grad_value(params, clip_value): clamps the grads of params
-- in place to [-clip_value, clip_value], as torch.nn.utils.clip_grad_value_
-- (params without a grad are skipped; returns nothing). A negative or NaN
-- clip_value is refused: torch's clamp(min = -c, max = c) with c < 0 set every
-- gradient to c, a step uphill (as clip_grad_norm refuses a negative max_norm).
local lunet = require 'lunet'
local core = require 'lunet.core'
local Optimizer = require 'lunet.optim.Optimizer'

local function clip_grad_value(params, clip_value, ...)
  local fn = 'clip_grad_value'
  if select('#', ...) > 0 then Optimizer.fail(fn, 'takes (params, clip_value), got more arguments') end
  if lunet.is_tensor(params) then params = { params } end
  if not core.is_table(params) then
    Optimizer.fail(fn, 'params must be a tensor or a list of tensors, got ' .. core.typename(params))
  end
  if type(clip_value) ~= 'number' or not (clip_value >= 0) then
    Optimizer.fail(fn, 'clip_value must be a number >= 0, got ' .. tostring(clip_value))
  end
  for i, p in ipairs(params) do
    if not lunet.is_tensor(p) then Optimizer.fail(fn, ('param %d is a %s, expected a tensor'):format(i, core.typename(p))) end
  end
  -- (on the grads' data, as torch's p.grad.data.clamp_: nothing recorded)
  lunet.no_grad(function()
    for _, p in ipairs(params) do
      local g = p.grad
      if g ~= nil then g:clamp_(-clip_value, clip_value) end
    end
  end)
end

return clip_grad_value
