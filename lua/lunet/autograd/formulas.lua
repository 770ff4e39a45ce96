-- lunet.autograd.formulas: the derivative of every differentiable Tensor
-- method, one entry per op (as PyTorch's derivatives.yaml). An entry names
-- the recording kind (lunet.autograd.record: what the node keeps) and gives
-- backward(n, g) -> the gradient for each input (nil for an input that
-- needs none); n holds what the kind saved:
--   unary   n.a (save_in), n.r (save_out), n.x1..x3 (args)
--   binary  n.a, n.b (save), n.r (save = 'out'), n.c, n.sa/n.sb (shapes to
--           reduce broadcast gradients to); n[1]/n[2] say which input needs one
--   pair    n.a, n.b
--   view    n.shape, n.dtype, n.device of the input, n.x1..x3 (args)
--   reduce  n.shape (or n.x with save_in), n.dim, n.keepdim
--   extreme n.a, n.r, n.shape, n.dim, n.keepdim, n.idx
--   index   n.shape, n.dim, n.index
--   custom  make(orig, Tensor, name) -> the recording method
--   layer   n.a, n.b (save_in), n.r (save_out), n.x1..x4: a layer of
--           lunet.nn.functional, not a method: the layer's forward hands its
--           result to lunet.autograd.recorder(name) (see record.lua)
-- The entries are in formulas/ by family (pointwise, linalg, shape,
-- reduce, scan, nn, act_loss), each a function of def(name, kind, formula). Backward runs with
-- grad mode off, so the tensor ops there are plain ones; S.raw holds the
-- methods as they were before recording was added. With create_graph they
-- run recorded instead (lunet.autograd.double: grad mode on, S.raw the
-- recording methods): a formula that calls a C kernel needs a double there.

local D = {}   -- D[i] the names in install order, D[name] the formula
local function def(name, kind, f)
  f = f or {}
  f.kind = kind
  D[#D + 1] = name
  D[name] = f
  return f
end
local function unary(name, backward, save) def(name, 'unary', { backward = backward, save_in = save == 'in', save_out = save == 'out' }) end

for _, family in ipairs({ 'pointwise', 'linalg', 'shape', 'index', 'reduce', 'scan', 'nn', 'act_loss' }) do
  require('lunet.autograd.formulas.' .. family)(def, unary)
end

return D
