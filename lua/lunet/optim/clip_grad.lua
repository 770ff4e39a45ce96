-- lunet.optim.clip_grad_norm(params, max_norm, norm_type = 2): scales the
-- grads of params in place so that their joint norm is at most max_norm, as
-- torch.nn.utils.clip_grad_norm_, and returns the total norm (a number, taken
-- before clipping). norm_type is a positive number or math.huge (max |g|).
-- Per-grad sums of |g|^p come from a C kernel (ln_norm_pow_sum, float64
-- accumulation in a fixed order); the scaling is an in-place multiply.
local lunet = require 'lunet'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local T = require 'lunet.tensor'
local Optimizer = require 'lunet.optim.Optimizer'
local options = require 'lunet.options'
local C = lunet.C

-- clip_grad_norm(params, max_norm[, norm_type][, {norm_type, error_if_nonfinite}]),
-- or PyTorch's positional (params, max_norm, norm_type, error_if_nonfinite)
local OPTS = {norm_type = 'number', error_if_nonfinite = 'boolean'}
local POSITIONAL = {'norm_type', 'error_if_nonfinite'}

local function clip_grad_norm(params, max_norm, ...)
  local fn = 'clip_grad_norm'
  local opts = options.check(fn, options.positional(fn, POSITIONAL, ...), OPTS)
  local norm_type = opts and opts.norm_type
  if lunet.is_tensor(params) then params = {params} end
  if not is_table(params) then Optimizer.fail(fn, 'params must be a tensor or a list of tensors, got ' .. typename(params)) end
  -- (a negative max_norm scaled every gradient by a negative factor: the step went uphill)
  if type(max_norm) ~= 'number' or not (max_norm >= 0) then
    Optimizer.fail(fn, 'max_norm must be a number >= 0, got ' .. tostring(max_norm))
  end
  norm_type = norm_type or 2
  if type(norm_type) ~= 'number' or not (norm_type > 0) then
    Optimizer.fail(fn, ('invalid norm_type %s (expected > 0 or math.huge)'):format(tostring(norm_type)))
  end
  local inf = norm_type == math.huge
  local grads, total = {}, 0
  for i, p in ipairs(params) do
    if not lunet.is_tensor(p) then Optimizer.fail(fn, ('param %d is a %s, expected a tensor'):format(i, typename(p))) end
    local g = p.grad
    if g ~= nil then
      grads[#grads + 1] = g
      local s = C.ln_norm_pow_sum(g.p, norm_type)
      if s == nil then Optimizer.c_fail(fn) end
      local v = T.wrap(s):item()
      if inf then if v > total or v ~= v then total = v end else total = total + v end
    end
  end
  if #grads == 0 then return 0 end
  if not inf then total = total ^ (1 / norm_type) end
  if opts and opts.error_if_nonfinite and (total ~= total or total == math.huge) then
    Optimizer.fail(fn, ('the total norm of order %s of the gradients is non-finite'):format(tostring(norm_type)))
  end
  local coef = max_norm / (total + 1e-6)
  if coef < 1 then
    for _, g in ipairs(grads) do g:mul_(coef) end
  end
  return total
end

return clip_grad_norm
