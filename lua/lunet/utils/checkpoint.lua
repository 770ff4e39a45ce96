-- lunet.utils.checkpoint(fn, ...): activation checkpointing, as
-- torch.utils.checkpoint.checkpoint with use_reentrant = False and
-- preserve_rng_state = True.
--   local y = lunet.utils.checkpoint(block, x)   -- block's activations are not kept
-- fn(...) runs once in forward, and only its arguments and outputs are kept,
-- with the RNG state (seed, offset) it started from. The backward of its
-- outputs runs fn again, recording, from that RNG state (a dropout draws the
-- same mask: Pipeline's Stage:recompute does the same), and backpropagates
-- through it: the gradients are those of fn(...) run plainly. Parameters fn
-- uses get theirs even when no argument requires grad. fn returns tensors
-- (several values, or a list of them) and other values, passed on as they are.
-- As in torch, fn runs twice (a training BatchNorm updates its running stats
-- twice), and a tensor with a history fn uses must be passed as an argument
-- (one it captures that requires grad must be a leaf: a parameter).
local T = require 'lunet.tensor'
local G = require 'lunet.autograd.graph'
local S = require 'lunet.autograd.mode'
local autograd = require 'lunet.autograd'
local core = require 'lunet.core'
local options = require 'lunet.options'
local is_tensor, is_table, typename, record = T.is_tensor, core.is_table, core.typename, T.record
local version = core.C.ln_storage_version

local function pack(...) return { n = select('#', ...), ... } end

local function call(fn, ...) return fn(...) end

local function callable(f)
  if type(f) == 'function' then return true end
  local mt = getmetatable(f)
  return is_table(f) and mt ~= nil and mt.__call ~= nil
end

-- the arguments for one run: each tensor a fresh leaf on its storage (so the
-- graph recorded stops there), requiring grad as the original does
-- (need[i], when args are the saved aliases, which have no record)
local function leaves_for(args, n, need)
  local run = {}
  for i = 1, n do
    local a = args[i]
    if is_tensor(a) then
      local d = a:detach()
      if need and need[i] or not need and a.requires_grad then d:requires_grad_(true) end
      run[i] = d
    else run[i] = a end
  end
  return run
end

-- the tensors among fn's results (vals, nv), as slots {value index, entry
-- index or false}: a result that is a list of tensors counts each entry
local function slots_of(vals, nv)
  local slots = {}
  for i = 1, nv do
    local v = vals[i]
    if is_tensor(v) then slots[#slots + 1] = { i, false }
    elseif is_table(v) and getmetatable(v) == nil then
      for j = 1, #v do if is_tensor(v[j]) then slots[#slots + 1] = { i, j } end end
    end
  end
  return slots
end
local function get(vals, s) local v = vals[s[1]]; if s[2] then return v[s[2]] end return v end

-- the leaves (parameters) the graph of outs reaches, besides the run's arguments
local function captured(outs, own)
  local seen, stack, found, list = {}, {}, {}, {}
  local function edge(e)
    if is_table(e) then
      if not seen[e] then seen[e] = true; stack[#stack + 1] = e end
    elseif e and not own[e] and not found[e] then found[e] = true; list[#list + 1] = e end
  end
  for _, o in ipairs(outs) do
    if o.requires_grad then
      local r = record(o)
      edge(r and r.grad_fn or o)
    end
  end
  while #stack > 0 do
    local n = table.remove(stack)
    for i = 1, n.ni or 3 do edge(n[i]) end
  end
  return list
end

-- the node's backward: fn again from the saved RNG state, recording, then a
-- backward of its outputs (the leaves it reaches get their .grad there); the
-- arguments' gradients go on through the node's edges
local function backward(n, g)
  local st = n.ck
  for i = 1, st.n do
    local a = st.args[i]
    if is_tensor(a) and version(a.p) ~= a._version then
      error(('checkpoint: argument %d ({%s} %s) was changed in place after the checkpoint, so its recomputation' ..
        ' would differ; change a clone() instead'):format(i, table.concat(a:size(), ','), a.dtype), 0)
    end
  end
  local lunet = require 'lunet'
  local run = leaves_for(st.args, st.n, st.need)
  local seed, offset = lunet.rng_state()
  lunet.set_rng_state(st.seed, st.offset)
  local res = pack(pcall(autograd.enable_grad, call, st.fn, unpack(run, 1, st.n)))
  lunet.set_rng_state(seed, offset)
  if not res[1] then error(res[2], 0) end
  local vals = { unpack(res, 2, res.n) }
  local gs = st.split(g)
  local roots, seeds = {}, {}
  for k, s in ipairs(st.slots) do
    local y = get(vals, s)
    if is_tensor(y) and y.requires_grad and gs[k] then roots[#roots + 1], seeds[#seeds + 1] = y, gs[k] end
  end
  if #roots > 0 then
    -- (the callbacks queued by the outer backward wait for it: the inner one runs only its own)
    local cbs = S.callbacks
    S.callbacks = {}
    local ok, err = pcall(autograd.backward, roots, seeds)
    S.callbacks = cbs
    if not ok then error(err, 0) end
  end
  local out = {}
  for k, i in ipairs(st.idx) do out[k] = run[i].grad end
  return out
end

-- outs[k] for k in need (detached) leave through node; st.split(g) gives
-- the gradient of each by k. Several go through as one packed tensor (as a
-- module's backward hooks do), so that one node sees all their gradients.
local function through(node, st, outs, need)
  if #need == 1 then
    local k = need[1]
    outs[k] = G.attach(outs[k], node)
    st.split = function(g) return { [k] = g } end
    return
  end
  local x = outs[need[1]]
  local flat, sizes, nums = {}, {}, {}
  for j, k in ipairs(need) do
    local y = outs[k]
    if y.p.dtype_id ~= x.p.dtype_id or y.p.device_id ~= x.p.device_id then
      options.fail('checkpoint', ('the outputs that require grad must share a dtype and device, got %s on %s and %s on %s')
        :format(x.dtype, x.device, y.dtype, y.device))
    end
    flat[j], sizes[j], nums[j] = y:reshape(-1), y:size(), y:numel()
  end
  local packed = G.attach(autograd.no_grad(T.Tensor.cat, flat, 1), node)
  local off = 1
  for j, k in ipairs(need) do outs[k] = packed:narrow(1, off, nums[j]):view(sizes[j]); off = off + nums[j] end
  st.split = function(g)
    local gs, o = {}, 1
    for j, k in ipairs(need) do gs[k] = g:narrow(1, o, nums[j]):view(sizes[j]); o = o + nums[j] end
    return gs
  end
end

local function checkpoint(fn, ...)
  if not callable(fn) then options.fail('checkpoint', 'fn must be a function or a module, got ' .. typename(fn)) end
  if not S.grad_enabled then return fn(...) end
  local n = select('#', ...)
  local args = { ... }
  local lunet = require 'lunet'
  local seed, offset = lunet.rng_state()
  local run = leaves_for(args, n)
  local res = pack(fn(unpack(run, 1, n)))
  local vals, nv = { unpack(res, 1, res.n) }, res.n
  local slots = slots_of(vals, nv)
  local outs, own = {}, {}
  for k, s in ipairs(slots) do outs[k] = get(vals, s) end
  for i = 1, n do if is_tensor(run[i]) then own[run[i]] = true end end
  local params = captured(outs, own)
  local st = { fn = fn, n = n, args = {}, idx = {}, need = {}, seed = seed, offset = offset, slots = slots }
  local node = G.node(backward, 'CheckpointFunction')
  local ni = 0
  for i = 1, n do
    local a = args[i]
    st.args[i] = is_tensor(a) and G.saved(a) or a
    if is_tensor(a) and a.requires_grad then ni = ni + 1; node[ni] = G.edge(a); st.idx[ni] = i; st.need[i] = true end
  end
  for _, p in ipairs(params) do ni = ni + 1; node[ni] = p end
  -- the outputs that require grad leave through the node; others are detached
  local need = {}
  for k, o in ipairs(outs) do
    outs[k] = o:detach()
    if o.requires_grad then need[#need + 1] = k end
  end
  if ni > 0 and #need > 0 then
    node.ni, node.ck = ni, st
    through(node, st, outs, need)
  end
  -- fn's results with the outputs put back (a list result copied)
  local copied = {}
  for k, s in ipairs(slots) do
    if s[2] then
      local i = s[1]
      if not copied[i] then
        local v, c = vals[i], {}
        for j = 1, table.maxn(v) do c[j] = v[j] end
        copied[i], vals[i] = true, c
      end
      vals[i][s[2]] = outs[k]
    else vals[s[1]] = outs[k] end
  end
  return unpack(vals, 1, nv)
end

return checkpoint
