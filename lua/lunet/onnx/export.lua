-- lunet.onnx.export(model, sample_input, path[, {opset_version = 13,
-- input_names = {'input'}, output_names = {'output'}, dynamic_axes}]):
-- writes model as an ONNX file, as torch.onnx.export does in eval mode. A
-- module walk: each module class has an emitter (export_emit.lua) that
-- appends its nodes and runs the module on the sample, so later emitters
-- see real shapes. Batch norms after convolutions are folded into them, as
-- torch's exporter does. dynamic_axes = {input = {'batch'}, output =
-- {'batch'}} names dims (1-based) left free in the file.
local ffi = require 'ffi'
local lunet = require 'lunet'
local P = require 'lunet.onnx.proto'
local options = require 'lunet.options'
local emit = require 'lunet.onnx.export_emit'
local util = require 'lunet.util'

local M = {}

local OPTS = { opset_version = 'number', input_names = 'table', output_names = 'table', dynamic_axes = 'table',
  producer_name = 'string' }

-- ---- encoding --------------------------------------------------------------------------

local function tensor_proto(name, t)
  local dtype = t.dtype
  local code = ({ float32 = 1, int64 = 7 })[dtype]
  if not code then t, code = t:float(), 1 end
  t = t:detach():contiguous():to('cpu')
  local n = t:numel() * t:element_size()
  local raw = n == 0 and '' or ffi.string(ffi.cast('const char *', t:data_ptr()), n)
  return P.ints(1, t:size()) .. P.int(2, code) .. P.str(8, name) .. P.bytes(9, raw)
end
M.tensor_proto = tensor_proto

local function attribute(name, v)
  local a = P.str(1, name)
  if lunet.is_tensor(v) then return a .. P.msg(5, tensor_proto('', v)) .. P.int(20, 4)
  elseif type(v) == 'table' and v.float then return a .. P.float(2, v.float) .. P.int(20, 1)
  elseif type(v) == 'number' then return a .. P.int(3, v) .. P.int(20, 2)
  elseif type(v) == 'string' then return a .. P.bytes(4, v) .. P.int(20, 3)
  end
  return a .. P.ints(8, v) .. P.int(20, 7)
end

local function node_proto(n)
  local parts = {}
  for _, v in ipairs(n.input) do parts[#parts + 1] = P.str(1, v) end
  for _, v in ipairs(n.output) do parts[#parts + 1] = P.str(2, v) end
  parts[#parts + 1] = P.str(3, n.name)
  parts[#parts + 1] = P.str(4, n.op)
  for _, k in ipairs(n.attr_order) do parts[#parts + 1] = P.msg(5, attribute(k, n.attrs[k])) end
  return table.concat(parts)
end

local function value_info(name, t, free)
  local dims = {}
  for i = 1, t:dim() do
    dims[i] = P.msg(1, free and free[i] and P.str(2, free[i]) or P.int(1, t:size(i)))
  end
  local tt = P.int(1, ({ int64 = 7, int32 = 6 })[t.dtype] or 1) .. P.msg(2, table.concat(dims))
  return P.str(1, name) .. P.msg(2, P.msg(1, tt))
end

-- ---- the walk ------------------------------------------------------------------------

local function name_list(fn, what, v, default)
  if v == nil then return { default } end
  if #v ~= 1 or type(v[1]) ~= 'string' or v[1] == '' then
    options.fail(fn, ('%s must be a list of one non-empty name (one input and one output), got %d'):format(what, #v))
  end
  return v
end

local function free_axes(fn, dyn, name, t)
  local d = dyn and dyn[name]
  if d == nil then return nil end
  if type(d) ~= 'table' then options.fail(fn, ('dynamic_axes[%q] must be a list of dim names'):format(name)) end
  for k, v in pairs(d) do
    if type(k) ~= 'number' or k % 1 ~= 0 or k < 1 or k > t:dim() or type(v) ~= 'string' then
      options.fail(fn, ('dynamic_axes[%q]: dim %s is not a dim of a %d-d tensor named by a string'):format(name,
        tostring(k), t:dim()))
    end
  end
  return d
end

function M.export(model, x, path, opts)
  local fn = 'onnx.export'
  if type(model) ~= 'table' or not model._params then options.fail(fn, 'model must be an nn.Module') end
  if not lunet.is_tensor(x) then options.fail(fn, 'sample_input must be a tensor') end
  -- (integer input: indices, for a model that starts with an Embedding)
  if not x:is_floating_point() and x.dtype ~= 'int64' and x.dtype ~= 'int32' then
    options.fail(fn, 'sample_input must be a floating-point, int64 or int32 tensor, got ' .. x.dtype)
  end
  if type(path) ~= 'string' or path == '' then options.fail(fn, 'path must be a non-empty string') end
  opts = options.check(fn, opts, OPTS) or {}
  local opset = opts.opset_version or 13
  if opset % 1 ~= 0 or opset < 13 or opset > 17 then
    options.fail(fn, ('opset_version must be an integer from 13 to 17, got %s'):format(tostring(opset)))
  end
  local iname = name_list(fn, 'input_names', opts.input_names, 'input')[1]
  local oname = name_list(fn, 'output_names', opts.output_names, 'output')[1]
  if opts.dynamic_axes then
    for k in pairs(opts.dynamic_axes) do
      if k ~= iname and k ~= oname then
        options.fail(fn, ('dynamic_axes names %s, which is neither the input (%s) nor the output (%s)'):format(
          tostring(k), iname, oname))
      end
    end
  end
  local ifree = free_axes(fn, opts.dynamic_axes, iname, x)
  -- eval mode for the walk (as torch.onnx.export), restored after
  local modes = {}
  for _, m in ipairs(model:modules()) do modes[m] = m.training end
  model:eval()
  local ctx = emit.context(opset)
  local ok, out_name, y = pcall(lunet.no_grad, emit.module, ctx, model, '', iname,
    x:is_floating_point() and x:float() or x)
  for m, t in pairs(modes) do rawset(m, 'training', t) end
  if not ok then error(out_name, 0) end
  -- the last node writes the graph output (an Identity when the model is
  -- the identity)
  if #ctx.nodes == 0 or ctx.nodes[#ctx.nodes].output[1] ~= out_name then
    emit.node(ctx, 'Identity', '', { out_name }, {})
  end
  ctx.nodes[#ctx.nodes].output[1] = oname
  local ofree = free_axes(fn, opts.dynamic_axes, oname, y)
  local g = {}
  for _, n in ipairs(ctx.nodes) do g[#g + 1] = P.msg(1, node_proto(n)) end
  g[#g + 1] = P.str(2, 'main_graph')
  for _, t in ipairs(ctx.inits) do g[#g + 1] = P.msg(5, tensor_proto(t[1], t[2])) end
  g[#g + 1] = P.msg(11, value_info(iname, x:is_floating_point() and x:float() or x, ifree))
  g[#g + 1] = P.msg(12, value_info(oname, y:is_floating_point() and y:float() or y, ofree))
  local model_bytes = P.int(1, opset >= 15 and 8 or 7) .. P.str(2, opts.producer_name or 'lunet')
    .. P.str(3, '0.1') .. P.msg(7, table.concat(g)) .. P.msg(8, P.int(2, opset))
  -- atomic: a temporary file beside path, fsync, renamed over it
  util.write_file(fn, path, model_bytes)
  return path
end

return M
