-- lunet.nn.backward_hooks: a module's full backward hooks and backward
-- pre-hooks, as torch's BackwardHook. Each call of a hooked module (in grad
-- mode) passes its inputs that require grad, and then its output, through
-- an identity node of the graph: in backward the output's node sees the
-- gradients wrt the outputs (the pre-hooks run there and may replace them),
-- the inputs' node those wrt the inputs (the full hooks run there, with the
-- outputs' gradients of the same call, and may replace them). With no input
-- requiring grad the full hooks run at the output's node, grad_input all nil.
-- Several tensors go through one node as one packed (concatenated) tensor,
-- so that a hook sees all their gradients at once (they must then share a
-- dtype and device).
local T = require 'lunet.tensor'
local G = require 'lunet.autograd.graph'
local S = require 'lunet.autograd.mode'
local core = require 'lunet.core'
local is_tensor, is_table, typename = T.is_tensor, core.is_table, core.typename

local B = {}

local function shape_str(t) return '{' .. table.concat(t:size(), ',') .. '}' end

-- what a hook returned, checked: nil, a list of n (positions of orig), or a
-- tensor when n is 1; each entry nil or a tensor like the gradient it replaces
local function checked(fname, what, r, orig, n)
  if is_tensor(r) and n == 1 then r = { r } end
  if not is_table(r) then error(('%s: the hook returned a %s; expected nil or a list of %s'):format(fname, typename(r), what), 0) end
  if table.maxn(r) > n then
    error(('%s: the hook returned %d %s, expected %d'):format(fname, table.maxn(r), what, n), 0)
  end
  for i = 1, n do
    local x, o = r[i], orig[i]
    if x ~= nil then
      if not is_tensor(x) then error(('%s: the hook returned a %s as %s %d; expected a tensor or nil'):format(fname, typename(x), what, i), 0) end
      if o == nil then error(('%s: the hook returned a gradient as %s %d, which has none'):format(fname, what, i), 0) end
      if not G.same_shape(x, o) or x.p.dtype_id ~= o.p.dtype_id or x.p.device_id ~= o.p.device_id then
        error(('%s: the hook returned a %s %s tensor on %s as %s %d; the gradient it replaces is %s %s on %s'):format(fname,
          shape_str(x), x.dtype, x.device, what, i, shape_str(o), o.dtype, o.device), 0)
      end
    end
  end
  return r
end

-- xs (tensors that require grad) again, through one node whose backward
-- hands the list of their gradients to on_grads, which returns what goes on.
-- The hooks may keep the tensors they see: the node has (empty) hooks, so
-- that the engine never frees its gradient early, and hands on aliases
-- (the engine may free those: their storage stays with the hook's).
local function aliases(r, k)
  local res = {}
  for i = 1, k do res[i] = r[i] and r[i]:detach() end
  return res
end
local function identity(xs, on_grads, name)
  local x, node = xs[1], nil
  if #xs == 1 then
    node = G.node(function(_, g) return aliases(on_grads({ g }), 1) end, name, G.edge(x))
    node.ni, node.hooks = 1, {}
    return { G.attach(x:detach(), node) }
  end
  local flat, sizes, nums = {}, {}, {}
  for i, y in ipairs(xs) do
    if y.p.dtype_id ~= x.p.dtype_id or y.p.device_id ~= x.p.device_id then
      require('lunet.options').raise(('%s: the tensors of a call that require grad must share a dtype and device' ..
        ' for its backward hooks, got %s on %s and %s on %s'):format(name, x.dtype, x.device, y.dtype, y.device))
    end
    flat[i], sizes[i], nums[i] = y:detach():reshape(-1), y:size(), y:numel()
  end
  -- (the node's edges are the tensors' own: a nil gradient gives them none)
  local packed = S.no_grad(require('lunet').cat, flat, 1)
  local k = #xs
  node = G.node(function(_, g)
    local gs, off = {}, 1
    for i = 1, k do gs[i] = g:narrow(1, off, nums[i]):view(sizes[i]); off = off + nums[i] end
    return aliases(on_grads(gs), k)
  end, name)
  for i = 1, k do node[i] = G.edge(xs[i]) end
  node.ni, node.hooks = k, {}
  local p, out, off = G.attach(packed:detach(), node), {}, 1
  for i = 1, #xs do out[i] = p:narrow(1, off, nums[i]):view(sizes[i]); off = off + nums[i] end
  return out
end

-- the tensors of list (1..n) that require grad, and their positions
local function needing(list, n)
  local idx, xs = {}, {}
  for i = 1, n do
    local x = list[i]
    if is_tensor(x) and x.p.grad_flag ~= 0 then idx[#idx + 1], xs[#xs + 1] = i, x end
  end
  return idx, xs
end

-- before forward: the inputs (1..n) that require grad wrapped when there are
-- full hooks. Returns the call's state for B.output, and the inputs
function B.inputs(m, bw, bwpre, inputs, n)
  local st = { m = m, bw = bw, bwpre = bwpre, n = n }
  if #bw == 0 then return st, inputs end
  local idx, xs = needing(inputs, n)
  if #xs == 0 then return st, inputs end
  st.wrapped = true
  local ys = identity(xs, function(gs)
    local gi = {}
    for k = 1, #idx do gi[idx[k]] = gs[k] end
    for i = 1, #bw do
      local r = bw[i].fn(m, gi, st.grad_output or {})
      if r ~= nil then gi = checked('register_full_backward_hook', 'grad_input', r, gi, n) end
    end
    local res = {}
    for k = 1, #idx do res[k] = gi[idx[k]] end
    return res
  end, m.__name .. ' BackwardHook')
  local wrapped = {}
  for i = 1, n do wrapped[i] = inputs[i] end
  for k = 1, #idx do wrapped[idx[k]] = ys[k] end
  return st, wrapped
end

-- after forward (and the forward hooks): the output through its node
function B.output(st, out)
  local single = is_tensor(out)
  if not single and not is_table(out) then return out end
  local list = single and { out } or out
  local n = single and 1 or #out
  local idx, ys = needing(list, n)
  if #ys == 0 then return out end
  local m, bw, bwpre = st.m, st.bw, st.bwpre
  local zs = identity(ys, function(gs)
    local go = {}
    for k = 1, #idx do go[idx[k]] = gs[k] end
    for i = 1, #bwpre do
      local r = bwpre[i].fn(m, go)
      if r ~= nil then go = checked('register_full_backward_pre_hook', 'grad_output', r, go, n) end
    end
    st.grad_output = go
    if not st.wrapped then   -- (no input requires grad: the full hooks run here)
      for i = 1, #bw do
        local r = bw[i].fn(m, {}, go)
        if r ~= nil and (not is_table(r) or next(r) ~= nil) then
          error('register_full_backward_hook: the hook of a module whose inputs need no gradient must return nil (or a list of nil)', 0)
        end
      end
    end
    local res = {}
    for k = 1, #idx do res[k] = go[idx[k]] end
    return res
  end, m.__name .. ' BackwardHook')
  if single then return zs[1] end
  local res = {}
  for i = 1, n do res[i] = list[i] end
  for k = 1, #idx do res[idx[k]] = zs[k] end
  return res
end

return B
