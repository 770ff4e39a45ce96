-- lunet.onnx.load(path) -> an onnx.Graph module: the graph's nodes run in
-- topological order on lunet's ops (the ones CNNs export to: Conv, Gemm,
-- pools, BatchNormalization, activations, Add, Concat, Flatten, Reshape,
-- Softmax, Resize, ...). Initializers become its parameters (float) or
-- buffers, so :to(), :double(), state_dict() work. An op or attribute lunet
-- cannot honour is an error when loading, never a silently wrong result.
local ffi = require 'ffi'
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local proto = require 'lunet.onnx.proto'
local ops = require 'lunet.onnx.ops'

local M = {}

local Graph = Module:extend('onnx.Graph')
M.Graph = Graph

local DTYPES = { [1] = 'float32', [6] = 'int32', [7] = 'int64', [11] = 'float64', [9] = 'bool' }
local LIST_FIELD = { [1] = 'float_data', [6] = 'int32_data', [7] = 'int64_data', [9] = 'int32_data' }

-- a TensorProto as a lunet tensor
local function tensor_of(fn, t)
  local what = ('tensor %q'):format(t.name or '')
  local dtype = DTYPES[t.data_type or 0]
  if not dtype then error(('%s: %s has data type %s, which lunet does not read'):format(fn, what, tostring(t.data_type)), 0) end
  if t.data_location == 1 or t.external_data then error(('%s: %s uses external data, which lunet does not read'):format(fn, what), 0) end
  local dims, n = t.dims or {}, 1
  for i = 1, #dims do
    if dims[i] < 0 or dims[i] >= 2 ^ 40 then error(('%s: %s has a bad size %d'):format(fn, what, dims[i]), 0) end
    n = n * dims[i]
  end
  if t.raw_data then
    local esize = ({ float32 = 4, int32 = 4, int64 = 8, float64 = 8, bool = 1 })[dtype]
    if #t.raw_data ~= n * esize then
      error(('%s: %s holds %d bytes, its shape needs %d'):format(fn, what, #t.raw_data, n * esize), 0)
    end
    return lunet.from_buffer(t.raw_data, dims, dtype)
  end
  local list = t[LIST_FIELD[t.data_type]] or {}
  if #list ~= n then error(('%s: %s holds %d values, its shape needs %d'):format(fn, what, #list, n), 0) end
  if n == 0 then return lunet.empty(dims, { dtype = dtype }) end
  return lunet.tensor(list, { dtype = dtype == 'bool' and 'int32' or dtype }):reshape(dims):to(dtype)
end
M.tensor_of = tensor_of

-- the attributes of a node as name -> value
local function attributes(fn, node)
  local out = {}
  for _, a in ipairs(node.attribute or {}) do
    local ty, v = a.type, nil
    if ty == 1 then v = a.f elseif ty == 2 then v = a.i elseif ty == 3 then v = a.s
    elseif ty == 4 then v = a.t and tensor_of(fn, a.t) elseif ty == 6 then v = a.floats or {}
    elseif ty == 7 then v = a.ints or {} elseif ty == 8 then v = a.strings or {} end
    if v == nil then
      error(('%s: node %s (%s): attribute %s of type %s is not supported'):format(fn, node.name or '?', node.op_type,
        tostring(a.name), tostring(ty)), 0)
    end
    out[a.name or '?'] = v
  end
  return out
end

-- a name usable as a module field ('0.weight' -> '_0_weight'), unique in used
local function field_name(name, used)
  local f = '_' .. name:gsub('[^%w_]', '_')
  while used[f] do f = f .. '_' end
  used[f] = true
  return f
end

-- the nodes in an order where each runs after what it reads (Kahn's
-- algorithm); a value no node or input makes is an error naming it
local function ordered(fn, nodes, known)
  local done, out, left = {}, {}, {}
  for name in pairs(known) do done[name] = true end
  for i = 1, #nodes do left[i] = nodes[i] end
  while #left > 0 do
    local rest = {}
    for _, n in ipairs(left) do
      local ready = true
      for _, v in ipairs(n.input or {}) do
        if v ~= '' and not done[v] then ready = false; break end
      end
      if ready then
        out[#out + 1] = n
        for _, v in ipairs(n.output or {}) do done[v] = true end
      else
        rest[#rest + 1] = n
      end
    end
    if #rest == #left then
      for _, v in ipairs(rest[1].input) do
        if v ~= '' and not done[v] then
          error(('%s: node %s (%s) reads %q, which no input, initializer or node makes (or the graph has a cycle)'):format(
            fn, rest[1].name or '?', rest[1].op_type or '?', v), 0)
        end
      end
    end
    left = rest
  end
  return out
end

-- the inputs an op cannot run without (default 1; Constant 0)
local MIN_INPUTS = { Add = 2, Sub = 2, Mul = 2, Div = 2, MatMul = 2, Gemm = 2, Conv = 2, BatchNormalization = 5,
  Reshape = 2, Gather = 2 }

-- builds the module from a decoded ModelProto
function M.from_model(fn, model)
  local g = model.graph
  if not g then error(fn .. ': the file holds no graph', 0) end
  local opset
  for _, o in ipairs(model.opset_import or {}) do
    if (o.domain or '') == '' or o.domain == 'ai.onnx' then opset = o.version end
  end
  if not opset then error(fn .. ': the model imports no ai.onnx opset', 0) end
  if opset < 7 or opset > 17 then
    error(('%s: opset %d is not supported (lunet reads opsets 7 to 17)'):format(fn, opset), 0)
  end
  if g.sparse_initializer then error(fn .. ': sparse initializers are not supported', 0) end
  local self = Graph()
  local used, values, known = {}, {}, {}
  for _, t in ipairs(g.initializer or {}) do
    local name = t.name or ''
    local f = field_name(name, used)
    local v = tensor_of(fn, t)
    if v:is_floating_point() then self:register_parameter(f, v) else self:register_buffer(f, v) end
    values[name], known[name] = f, true
  end
  local inputs = {}
  for _, vi in ipairs(g.input or {}) do
    if not known[vi.name] then inputs[#inputs + 1] = vi.name; known[vi.name] = true end
  end
  local outputs = {}
  for _, vi in ipairs(g.output or {}) do outputs[#outputs + 1] = vi.name end
  if #outputs == 0 then error(fn .. ': the graph has no outputs', 0) end
  -- unknown ops first, all of them in one message
  local unknown, seen = {}, {}
  for _, n in ipairs(g.node or {}) do
    local op = n.op_type or '?'
    if n.domain and n.domain ~= '' and n.domain ~= 'ai.onnx' then op = n.domain .. '.' .. op end
    if not ops[op] and not seen[op] then unknown[#unknown + 1] = op; seen[op] = true end
  end
  if #unknown > 0 then
    table.sort(unknown)
    error(('%s: unsupported ONNX ops: %s'):format(fn, table.concat(unknown, ', ')), 0)
  end
  local steps = {}
  for _, n in ipairs(ordered(fn, g.node or {}, known)) do
    local where = ('%s: node %s (%s)'):format(fn, n.name or '?', n.op_type)
    local run = ops[n.op_type](where, attributes(fn, n), #(n.input or {}), #(n.output or {}), opset)
    -- (after its attributes: the inputs its run function requires; a node missing one is a
    -- corrupt file, not a nil inside the op)
    local need = n.op_type == 'Constant' and 0 or MIN_INPUTS[n.op_type] or 1
    for i = 1, need do
      if (n.input or {})[i] == nil or n.input[i] == '' then
        error(('%s: has %d inputs, needs at least %d'):format(where, #(n.input or {}), need), 0)
      end
    end
    if n.op_type == 'Constant' then
      if not (n.output or {})[1] then error(where .. ': has no output', 0) end
      -- (made once, kept as a buffer)
      local f = field_name(n.output[1], used)
      self:register_buffer(f, run())
      values[n.output[1]] = f
    else
      steps[#steps + 1] = { run = run, input = n.input or {}, output = n.output or {}, name = where }
    end
  end
  for _, o in ipairs(outputs) do
    local made = values[o]
    for _, s in ipairs(steps) do
      for _, v in ipairs(s.output) do made = made or v == o end
    end
    for _, v in ipairs(inputs) do made = made or v == o end
    if not made then error(('%s: graph output %q is never made'):format(fn, o), 0) end
  end
  rawset(self, '_graph', { steps = steps, inputs = inputs, outputs = outputs, values = values, opset = opset })
  return self
end

-- load(path): the model in an .onnx file
function M.load(path)
  if type(path) ~= 'string' then error('onnx.load: path must be a string, got ' .. type(path), 2) end
  local f, err = io.open(path, 'rb')
  if not f then error('onnx.load: cannot open ' .. tostring(err), 2) end
  local bytes = f:read('*a')
  f:close()
  local fn = 'onnx.load: ' .. path
  local ok, model = pcall(proto.decode, proto.schema.Model, bytes, fn .. ': corrupt file')
  if not ok then error(model, 2) end
  local ok2, m = pcall(M.from_model, fn, model)
  if not ok2 then error(m, 2) end
  return m
end

function Graph:forward(...)
  local g = rawget(self, '_graph')
  local env = {}
  for name, f in pairs(g.values) do env[name] = self[f] end
  if select('#', ...) ~= #g.inputs then
    error(('onnx.Graph: expected %d inputs, got %d'):format(#g.inputs, select('#', ...)), 2)
  end
  for i, name in ipairs(g.inputs) do
    local x = select(i, ...)
    if not lunet.is_tensor(x) then error(('onnx.Graph: input %d must be a tensor'):format(i), 2) end
    env[name] = x
  end
  local args = {}
  for _, s in ipairs(g.steps) do
    local n, who = #s.input, (s.name:gsub('^[^:]*:', 'onnx.Graph:'))
    for i = 1, n do
      local v = s.input[i]
      args[i] = false   -- (an omitted optional input)
      if v ~= '' then args[i] = env[v] end
      if args[i] == nil then   -- (a node that made fewer outputs than the file names)
        error(('%s: input %q was not made'):format(who, v), 2)
      end
    end
    -- (an op's error names its node)
    local outs = { pcall(s.run, unpack(args, 1, n)) }
    if not outs[1] then
      local e = tostring(outs[2]):gsub('^[^:\n]*:%d+: ', '')   -- (without the position inside lunet)
      error(e:find(s.name, 1, true) and e or who .. ': ' .. e, 2)
    end
    table.remove(outs, 1)
    for i, v in ipairs(s.output) do
      if v ~= '' then env[v] = outs[i] end
    end
  end
  local res = {}
  for i, o in ipairs(g.outputs) do res[i] = env[o] end
  return unpack(res, 1, #g.outputs)
end

function Graph:extra_repr()
  local g = rawget(self, '_graph')
  return ('%d nodes, opset %d'):format(#g.steps, g.opset)
end

return M
