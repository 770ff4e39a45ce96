-- lunet.nn.functional's one_hot and bilinear, as PyTorch 1.13's, composed of
-- tensor ops (eq against an arange; matmul, a product and a sum) so that they
-- run, and bilinear differentiates, on every backend. Installed into F by
-- lunet.nn.functional.
local A = require 'lunet.autograd'
local factory = require 'lunet.factory'
local options = require 'lunet.options'
local raise = options.raise

return function(F, h)
  local need = h.need

  local function shape_str(t) return '{' .. table.concat(t:size(), ',') .. '}' end

  -- ---- one_hot(t[, num_classes]) ---------------------------------------------------------------
  -- t: int64 (or int32) class labels, 1-based as all of lunet's: label k sets
  -- column k of the last dim (PyTorch's 0-based label k-1 sets its column k-1,
  -- the same column). Result int64, t's shape plus num_classes. num_classes
  -- nil (or PyTorch's -1): the largest label.
  local OH_OPTS, OH_POSITIONAL = { num_classes = 'number' }, { 'num_classes' }
  function F.one_hot(t, ...)
    local fn = 'one_hot'
    need(fn, t, 'input')
    if t.dtype ~= 'int64' and t.dtype ~= 'int32' then
      raise(('%s: input must be an int64 tensor of 1-based class labels, got %s'):format(fn, t.dtype))
    end
    local o = options.check(fn, options.positional(fn, OH_POSITIONAL, ...), OH_OPTS) or {}
    local k = o.num_classes
    if k == -1 then k = nil end
    if k ~= nil and not (k % 1 == 0 and k >= 1 and k < 2 ^ 53) then
      raise(('%s: num_classes must be an integer >= 1 (or -1: the largest label), got %s'):format(fn, tostring(k)))
    end
    if t:numel() == 0 then
      if not k then raise(fn .. ': cannot infer the number of classes from an empty tensor (give num_classes)') end
    else
      local lo, hi = A.no_grad(function() return tonumber(t:min():item()), tonumber(t:max():item()) end)
      if lo < 1 then raise(('%s: class labels are 1-based and must be >= 1, got %d'):format(fn, lo)) end
      if k and hi > k then raise(('%s: class label %d is larger than num_classes (%d)'):format(fn, hi, k)) end
      k = k or hi
    end
    local classes = factory.arange(1, k + 1, { dtype = t.dtype, device = t.device })
    return t:unsqueeze(t:dim() + 1):eq(classes):to('int64')
  end

  -- ---- bilinear(x1, x2, weight[, bias]) --------------------------------------------------------
  -- y[..., k] = x1[..., :] W[k] x2[..., :] + b[k]: x1 (*, in1), x2 (*, in2) with the same
  -- leading dims, weight (out, in1, in2), bias (out); y (*, out). As x1 @ W viewed
  -- (in1, out * in2), times x2 and summed over in2: PyTorch's _trilinear in matmul form.
  local function same_place(fn, ts, names)
    for i = 2, #ts do
      if ts[i].dtype ~= ts[1].dtype then
        raise(('%s: all tensors must have the same dtype, got %s %s and %s %s'):format(fn, names[1], ts[1].dtype,
          names[i], ts[i].dtype))
      end
      if ts[i].device ~= ts[1].device then
        raise(('%s: all tensors must be on the same device, got %s on %s and %s on %s'):format(fn, names[1],
          ts[1].device, names[i], ts[i].device))
      end
    end
  end

  function F.bilinear(x1, x2, w, b)
    local fn = 'bilinear'
    need(fn, x1, 'input1'); need(fn, x2, 'input2'); need(fn, w, 'weight', 3)
    if b ~= nil then need(fn, b, 'bias', 1) end
    same_place(fn, { x1, x2, w, b }, { 'input1', 'input2', 'weight', 'bias' })
    if not x1:is_floating_point() then raise(('%s: input1 must be a floating-point tensor, got %s'):format(fn, x1.dtype)) end
    local nd = x1:dim()
    if nd == 0 or x2:dim() ~= nd then
      raise(('%s: input1 and input2 must have the same number of dims (at least 1), got %s and %s'):format(fn,
        shape_str(x1), shape_str(x2)))
    end
    local s1, s2, sw = x1:size(), x2:size(), w:size()
    for i = 1, nd - 1 do
      if s1[i] ~= s2[i] then
        raise(('%s: input1 %s and input2 %s differ in their batch dims'):format(fn, shape_str(x1), shape_str(x2)))
      end
    end
    if s1[nd] ~= sw[2] then raise(('%s: input1 has %d features, weight expects %d'):format(fn, s1[nd], sw[2])) end
    if s2[nd] ~= sw[3] then raise(('%s: input2 has %d features, weight expects %d'):format(fn, s2[nd], sw[3])) end
    if b ~= nil and b:size(1) ~= sw[1] then
      raise(('%s: bias has %d elements, weight has %d outputs'):format(fn, b:size(1), sw[1]))
    end
    local out, in1, in2 = sw[1], sw[2], sw[3]
    local n = 1
    for i = 1, nd - 1 do n = n * s1[i] end
    local t = x1:reshape(n, in1):matmul(w:permute(2, 1, 3):reshape(in1, out * in2)):reshape(n, out, in2)
    local y = (t * x2:reshape(n, 1, in2)):sum(3)
    if b ~= nil then y = y + b end
    s1[nd] = out
    return y:reshape(s1)
  end
end
