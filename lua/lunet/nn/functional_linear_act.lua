-- lunet.nn.functional's linear (one autograd node for 2-d input) and the
-- activations relu, sigmoid, tanh, leaky_relu, elu, gelu (kernels and tensor ops), and
-- relu, leaky_relu, elu in place (inplace = true, relu_, leaky_relu_, elu_).
-- Installed into F by lunet.nn.functional, which hands over its helpers.
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local C, typename = core.C, core.typename
local wrap = T.wrap
local recorder, records = A.recorder, A.records
local raise = options.raise

return function(F, h)
  local need, in_place = h.need, h.in_place

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
    if x.p.ndim > 2 then
      -- the leading dims folded into rows (as torch's matmul folds them): one
      -- GEMM each way; x:matmul(w:t()) broadcast w over them, and its weight
      -- gradient was a batched matmul summed back (4x slower in ConvNeXt)
      local s = x:size()
      local rows = 1
      for i = 1, #s - 1 do rows = rows * s[i] end
      local y = linear2d(x:reshape(rows, s[#s]), w, b)
      s[#s] = tonumber(w.p.shape[0])
      return y:view(s)
    end
    local y = x:matmul(w:t())
    if b then y = y + b end
    return y
  end

  function F.sigmoid(x) return need('sigmoid', x, 'input'):sigmoid() end
  function F.tanh(x) return need('tanh', x, 'input'):tanh() end

  -- inplace: nil or a boolean (PyTorch's positional), else {inplace = ...}
  local INPLACE = { inplace = 'boolean' }
  local function want_inplace(fn, v)
    if v == nil or v == false or v == true then return v == true end
    return (options.check(fn, options.positional(fn, { 'inplace' }, v), INPLACE) or {}).inplace == true
  end

  -- relu(x[, inplace = false]), relu_(x): max(x, 0); in place, x overwritten
  -- and returned (relu's own kernel when nothing is recorded)
  local function relu_fwd(x) return x:relu() end
  local function relu_(fn, x)
    if records(x) then return in_place(fn, x, relu_fwd) end
    return x:relu_()
  end
  function F.relu(x, inplace)
    need('relu', x, 'input')
    if inplace ~= nil and want_inplace('relu', inplace) then return relu_('relu', x) end
    return x:relu()
  end
  function F.relu_(x) return relu_('relu_', need('relu_', x, 'input')) end

  -- the numbers of leaky_relu(x, negative_slope, inplace) / elu(x, alpha,
  -- inplace), or of their options form (x, {negative_slope|alpha, inplace})
  local function number_inplace(fn, what, v, default, inplace)
    if type(v) == 'table' and not T.is_tensor(v) then
      if inplace ~= nil then raise(fn .. ': the options table must come last') end
      local o = options.check(fn, v, { [what] = 'number', inplace = 'boolean' })
      v, inplace = o[what], o.inplace
    end
    if v == nil then v = default end
    if type(v) ~= 'number' then raise(('%s: %s must be a number, got %s'):format(fn, what, typename(v))) end
    if inplace ~= nil and type(inplace) ~= 'boolean' then
      if type(inplace) ~= 'table' or T.is_tensor(inplace) then
        raise(('%s: inplace must be a boolean, got %s'):format(fn, typename(inplace)))
      end
      inplace = want_inplace(fn, inplace)
    end
    return v, inplace == true
  end

  -- leaky_relu(x[, negative_slope = 0.01[, inplace = false]]), leaky_relu_(x[, negative_slope]): x if x > 0 else slope x
  local function leaky_relu_fwd(x, slope) return x:where(x:gt(0), x * slope) end
  local function leaky_relu(fn, x, slope, inplace, force)
    need(fn, x, 'input')
    slope, inplace = number_inplace(fn, 'negative_slope', slope, 0.01, inplace)
    if inplace or force then return in_place(fn, x, leaky_relu_fwd, slope) end
    return leaky_relu_fwd(x, slope)
  end
  function F.leaky_relu(x, slope, inplace) return leaky_relu('leaky_relu', x, slope, inplace) end
  function F.leaky_relu_(x, slope) return leaky_relu('leaky_relu_', x, slope, nil, true) end

  -- elu(x[, alpha = 1[, inplace = false]]), elu_(x[, alpha]): x if x > 0 else alpha (exp(x) - 1)
  -- (one kernel and one node: lunet.nn.functional_elu)
  local elu_kernel = require 'lunet.nn.functional_elu'
  local function elu_fwd(x, alpha) return elu_kernel(x, alpha, 1, 1) end
  local function elu(fn, x, alpha, inplace, force)
    need(fn, x, 'input')
    alpha, inplace = number_inplace(fn, 'alpha', alpha, 1, inplace)
    if inplace or force then return in_place(fn, x, elu_fwd, alpha) end
    return elu_fwd(x, alpha)
  end
  function F.elu(x, alpha, inplace) return elu('elu', x, alpha, inplace) end
  function F.elu_(x, alpha) return elu('elu_', x, alpha, nil, true) end

  -- gelu(x[, approximate = 'none' | 'tanh']): x Phi(x), or its tanh
  -- approximation; one kernel each way (c/cpu/elementwise.c: SLEEF's erf /
  -- tanh), one autograd node (lunet.autograd.formulas.act_loss)
  local record_gelu = recorder('gelu')
  local GELU_OPTS = { approximate = 'string' }
  function F.gelu(x, approximate)
    need('gelu', x, 'input')
    if type(approximate) == 'table' and not T.is_tensor(approximate) then
      approximate = (options.check('gelu', approximate, GELU_OPTS) or {}).approximate
    end
    if approximate ~= nil and approximate ~= 'none' and approximate ~= 'tanh' then
      raise(("gelu: approximate must be 'none' or 'tanh', got %s"):format(
        type(approximate) == 'string' and "'" .. approximate .. "'" or typename(approximate)))
    end
    if not x:is_floating_point() then raise(('gelu: input must be a floating-point tensor, got %s'):format(x.dtype)) end
    local tanh = approximate == 'tanh'
    local y = wrap(C.ln_unary(tanh and C.LN_GELU_TANH or C.LN_GELU, x.p))
    record_gelu(y, x, tanh)
    return y
  end
end
