-- The graph context g that lunet.onnx.export hands a module's own
-- exporter, as torch.onnx hands a symbolic function its g:
--   function MyNet:onnx_export(g, x_name, x)   -- x: the running sample value
--     local a_name, a = g:module('a', x_name, x)
--     local b_name, b = g:module('b', x_name, x)
--     return g:node('Concat', {a_name, b_name}, {axis_i = 1}), lunet.cat({a, b}, 2)
--   end
-- The method returns its output's name and, optionally, its value (else the
-- walk runs the module on x for it). A method, not a registry: it is looked
-- up on the class chain as the built-in emitters are (subclasses inherit it),
-- and a model's file carries its exporter without requiring lunet.onnx.
local lunet = require 'lunet'
local options = require 'lunet.options'
local E = require 'lunet.onnx.export_emit'   -- (node, init, module, sequence)

local G = {}
G.__index = G
G.__name = 'onnx.GraphContext'

local function fail(g, msg)
  options.fail('onnx.export', ('%s at %s: %s'):format(g.class, g.path == '' and 'the top' or g.path:sub(2), msg))
end

function G.new(ctx, m, path)
  return setmetatable({ ctx = ctx, module_ = m, path = path, opset = ctx.opset, class = tostring(m.__name) }, G)
end

function G:__tostring() return ('onnx.GraphContext(%s, opset %d)'):format(self.path, self.opset) end

-- attrs: torch's g.op suffixes (axis_i, alpha_f, mode_s, value_t) or plain
-- names with integers, integer lists, strings and tensors
local SUFFIX = { i = true, f = true, s = true, t = true }
local function attrs_of(g, op, attrs)
  local out = {}
  for k, v in pairs(attrs or {}) do
    if type(k) ~= 'string' then fail(g, ('%s: attribute names must be strings'):format(op)) end
    local base, suf = k:match('^(.+)_(%a)$')
    if not (base and SUFFIX[suf]) then base, suf = k, nil end
    if suf == 'f' then
      if type(v) ~= 'number' then fail(g, ('%s: attribute %s must be a number'):format(op, k)) end
      v = { float = v }
    elseif suf == 't' and not lunet.is_tensor(v) then fail(g, ('%s: attribute %s must be a tensor'):format(op, k))
    elseif suf == 's' and type(v) ~= 'string' then fail(g, ('%s: attribute %s must be a string'):format(op, k))
    elseif type(v) == 'number' and v % 1 ~= 0 then
      fail(g, ('%s: attribute %s = %s is not an integer (name it %s_f for a float)'):format(op, k, v, base))
    elseif type(v) == 'table' and not lunet.is_tensor(v) and v.float == nil then
      for _, e in ipairs(v) do
        if type(e) ~= 'number' or e % 1 ~= 0 then fail(g, ('%s: attribute %s must be a list of integers'):format(op, k)) end
      end
    elseif type(v) == 'boolean' then v = v and 1 or 0
    elseif type(v) ~= 'number' and type(v) ~= 'string' and type(v) ~= 'table' then
      fail(g, ('%s: attribute %s has a %s value'):format(op, k, type(v)))
    end
    out[base] = v
  end
  return out
end

-- node(op, inputs, attrs[, n_outputs]) -> the output names ('' inputs are
-- ONNX's omitted optional inputs)
function G:node(op, inputs, attrs, n_out)
  if type(op) ~= 'string' or not op:match('^%a%w*$') then fail(self, 'node: op must be an ONNX op name') end
  if type(inputs) ~= 'table' then fail(self, ('%s: inputs must be a list of value names'):format(op)) end
  for i, v in ipairs(inputs) do
    if type(v) ~= 'string' then fail(self, ('%s: input %d is a %s, not a value name'):format(op, i, type(v))) end
  end
  n_out = n_out or 1
  if type(n_out) ~= 'number' or n_out % 1 ~= 0 or n_out < 1 then fail(self, op .. ': n_outputs must be a positive integer') end
  local out = E.node(self.ctx, op, self.path, { unpack(inputs) }, attrs_of(self, op, attrs))
  local n, outs = self.ctx.nodes[#self.ctx.nodes], { out }
  for i = 2, n_out do outs[i] = self:fresh(op); n.output[i] = outs[i] end
  return unpack(outs)
end

-- a value name no node has written yet
function G:fresh(hint) return E.unique(self.ctx, ('%s/%s_output_0'):format(self.path, hint or 'value')) end

-- an initializer (a weight) named after the module's state_dict key
function G:initializer(name, t)
  if type(name) ~= 'string' or name == '' then fail(self, 'initializer: name must be a non-empty string') end
  if not lunet.is_tensor(t) then fail(self, ('initializer %s: value must be a tensor'):format(name)) end
  return E.init(self.ctx, E.key(self.path, name), t:detach())
end

-- a Constant node of a tensor (or of lunet.tensor(v, opts))
function G:constant(v, opts)
  if not lunet.is_tensor(v) then v = lunet.tensor(v, opts) end
  return E.node(self.ctx, 'Constant', self.path, {}, { value = v })
end

local function child(g, c)
  local m = g.module_
  if type(c) == 'string' then
    if not (type(rawget(m, c)) == 'table' and rawget(rawget(m, c), '_params')) then
      fail(g, ('module: %s is not a child module'):format(c))
    end
    return rawget(m, c), c
  end
  for _, n in ipairs(m._children) do if rawget(m, n) == c then return c, n end end
  fail(g, 'module: not a child module (give its name or the child itself)')
end

-- emit a child (by name or itself) by the walk: its output's name and value
function G:module(c, xn, x)
  local m, name = child(self, c)
  return E.module(self.ctx, m, self.path .. '/' .. name, xn, x)
end

-- children in order, as nn.Sequential (a conv then a batch norm folded)
function G:sequence(names, xn, x)
  if type(names) ~= 'table' then fail(self, 'sequence: names must be a list of child names') end
  for _, n in ipairs(names) do child(self, n) end
  return E.sequence(self.ctx, self.module_, names, self.path, xn, x)
end

return G
