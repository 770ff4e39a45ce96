-- lunet.onnx.export's emitters: E[class name](ctx, module, path, x_name, x)
-- appends the module's ONNX nodes (the ones torch 1.13's exporter writes for
-- the same torch module in eval mode) and returns the output's name and
-- value. A class (or an ancestor) with an :onnx_export(g, x_name, x) method
-- is exported by it (export_ctx.lua: g is the public graph context). A
-- module with neither is an error naming its class.
local lunet = require 'lunet'
local options = require 'lunet.options'

local M = {}
local E = {}
M.emitters = E

local function pair(v) if type(v) == 'table' then return { v[1], v[2] } end return { v, v } end
local function float(v) return { float = v } end

function M.context(opset) return { nodes = {}, inits = {}, used = {}, opset = opset } end

local function unique(ctx, name)
  local n, k = name, 0
  while ctx.used[n] do k = k + 1; n = name:gsub('_output_0$', '') .. '_' .. k .. '_output_0' end
  ctx.used[n] = true
  return n
end
M.unique = unique

-- node(ctx, op, path, inputs, attrs[, attr_order]) -> its output's name
function M.node(ctx, op, path, inputs, attrs)
  local order = {}
  for k in pairs(attrs) do order[#order + 1] = k end
  table.sort(order)   -- (torch writes them sorted by name)
  local out = unique(ctx, ('%s/%s_output_0'):format(path, op))
  ctx.nodes[#ctx.nodes + 1] = { op = op, name = path .. '/' .. op, input = inputs, output = { out }, attrs = attrs,
    attr_order = order }
  return out
end

-- an initializer named name holding t (float32 or int64)
local function init(ctx, name, t)
  name = unique(ctx, name)
  ctx.inits[#ctx.inits + 1] = { name, t }
  return name
end
M.init = init

local function constant(ctx, path, t) return M.node(ctx, 'Constant', path, {}, { value = t }) end

local function key(path, k) return (path == '' and '' or path:sub(2) .. '.') .. k end
M.key = key

local function where(path) return path == '' and 'the top' or path:sub(2) end

-- a module's own exporter: its output's name and value (run when not given)
local function own(ctx, f, m, path, xn, x)
  local G = require 'lunet.onnx.export_ctx'
  local yn, y = f(m, G.new(ctx, m, path), xn, x)
  if type(yn) ~= 'string' or yn == '' then
    options.fail('onnx.export', ('%s:onnx_export at %s must return its output\'s value name, got %s'):format(
      tostring(m.__name), where(path), type(yn)))
  end
  if y == nil then y = m(x) end
  return yn, y
end

-- dispatch on the module's class: its own or an ancestor's :onnx_export or
-- emitter, the nearest first
function M.module(ctx, m, path, xn, x)
  local cls = getmetatable(m)
  while cls do
    local f = rawget(cls, 'onnx_export')
    if f then return own(ctx, f, m, path, xn, x) end
    local e = E[rawget(cls, '__name') or '']
    if e then
      if not lunet.is_tensor(x) then
        options.fail('onnx.export', ('%s at %s: takes one tensor'):format(tostring(m.__name), where(path)))
      end
      return e(ctx, m, path, xn, x)
    end
    local mt = getmetatable(cls)
    cls = mt and type(mt.__index) == 'table' and mt.__index or nil
  end
  options.fail('onnx.export', ('unsupported module %s at %s (supported: %s; and any class with an '
    .. ':onnx_export(g, x_name, x) method)'):format(tostring(m.__name), where(path), M.supported()))
end

function M.supported()
  local list = {}
  for k in pairs(E) do list[#list + 1] = k end
  table.sort(list)
  return table.concat(list, ', ')
end

-- ---- convolutions, with a following batch norm folded in ------------------------------------

local function bn_usable(bn)
  return getmetatable(bn) == require('lunet.nn.BatchNorm2d') and bn.track_running_stats and bn.running_mean
end

-- conv (+ bn folded as torch 1.13's exporter does it, operation by operation
-- in float32 so that the file's weights are torch's to the bit: s = g /
-- sqrt(v + eps) with eps the file's float32 epsilon, w * s, and beta - m * s,
-- or (b - m) * s + beta for a conv with a bias)
local function conv(ctx, c, path, xn, x, bn)
  if c.padding_mode ~= 'zeros' then
    options.fail('onnx.export', ('%s: padding_mode %s is not supported'):format(c.__name, c.padding_mode))
  end
  local nd = #c.kernel_size
  local y = c(x)
  local w, b = c.weight:detach(), c.bias and c.bias:detach()
  if bn then
    y = bn(y)
    local eps = lunet.tensor(bn.eps):item()   -- (float32, as the BatchNormalization attribute torch folds from)
    local g = bn.weight and bn.weight:detach() or lunet.ones_like(bn.running_var)
    local beta = bn.bias and bn.bias:detach() or lunet.zeros_like(bn.running_var)
    local scale = g / (bn.running_var + eps):sqrt()
    local shape = { -1 }
    for i = 2, nd + 2 do shape[i] = 1 end
    w = w * scale:reshape(shape)
    if b then b = (b - bn.running_mean) * scale + beta else b = beta - bn.running_mean * scale end
  end
  local pads, strides, dil, k = {}, {}, {}, c.kernel_size
  for i = 1, nd do
    local at = function(v) if type(v) == 'table' then return v[i] end return v end
    strides[i], dil[i] = at(c.stride), at(c.dilation)
    local p = c.padding
    if p == 'valid' then p = 0
    elseif p == 'same' then
      local total = dil[i] * (k[i] - 1)
      if total % 2 == 1 then options.fail('onnx.export', c.__name .. ": padding='same' with an odd total padding is not supported") end
      p = total / 2
    end
    pads[i], pads[i + nd] = at(p), at(p)
  end
  local inputs = { xn, init(ctx, key(path, 'weight'), w) }
  if b then inputs[3] = init(ctx, key(path, 'bias'), b) end
  return M.node(ctx, 'Conv', path, inputs, { dilations = dil, group = c.groups, kernel_shape = { unpack(k) },
    pads = pads, strides = strides }), y
end
M.conv = conv

for _, n in ipairs({ 'nn.Conv1d', 'nn.Conv2d', 'nn.Conv3d' }) do
  E[n] = function(ctx, m, path, xn, x) return conv(ctx, m, path, xn, x) end
end

-- children of m (names) in order, conv -> batch norm pairs folded
function M.sequence(ctx, m, names, path, xn, x)
  local i = 1
  while i <= #names do
    local c, p = m[names[i]], path .. '/' .. names[i]
    local nxt = m[names[i + 1] or '']
    if getmetatable(c) == require('lunet.nn.Conv2d') and nxt and bn_usable(nxt) then
      xn, x = conv(ctx, c, p, xn, x, nxt)
      i = i + 2
    else
      xn, x = M.module(ctx, c, p, xn, x)
      i = i + 1
    end
  end
  return xn, x
end
E['nn.Sequential'] = function(ctx, m, path, xn, x) return M.sequence(ctx, m, m._children, path, xn, x) end

require('lunet.onnx.export_layers')(M, E, { init = init, constant = constant, key = key, pair = pair,
  float = float, conv = conv, bn_usable = bn_usable })
require('lunet.onnx.export_more')(M, E, { init = init, constant = constant, key = key, float = float })

return M
