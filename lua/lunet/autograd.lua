-- lunet.autograd: reverse-mode automatic differentiation, as in PyTorch.
--
-- Differentiable Tensor methods record: when grad mode is on and an input
-- requires grad, the result gets requires_grad and a grad_fn node (see
-- lunet.autograd.graph); loss:backward() walks the graph and accumulates
-- into the leaves' .grad. Backward math is made of tensor ops (C kernels);
-- nothing is done per element in Lua. The parts:
--   autograd/mode.lua      grad mode (no_grad, enable_grad), the shared state
--   autograd/graph.lua     nodes, edges, saved tensors, broadcast reduction; the
--                          storage versions that refuse a tensor changed in place
--                          since it was saved or since its history was recorded
--   autograd/formulas.lua  the derivative of every op, one entry per op (the
--                          layers of nn.functional in formulas/nn.lua)
--   autograd/record.lua    the recording kinds that turn a formula into a method
--                          (or, for a layer, into its recorder: A.recorder)
--   autograd/leaves.lua    detach, requires_grad_, is_leaf, retain_grad
--   autograd/hooks.lua     gradient hooks (register_hook, post-accumulate hooks)
--   autograd/engine.lua    accumulation into .grad and the backward walk
--   autograd/inplace.lua   in-place ops under autograd
--   autograd/views.lua     in-place ops on views: the base's history rewritten
--                          (PyTorch's CopySlices), stale views made again
-- (lunet.anomaly adds anomaly mode through S.anomaly_hook.)

-- One autograd per process, as the Tensor metatable (lunet.core keeps one
-- per process): a re-require (busted unloads modules between spec files)
-- returns the first instance, which also wraps the reloaded Tensor table.
local registry = debug.getregistry()
if registry.lunet_autograd then
  -- a reloaded lunet.tensor has a new method table (reached through
  -- lunet.cat, lunet.where, ...): wrap it too, with this instance's state
  pcall(require, 'lunet.tensor_reduce')
  pcall(require, 'lunet.tensor_index')
  registry.lunet_autograd._install(require('lunet.tensor').Tensor)
  return registry.lunet_autograd
end

local T = require 'lunet.tensor'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local A = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local formulas = require 'lunet.autograd.formulas'
local kinds = require 'lunet.autograd.record'
local leaves = require 'lunet.autograd.leaves'
local hooks = require 'lunet.autograd.hooks'
local engine = require 'lunet.autograd.engine'
local inplace = require 'lunet.autograd.inplace'

-- the reductions may live in another module: load it first so its methods get wrapped
pcall(require, 'lunet.tensor_reduce')
pcall(require, 'lunet.tensor_index')

-- install(Tensor) makes the methods of a Tensor table record (once per
-- table; a reload of lunet.tensor makes a new one, which tensors then use)
local installed = setmetatable({}, { __mode = 'k' })
local function install(Tensor)
  if installed[Tensor] then return end
  installed[Tensor] = true
  local raw = {}   -- the methods as they were
  if not A.raw then A.raw = raw end
  for _, name in ipairs(formulas) do
    local f, orig = formulas[name], Tensor[name]
    if orig and f.kind ~= 'layer' then
      raw[name] = orig
      Tensor[name] = kinds[f.kind](name, f, orig, Tensor)
    end
  end
  -- the argument form of permute: keep its table even when given as varargs
  local permute = Tensor.permute
  Tensor.permute = function(a, ...)
    if not is_table((...)) then return permute(a, { ... }) end
    return permute(a, ...)
  end
  if Tensor.concat then Tensor.concat = Tensor.cat end
  -- (aliases such as arcsin: the recording method, before inplace wraps their _ forms)
  if T.install_aliases then T.install_aliases(Tensor) end
  leaves.install(Tensor)
  hooks.install(Tensor)
  engine.install(Tensor, raw)
  inplace.install(Tensor, raw)
end
A._install = install
install(T.Tensor)

-- (lunet.autograd.grad, as torch's, is the engine's: autograd/engine.lua;
-- lunet.autograd.functional its vjp, jvp, jacobian, hessian, hvp, vhp)
A.functional = require 'lunet.autograd.functional'

-- recorder(name): the recording function of the layer `name` of the
-- formulas (nn.functional's forwards hand it their results); one per name
local recorders = {}
function A.recorder(name)
  local r = recorders[name]
  if r then return r end
  local f = formulas[name]
  if not f or f.kind ~= 'layer' then error(('autograd.recorder: no layer formula named %s'):format(tostring(name)), 2) end
  r = kinds.layer(name, f)
  recorders[name] = r
  return r
end
A.records = kinds.records
-- inplace_refused(t): 'leaf', 'view' (of a leaf) or nil: why an in-place write to t is refused while recording
A.inplace_refused = inplace.refused

-- the graph's pieces, for code that makes a node no formula describes
A.node, A.edge, A.attach, A.needs, A.saved = G.node, G.edge, G.attach, G.needs, G.saved
A.sum_keep, A.sum_to, A.zeros_as = G.sum_keep, G.sum_to, G.zeros_as
A.enabled = A.is_grad_enabled

registry.lunet_autograd = A
return A
