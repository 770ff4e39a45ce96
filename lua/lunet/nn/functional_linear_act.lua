-- lunet.nn.functional's linear (one autograd node for 2-d input) and the
-- activations relu, sigmoid, tanh, leaky_relu, elu, gelu (tensor ops).
-- Installed into F by lunet.nn.functional, which hands over its helpers.
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local C, typename = core.C, core.typename
local wrap = T.wrap
local recorder = A.recorder
local raise = options.raise

return function(F, h)
  local need = h.need

  -- x (N, in) @ w (out, in)^T + b (out) -> (N, out) as one autograd node
  -- (formulas.nn's linear)
  local record_linear = recorder('linear')
  local function linear2d(x, w, b)
    local wt = C.ln_transpose(w.p, 0, 1)
    local r = wt ~= nil and (b and C.ln_addmm(b.p, x.p, wt, 1, 1) or C.ln_matmul(x.p, wt)) or nil
    C.ln_tensor_free(wt)
    if r == nil then raise('linear: ' .. core.last_error()) end
    local y = wrap(r)
    record_linear(y, x, w, b)
    return y
  end

  function F.linear(x, w, b)
    need('linear', x, 'input'); need('linear', w, 'weight', 2)
    if x.p.ndim >= 1 and x.p.shape[x.p.ndim - 1] ~= w.p.shape[1] then
      raise(('linear: input has %d features, weight expects %d'):format(tonumber(x.p.shape[x.p.ndim - 1]),
        tonumber(w.p.shape[1])))
    end
    if b ~= nil then
      need('linear', b, 'bias', 1)
      if b.p.shape[0] ~= w.p.shape[0] then
        raise(('linear: bias has %d elements, weight has %d outputs'):format(tonumber(b.p.shape[0]),
          tonumber(w.p.shape[0])))
      end
    end
    if x.p.ndim == 2 then return linear2d(x, w, b) end
    local y = x:matmul(w:t())
    if b then y = y + b end
    return y
  end

  function F.relu(x) return need('relu', x, 'input'):relu() end
  function F.sigmoid(x) return need('sigmoid', x, 'input'):sigmoid() end
  function F.tanh(x) return need('tanh', x, 'input'):tanh() end

  function F.leaky_relu(x, slope)
    need('leaky_relu', x, 'input')
    slope = slope or 0.01
    if type(slope) ~= 'number' then raise('leaky_relu: negative_slope must be a number, got ' .. typename(slope)) end
    return x:where(x:gt(0), x * slope)
  end

  function F.elu(x, alpha)
    need('elu', x, 'input')
    alpha = alpha or 1
    if type(alpha) ~= 'number' then raise('elu: alpha must be a number, got ' .. typename(alpha)) end
    return x:where(x:gt(0), x:clamp(nil, 0):expm1() * alpha)
  end

  function F.gelu(x, approximate)
    need('gelu', x, 'input')
    if approximate == 'tanh' then
      local inner = (x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)
      return x * 0.5 * (inner:tanh() + 1)
    end
    return x * 0.5 * ((x * (1 / math.sqrt(2))):erf() + 1)
  end
end
