-- lunet.onnx: models to and from ONNX files (what torch.onnx.export writes).
--   lunet.onnx.export(model, sample_input, 'm.onnx', {opset_version = 13})
--   local m = lunet.onnx.load('m.onnx')   -- an nn.Module (onnx.Graph)
-- proto.lua: the protobuf wire format; export.lua: a module walk with an
-- emitter per module class; import.lua and ops.lua: the graph module.
local M = {}

function M.load(path) return require('lunet.onnx.import').load(path) end
function M.export(model, input, path, opts) return require('lunet.onnx.export').export(model, input, path, opts) end

return M
