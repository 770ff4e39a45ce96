-- gradcheck(f, inputs[, opts]): compare autograd's gradients of
-- L = sum(f(inputs...) * v) (v fixed pseudo-random weights) with central
-- finite differences, in float64. inputs are contiguous float64 CPU tensors;
-- those with requires_grad are checked. Returns true, or false and a message.
-- opts: eps (1e-6), atol (1e-6), rtol (1e-4), out = index of f's result to use.
local ffi = require 'ffi'
local lunet = require 'lunet'

local function weights(n)
  -- deterministic, not symmetric, never zero
  local v = ffi.new('double[?]', math.max(n, 1))
  for i = 0, n - 1 do v[i] = 0.5 + ((i * 7919) % 13) / 13 - ((i % 3 == 0) and 1.2 or 0) end
  return v
end

local function loss_value(out, v)
  local buf, n = out:double():read()
  local s = 0
  for i = 0, n - 1 do s = s + buf[i] * v[i] end
  return s
end

local function pick(opts, ...)
  if opts.out then return (select(opts.out, ...)) end
  return (...)
end

local function gradcheck(f, inputs, opts)
  opts = opts or {}
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-6, opts.rtol or 1e-4
  for _, x in ipairs(inputs) do
    if lunet.is_tensor(x) and x.requires_grad then
      assert(x.dtype == 'float64', 'gradcheck: inputs must be float64')
      assert(x:is_contiguous(), 'gradcheck: inputs must be contiguous')
      x.grad = nil
    end
  end
  local out = pick(opts, f(unpack(inputs)))
  local n = out:numel()
  local v = weights(n)
  local vt = lunet.from_buffer(v, out:size(), out.dtype == 'float32' and 'float64' or out.dtype):to(out.dtype)
  out:backward(vt)
  for k, x in ipairs(inputs) do
    if lunet.is_tensor(x) and x.requires_grad then
      local g = x.grad
      if not g then g = x * 0 end  -- unused input: zero gradient
      local gb = g:double():read()
      local p = ffi.cast('double*', x:data_ptr())
      for i = 0, x:numel() - 1 do
        local old = p[i]
        p[i] = old + eps
        local lp = lunet.no_grad(function() return loss_value(pick(opts, f(unpack(inputs))), v) end)
        p[i] = old - eps
        local lm = lunet.no_grad(function() return loss_value(pick(opts, f(unpack(inputs))), v) end)
        p[i] = old
        local num = (lp - lm) / (2 * eps)
        local ana = gb[i]
        if math.abs(num - ana) > atol + rtol * math.abs(num) then
          return false, ('input %d element %d: autograd %.10g, finite differences %.10g'):format(k, i + 1, ana, num)
        end
      end
    end
  end
  return true
end

return gradcheck
