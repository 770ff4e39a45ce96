-- More ONNX ops of lunet.onnx.load (see ops.lua): the activations torch 1.13
-- decomposes its layers into (HardSigmoid for Hardswish/Hardsigmoid, Erf and
-- Pow for GELU and LayerNorm, Softplus for Mish, PRelu), the reductions
-- (ReduceMean for x.mean(dims) and LayerNorm), Transpose and Squeeze (channel
-- shuffles, squeezes).
local lunet = require 'lunet'
local F = require 'lunet.nn.functional'

return function(ops, h)
  local take, fail, dim = h.take, h.fail, h.dim

  local function ints(t) return t:to('cpu'):long():reshape(-1):tolist() end

  -- (the types lunet has; ONNX's codes)
  local CAST = { [1] = 'float32', [2] = 'uint8', [6] = 'int32', [7] = 'int64', [9] = 'bool', [10] = 'float16',
    [11] = 'float64', [16] = 'bfloat16' }
  function ops.Cast(where, attrs)
    local a = take(where, attrs, { to = false })
    local dtype = CAST[a.to or 0]
    if not dtype then fail(where, ('cast to ONNX type %s is not supported'):format(tostring(a.to))) end
    return function(x) return x:to(dtype) end
  end

  function ops.HardSigmoid(where, attrs)
    local a = take(where, attrs, { alpha = 0.2, beta = 0.5 })
    return function(x) return (x * a.alpha + a.beta):clamp(0, 1) end
  end

  function ops.HardSwish(where, attrs)
    take(where, attrs, {})
    return function(x) return F.hardswish(x) end
  end

  for op, m in pairs({ Erf = 'erf', Log = 'log', Reciprocal = 'reciprocal', Floor = 'floor', Ceil = 'ceil' }) do
    ops[op] = function(where, attrs)
      take(where, attrs, {})
      return function(x) return x[m](x) end
    end
  end

  function ops.Softplus(where, attrs)
    take(where, attrs, {})
    return function(x) return F.softplus(x) end
  end

  function ops.Pow(where, attrs)
    take(where, attrs, {})
    return function(x, e)
      if e:numel() == 1 and e:dim() <= x:dim() then return x:pow(e:double():item()) end
      return x:pow(e:to(x.dtype))
    end
  end

  -- (slope broadcasts to x, as torch writes it: (C, 1, 1) for a per-channel one)
  function ops.PRelu(where, attrs)
    take(where, attrs, {})
    return function(x, slope) return x:where(x:gt(0), x * slope) end
  end

  -- the dims an axes list names (all of them when empty), sorted, unique
  local function reduce_dims(where, list, r)
    local out, seen = {}, {}
    for _, v in ipairs(list) do
      if v < -r or v >= r then fail(where, ('axis %d is out of range for rank %d'):format(v, r)) end
      local d = dim(v, r)
      if not seen[d] then out[#out + 1] = d; seen[d] = true end
    end
    table.sort(out)
    return out
  end

  local REDUCE = { ReduceMean = 'mean', ReduceSum = 'sum', ReduceMax = 'amax', ReduceMin = 'amin' }
  for op, m in pairs(REDUCE) do
    ops[op] = function(where, attrs, nin, nout, opset)
      -- (ReduceSum's axes are an input from opset 13, the others' from 18)
      local as_input = op == 'ReduceSum' and opset >= 13
      local a = take(where, attrs, { axes = false, keepdims = 1, noop_with_empty_axes = 0 })
      if a.axes and as_input then fail(where, 'axes is an input from opset 13, not an attribute') end
      return function(x, axes)
        local list = axes and ints(axes) or a.axes or {}
        if #list == 0 and a.noop_with_empty_axes == 1 then return x end
        local r = x:dim()
        local dims = reduce_dims(where, list, r)
        if #dims == 0 then for i = 1, r do dims[i] = i end end
        if r == 0 then return x end
        local y = x[m](x, dims, true)
        if a.keepdims == 1 then return y end
        for i = #dims, 1, -1 do y = y:squeeze(dims[i]) end
        return y
      end
    end
  end

  function ops.Transpose(where, attrs)
    local a = take(where, attrs, { perm = false })
    return function(x)
      local r, perm = x:dim(), {}
      if a.perm then
        if #a.perm ~= r then fail(where, ('perm has %d values for rank %d'):format(#a.perm, r)) end
        for i, p in ipairs(a.perm) do perm[i] = p + 1 end
      else
        for i = 1, r do perm[i] = r - i + 1 end
      end
      return x:permute(perm)
    end
  end

  function ops.Squeeze(where, attrs, nin, nout, opset)
    local a = take(where, attrs, { axes = false })
    return function(x, axes)
      local list = axes and ints(axes) or a.axes
      local r = x:dim()
      if not list then
        list = {}
        for i = 1, r do if x:size(i) == 1 then list[#list + 1] = i - 1 end end
      end
      local dims = reduce_dims(where, list, r)
      for i = #dims, 1, -1 do
        if x:size(dims[i]) ~= 1 then fail(where, ('cannot squeeze axis %d of size %d'):format(dims[i] - 1, x:size(dims[i]))) end
        x = x:squeeze(dims[i])
      end
      return x
    end
  end
end
