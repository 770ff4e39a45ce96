-- The ONNX ops lunet.onnx.load runs: ops[op_type](where, attrs, n_inputs,
-- n_outputs, opset) checks the node's attributes and returns run(inputs...)
-- -> outputs, on lunet's tensor ops and nn.functional. An attribute value
-- lunet cannot honour is an error naming the node, never a wrong result.
local lunet = require 'lunet'
local F = require 'lunet.nn.functional'

local ops = {}

local function fail(where, msg) error(where .. ': ' .. msg, 0) end

-- the attributes, after checking each is one of allowed (name -> default)
local function take(where, attrs, allowed)
  local out = {}
  for k, v in pairs(attrs) do
    if allowed[k] == nil then fail(where, ('attribute %s is not supported'):format(k)) end
    out[k] = v
  end
  for k, d in pairs(allowed) do
    if out[k] == nil and d ~= false then out[k] = d end
  end
  return out
end

local function outputs(where, nout, most)
  if nout > most then fail(where, ('%d outputs are not supported (at most %d)'):format(nout, most)) end
end

-- an ONNX axis (0-based, negative from the end) as a lunet dim (1-based)
local function dim(axis, rank) if axis < 0 then return axis + rank + 1 end return axis + 1 end

local function all(list, v)
  for i = 1, #list do if list[i] ~= v then return false end end
  return true
end

-- pads {b1, b2, e1, e2} as symmetric {p1, p2}, or nil when they are not
local function symmetric(pads, nd)
  local p = {}
  for i = 1, nd do
    if pads[i] ~= pads[i + nd] then return nil end
    p[i] = pads[i]
  end
  return p
end

-- F.pad's list (last dim first) for ONNX pads over the last nd dims
local function pad_list(pads, nd)
  local out = {}
  for i = nd, 1, -1 do out[#out + 1] = pads[i]; out[#out + 1] = pads[i + nd] end
  return out
end

local function no_auto_pad(where, a)
  if a.auto_pad ~= 'NOTSET' and a.auto_pad ~= 'VALID' then
    fail(where, ('auto_pad %s is not supported (NOTSET or VALID)'):format(a.auto_pad))
  end
end

local function spatial(where, a, nd)
  local k = a.kernel_shape
  if k and #k ~= nd then fail(where, ('kernel_shape has %d values for %d spatial dims'):format(#k, nd)) end
  local pads = a.pads or {}
  if a.auto_pad == 'VALID' or #pads == 0 then pads = {} for i = 1, 2 * nd do pads[i] = 0 end end
  if #pads ~= 2 * nd then fail(where, ('pads has %d values, expected %d'):format(#pads, 2 * nd)) end
  local strides, dil = a.strides or {}, a.dilations or {}
  local s, d = {}, {}
  for i = 1, nd do s[i], d[i] = strides[i] or 1, dil[i] or 1 end
  return pads, s, d
end

local CONV_FN = { [1] = F.conv1d, [2] = F.conv2d, [3] = F.conv3d }
function ops.Conv(where, attrs, nin, nout)
  local a = take(where, attrs, { auto_pad = 'NOTSET', dilations = false, group = 1, kernel_shape = false, pads = false,
    strides = false })
  no_auto_pad(where, a)
  outputs(where, nout, 1)
  return function(x, w, b)
    local nd = w:dim() - 2
    if not CONV_FN[nd] then fail(where, ('%d-d convolutions are not supported'):format(nd)) end
    local pads, s, d = spatial(where, a, nd)
    local p = symmetric(pads, nd)
    if not p then x, p = F.pad(x, pad_list(pads, nd)), { 0, 0, 0 } end
    local one = nd == 1
    return CONV_FN[nd](x, w, b or nil, { stride = one and s[1] or s, padding = one and p[1] or { unpack(p, 1, nd) },
      dilation = one and d[1] or d, groups = a.group })
  end
end

-- (1-d, 2-d and 3-d pools: one number per spatial dim, or a list)
local MAX_FN = { [1] = F.max_pool1d, [2] = F.max_pool2d, [3] = F.max_pool3d }
local AVG_FN = { [1] = F.avg_pool1d, [2] = F.avg_pool2d, [3] = F.avg_pool3d }
local function pool(where, a, nd, x)
  if not MAX_FN[nd] or x:dim() ~= nd + 2 then
    fail(where, ('a %d-d input with a %d-d kernel is not supported (1-d to 3-d pools on (N, C, ...) input)'):format(
      x:dim(), nd))
  end
  local pads, s, d = spatial(where, a, nd)
  local p = symmetric(pads, nd)
  if not p then fail(where, ('asymmetric pads {%s} are not supported'):format(table.concat(pads, ', '))) end
  local k = a.kernel_shape
  if nd == 1 then return k[1], p[1], s[1], d[1] end
  return k, p, s, d
end

function ops.MaxPool(where, attrs, nin, nout)
  local a = take(where, attrs, { auto_pad = 'NOTSET', ceil_mode = 0, dilations = false, kernel_shape = false,
    pads = false, storage_order = 0, strides = false })
  no_auto_pad(where, a)
  outputs(where, nout, 1)
  if not a.kernel_shape then fail(where, 'kernel_shape is required') end
  return function(x)
    local nd = #a.kernel_shape
    local k, p, s, d = pool(where, a, nd, x)
    return MAX_FN[nd](x, k, { stride = s, padding = p, dilation = d, ceil_mode = a.ceil_mode == 1 })
  end
end

function ops.AveragePool(where, attrs, nin, nout)
  local a = take(where, attrs, { auto_pad = 'NOTSET', ceil_mode = 0, count_include_pad = 0, kernel_shape = false,
    pads = false, strides = false })
  no_auto_pad(where, a)
  outputs(where, nout, 1)
  if not a.kernel_shape then fail(where, 'kernel_shape is required') end
  return function(x)
    local nd = #a.kernel_shape
    local k, p, s = pool(where, a, nd, x)
    return AVG_FN[nd](x, k, { stride = s, padding = p, ceil_mode = a.ceil_mode == 1,
      count_include_pad = a.count_include_pad == 1 })
  end
end

function ops.GlobalAveragePool(where, attrs)
  take(where, attrs, {})
  return function(x)
    local dims = {}
    for i = 3, x:dim() do dims[#dims + 1] = i end
    return x:mean(dims, true)
  end
end

function ops.GlobalMaxPool(where, attrs)
  take(where, attrs, {})
  return function(x)
    local y = x
    for i = x:dim(), 3, -1 do y = y:amax(i, true) end
    return y
  end
end

function ops.BatchNormalization(where, attrs, nin, nout)
  local a = take(where, attrs, { epsilon = 1e-5, momentum = 0.9, training_mode = 0, spatial = 1 })
  if a.training_mode ~= 0 or a.spatial ~= 1 then fail(where, 'only inference (training_mode 0, spatial 1) is supported') end
  outputs(where, nout, 1)
  return function(x, scale, b, mean, var) return F.batch_norm(x, mean, var, scale, b, false, 0, a.epsilon) end
end

function ops.Gemm(where, attrs, nin, nout)
  local a = take(where, attrs, { alpha = 1, beta = 1, transA = 0, transB = 0 })
  return function(x, w, c)
    if a.alpha == 1 and a.beta == 1 and a.transA == 0 and a.transB == 1 and (not c or c:dim() == 1) then
      return F.linear(x, w, c or nil)   -- (torch's nn.Linear)
    end
    if a.transA == 1 then x = x:t() end
    if a.transB == 1 then w = w:t() end
    local y = x:matmul(w)
    if a.alpha ~= 1 then y = y * a.alpha end
    if c then y = y + (a.beta ~= 1 and c * a.beta or c) end
    return y
  end
end

function ops.MatMul(where, attrs) take(where, attrs, {}); return function(x, y) return x:matmul(y) end end

for op, m in pairs({ Add = 'add', Sub = 'sub', Mul = 'mul', Div = 'div' }) do
  ops[op] = function(where, attrs)
    take(where, attrs, {})
    return function(x, y)
      -- (integer Div truncates, as in the shape arithmetic torch exports)
      if m == 'div' and not x:is_floating_point() and not y:is_floating_point() then
        return x:double():div(y:double()):trunc():to(x.dtype)
      end
      return x[m](x, y)
    end
  end
end

for op, m in pairs({ Relu = 'relu', Sigmoid = 'sigmoid', Tanh = 'tanh', Exp = 'exp', Sqrt = 'sqrt', Neg = 'neg',
  Abs = 'abs' }) do
  ops[op] = function(where, attrs)
    take(where, attrs, {})
    return function(x) return x[m](x) end
  end
end

function ops.LeakyRelu(where, attrs)
  local a = take(where, attrs, { alpha = 0.01 })
  return function(x) return F.leaky_relu(x, a.alpha) end
end

function ops.Elu(where, attrs)
  local a = take(where, attrs, { alpha = 1 })
  return function(x) return F.elu(x, a.alpha) end
end

-- (opset 11+: min and max are inputs; before: attributes)
function ops.Clip(where, attrs)
  local a = take(where, attrs, { min = false, max = false })
  return function(x, lo, hi)
    lo = lo and lo:item() or a.min
    hi = hi and hi:item() or a.max
    return x:clamp(lo, hi)
  end
end

require('lunet.onnx.ops_shape')(ops, { take = take, fail = fail, dim = dim, outputs = outputs, all = all,
  pad_list = pad_list })
require('lunet.onnx.ops_more')(ops, { take = take, fail = fail, dim = dim })

return ops
