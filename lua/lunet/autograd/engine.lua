-- lunet.autograd.engine: accumulation into .grad, and backward: the graph
-- walk from one root (t:backward) or several (autograd.backward), each node
-- run once all its consumers have handed it their gradients (running their
-- hooks, lunet.autograd.hooks, and anomaly mode's checks on the way).
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local C = core.C
local wrap, free_now, record, is_tensor, same_shape = T.wrap, T.free_now, T.record, T.is_tensor, G.same_shape
local check_saved = G.check_saved
local run_hooks = require('lunet.autograd.hooks').run
local eager = require 'lunet.nn.eager'
local table_new = require 'table.new'

local E = {}

S.callbacks = S.callbacks or {}

-- install(Tensor, raw): the methods on a Tensor table; raw holds its methods
-- as they were before recording (accumulation adds with the plain add_)
function E.install(Tensor, raw)
  -- fresh: g was made for this leaf alone (no other holder), so the leaf may keep it.
  -- Returns true when that same g (fresh, not a cast, move or reshape of it)
  -- was added into the leaf's existing .grad: the caller may then free it
  local function accumulate_leaf(x, g, fresh)
    local given = fresh and g
    if g.p.dtype_id ~= x.p.dtype_id then g = g:to(core.dtypes[x.p.dtype_id]); fresh = true end
    if g.p.device_id ~= x.p.device_id then g = g:to(core.device_name(x.p.device_id)); fresh = true end
    if not same_shape(g, x) then g = g:reshape(x:size()) end
    local rec = record(x, true)
    if rec.hooks then g = run_hooks(rec.hooks, g); fresh = false; given = false end   -- a hook saw g
    local old = rec.grad
    local added = false
    if S.creating then
      -- (create_graph: .grad keeps the gradient's graph, summed out of place as torch does)
      if old then rec.grad = old + g elseif fresh then rec.grad = g else rec.grad = g:clone() end
    elseif old then
      raw.add_(old, g)   -- the leaf owns its .grad
      added = rawequal(g, given) and not g._record
    elseif fresh and C.ln_is_contiguous(g.p) == 1 then
      rec.grad = g
    else
      -- a contiguous copy the leaf owns (g may be shared or a view)
      rec.grad = raw.clone(g)
    end
    local post = rec.post_hooks
    if post then for i = 1, #post do post[i](x) end end
    return added
  end

  -- Gradients made inside a backward are freed as soon as the last node that
  -- got them has run, so their storage goes back to the allocator's cache
  -- while still in the CPU's cache and the next gradient of its size reuses it
  -- (left to the collector, every memory-bound op of a training step wrote
  -- cold memory: LeNet-5's ReLUs 2-5x slower). handed[t] counts t's holders:
  -- +1 per node it was handed to (pending), -1 when that node has run or has
  -- it summed into a new tensor; a leaf's gradient and the caller's grad count
  -- 2 for good, as do gradients seen by hooks or in a retained or
  -- anomaly-checked graph (not dropped). With the CPU devices' streams too
  -- (free_early): a queued task holds its tensors' storages (ln_launch's keep),
  -- never their headers, so the storage stays until the task has run.

  local function drop(handed, t, free_early)
    local c = handed[t]
    if not c then return end
    c = c - 1
    handed[t] = c
    if c == 0 and free_early and not t._record then free_now(t) end
  end

  -- A node's saved tensors (G.saved's aliases: nothing else holds them)
  -- freed with the node, so that the activations they kept go back to the
  -- device's cache now rather than when Lua collects them (lunet.nn.eager;
  -- only where gradients are freed early too: not under create_graph, whose
  -- new graph may be built on them, nor with CUDA devices)
  -- (G.SAVED and a layer's arguments: conv's blocked input, pooling indices, batch statistics)
  local SAVED = { 'x1', 'x2', 'x3', 'x4' }
  for k = 1, #G.SAVED do SAVED[#SAVED + 1] = G.SAVED[k] end
  local function free_saved(n)
    for k = 1, #SAVED do
      local t = n[SAVED[k]]
      if type(t) == 'table' and rawget(t, '_version') and t.p ~= nil then free_now(t) end
    end
  end

  -- The graph from root down, once: each node runs when every consumer has
  -- handed it its gradient. A plain function called through pcall (a closure
  -- made per backward would abort the JIT trace of the training loop);
  -- `current` names the node running, for the error message.
  local table_clear = require 'table.clear'
  local current
  -- a node's saved tensors, hooks and marks freed once it has run (unless
  -- the graph is retained); the edges stay so that a second call can tell
  -- (table.clear and the few fields put back: a pairs() loop is not
  -- compiled by LuaJIT and cost a third of the walk's time)
  local function release(n, free_early)
    if free_early and eager.enabled then free_saved(n) end
    if n.ni then
      for k in pairs(n) do
        if type(k) ~= 'number' and k ~= 'name' and k ~= 'fn' and k ~= 'ni' then n[k] = nil end
      end
    else
      local e1, e2, e3, name, fn = n[1], n[2], n[3], n.name, n.fn
      table_clear(n)
      n[1], n[2], n[3], n.name, n.fn = e1, e2, e3, name, fn
    end
    n.freed = true
  end

  -- Deferred weight gradients (a zero-bubble pipeline's W, autograd.backward's
  -- defer): the walk leaves out the edges to the leaves in defer (a set of
  -- tensors) and keeps each such node, its gradient and those edges in
  -- `later`, its saved tensors alive; run_weights computes them afterwards,
  -- in the order the walk reached the nodes, and then drops the node's hold
  -- on its gradient as the walk would have (handed: the walk's counts; nil
  -- where the walk keeps every gradient)
  local function take_deferred(n, g, defer, later, handed)
    local mask
    for i = 1, n.ni or 3 do
      local e = n[i]
      if e and not is_table(e) and defer[e] then
        mask = mask or {}
        mask[i] = e
        n[i] = nil
      end
    end
    if mask then later[#later + 1] = { n, g, mask, handed } end
    return mask
  end

  local function has_edges(n)
    for i = 1, n.ni or 3 do if n[i] then return true end end
    return false
  end

  -- autograd.grad (capture = { leaves = {t = i}, nodes = {node = i}, out = {} }):
  -- the gradients reaching its inputs go to capture.out, none into .grad; a
  -- node runs only when it leads to one of them (below[n])
  local function capture_below(root, deps, capture)
    local d2, order = {}, { root }
    for k, v in pairs(deps) do d2[k] = v end
    local i = 1
    while i <= #order do
      local n = order[i]; i = i + 1
      for j = 1, n.ni or 3 do
        local e = n[j]
        if e and is_table(e) then d2[e] = d2[e] - 1; if d2[e] == 0 then order[#order + 1] = e end end
      end
    end
    local below, leaves, cnodes = {}, capture.leaves, capture.nodes
    for k = #order, 1, -1 do
      local n, b = order[k], false
      for j = 1, n.ni or 3 do
        local e = n[j]
        if e then
          if is_table(e) then b = b or below[e] or cnodes[e] ~= nil elseif leaves[e] then b = true end
        end
      end
      below[n] = b
    end
    return below
  end

  local function captured(capture, i, g)
    local x, out = capture.inputs[i], capture.out
    if not same_shape(g, x) then g = g:reshape(x:size()) end
    out[i] = out[i] and out[i] + g or g
  end

  local D   -- (lunet.autograd.double, loaded on the first create_graph)

  local function run_graph(root, grad, retain, defer, later, create, capture)
    -- count consumers of each node reachable from root
    -- (the tables are presized from the node count: grown key by key they
    -- rehashed ~15 times a backward; sized for the largest graph, they made
    -- small graphs' backwards leave kilobytes of garbage each)
    local deps = table_new(0, 8)
    deps[root] = 0
    local stack, sp, nodes = table_new(8, 0), 1, 1
    stack[1] = root
    while sp > 0 do
      local n = stack[sp]; stack[sp] = nil; sp = sp - 1
      check_saved(n)   -- (every node before any runs: an error leaves no gradient half summed)
      for i = 1, n.ni or 3 do
        local e = n[i]
        if e and is_table(e) then
          local d = deps[e]
          if d == nil then
            deps[e] = 1
            nodes = nodes + 1
            if e.freed then error('backward: trying to backward through the graph a second time; pass {retain_graph = true} the first time', 0) end
            sp = sp + 1; stack[sp] = e
          else deps[e] = d + 1 end
        end
      end
    end
    local pending = table_new(0, nodes)
    pending[root] = grad
    local handed = table_new(0, 2 * nodes)   -- holders of each gradient (drop)
    handed[grad] = 2
    local held = root.grads   -- (autograd.backward: every caller's gradient counts 2 too)
    if held then for i = 1, root.ni do handed[held[i]] = 2 end end
    local free_early = C.ln_cuda_device_count() == 0 and not S.anomaly_hook and not create and not capture
    local below = capture and capture_below(root, deps, capture)
    local run = create and D.run or nil
    -- ready nodes run first in, first out: independent branches (the
    -- replicas of DataParallel) advance together, so each one's gradients
    -- (and the all-reduces they start) reach its device's stream early
    local ready, head, rp = table_new(nodes, 0), 1, 1
    local summed, nsummed = table_new(4, 0), 0   -- this node's gradients summed into a pending one
    ready[1] = root
    while head <= rp do
      local n = ready[head]; ready[head] = nil; head = head + 1
      local g = pending[n]
      pending[n] = nil
      local gs1, gs2, gs3
      local added1, added2, added3 = false, false, false   -- gs_i summed into a leaf's .grad
      local ni = n.ni
      local mask
      if g then
        current = n.name
        if n.hooks then g = run_hooks(n.hooks, g) end
        if capture then
          local ci = capture.nodes[n]
          if ci then captured(capture, ci, g) end
          if below[n] then
            if run then gs1, gs2, gs3 = run(n, g) else gs1, gs2, gs3 = n.fn(n, g) end
          end
        else
          if n.retain and n.retain[1] then accumulate_leaf(n.retain[1], g) end
          if defer then
            local keeps = retain or n.hooks or n.retain or S.anomaly_hook or not free_early
            mask = take_deferred(n, g, defer, later, not keeps and handed or nil)
          end
          -- (a node whose edges all lead to deferred leaves has nothing to do now)
          if not mask or has_edges(n) then
            if run then gs1, gs2, gs3 = run(n, g) else gs1, gs2, gs3 = n.fn(n, g) end
          end
        end
        if S.anomaly_hook then S.anomaly_hook('backward', n, gs1, gs2, gs3) end
      end
      for i = 1, ni or 3 do
        local e = n[i]
        if e then
          local gi
          if ni then gi = gs1 and gs1[i] else gi = i == 1 and gs1 or i == 2 and gs2 or gs3 end
          if is_table(e) then
            if gi then
              local old = pending[e]
              if old then
                local sum = old + gi
                pending[e] = sum
                handed[sum] = 1
                drop(handed, old, free_early)   -- e holds the sum instead
                nsummed = nsummed + 1
                summed[nsummed] = gi
              else
                pending[e] = gi
                handed[gi] = (handed[gi] or 0) + 1
              end
            end
            local d = deps[e] - 1
            deps[e] = d
            if d == 0 then rp = rp + 1; ready[rp] = e end
          elseif gi and capture then
            local ci = capture.leaves[e]
            if ci then
              local rec = record(e)   -- (the leaf's hooks see its gradient, as torch's)
              if rec and rec.hooks then gi = run_hooks(rec.hooks, gi) end
              captured(capture, ci, gi)
            end
          elseif gi then
            -- fresh unless it shares the incoming gradient's storage (a
            -- pass-through or a view of it) or was returned for another input too
            local fresh = C.ln_same_storage(gi.p, g.p) == 0
            if ni then   -- (a list node's gradients: none shared with another of its list)
              for j = 1, ni do
                local o = gs1[j]
                if fresh and j ~= i and o and C.ln_same_storage(gi.p, o.p) == 1 then fresh = false end
              end
            else
              if fresh and i > 1 and gs1 and C.ln_same_storage(gi.p, gs1.p) == 1 then fresh = false end
              if fresh and i > 2 and gs2 and C.ln_same_storage(gi.p, gs2.p) == 1 then fresh = false end
            end
            handed[gi] = (handed[gi] or 0) + 2
            if accumulate_leaf(e, gi, fresh) and free_early then
              if ni then nsummed = nsummed + 1; summed[nsummed] = gi   -- (freed below, as added_i)
              elseif i == 1 then added1 = true elseif i == 2 then added2 = true else added3 = true end
            end
          end
        end
      end
      -- a gradient summed into another one's pending sum (a branch point:
      -- a residual block's input) is garbage now unless something else holds
      -- it (handed: another edge or a leaf; or it is g passed through)
      for k = 1, nsummed do
        local t = summed[k]
        summed[k] = nil
        -- (a list node's fresh gradient summed into a leaf's .grad counts 2 in handed: free too)
        local leafsum = ni and handed[t] == 2
        if free_early and (handed[t] == nil or leafsum) and not rawequal(t, g) and not t._record and t.p ~= nil then
          free_now(t)
        end
      end
      nsummed = 0
      -- a fresh weight gradient summed into .grad is garbage now: its storage
      -- goes back to the cache at once (after the queued add) instead of at
      -- the next collection, unless the node returned the same tensor twice
      if added1 and not rawequal(gs1, gs2) and not rawequal(gs1, gs3) then free_now(gs1) end
      if added2 and not rawequal(gs2, gs1) and not rawequal(gs2, gs3) then free_now(gs2) end
      if added3 and not rawequal(gs3, gs1) and not rawequal(gs3, gs2) then free_now(gs3) end
      -- n is done with g (a deferred node keeps it until run_weights)
      if mask then
        for i = 1, ni or 3 do if mask[i] then n[i] = mask[i] end end
      elseif g and not retain and not n.hooks and not n.retain and not S.anomaly_hook then
        drop(handed, g, free_early)
      end
      -- free what the node saved, its hooks and retain_grad mark (a hook that
      -- captures its own tensor is a cycle through that tensor's record)
      if not retain and not mask then release(n, free_early) end
    end
  end

  -- the deferred weight gradients of later (take_deferred), each node run
  -- again with only its deferred edges, into the leaves' .grad
  local function run_weights(later, retain)
    local free_early = C.ln_cuda_device_count() == 0 and not S.anomaly_hook
    for k = 1, #later do
      local entry = later[k]
      later[k] = false
      local n, g, mask, handed = entry[1], entry[2], entry[3], entry[4]
      local ni = n.ni
      -- (the node's edges cut to the deferred ones while it runs, put back after)
      local e1, e2, e3, saved = n[1], n[2], n[3], nil
      if ni then
        saved = {}
        for i = 1, ni do saved[i] = n[i]; n[i] = mask[i] end
      else n[1], n[2], n[3] = mask[1], mask[2], mask[3] end
      current = n.name
      local ok, gs1, gs2, gs3 = pcall(n.fn, n, g)
      if ni then for i = 1, ni do n[i] = saved[i] end else n[1], n[2], n[3] = e1, e2, e3 end
      if not ok then error(gs1, 0) end
      if S.anomaly_hook then S.anomaly_hook('backward', n, gs1, gs2, gs3) end
      -- (as run_graph's leaves: a fresh gradient may become .grad, or is
      -- freed once summed into it)
      for i = 1, ni or 3 do
        local e = mask[i]
        local gi = nil
        if not e then -- (an edge B already took)
        elseif ni then gi = gs1 and gs1[i] else gi = i == 1 and gs1 or i == 2 and gs2 or gs3 end
        if gi then
          -- (fresh unless it shares the incoming gradient's storage or
          -- another gradient's the node returned, as in run_graph)
          local fresh = C.ln_same_storage(gi.p, g.p) == 0
          for j = 1, ni or 3 do
            local o
            if ni then o = gs1[j] elseif j == 1 then o = gs1 elseif j == 2 then o = gs2 else o = gs3 end
            if fresh and j ~= i and o and C.ln_same_storage(gi.p, o.p) == 1 then fresh = false end
          end
          if accumulate_leaf(e, gi, fresh) and free_early and fresh then free_now(gi) end
        end
      end
      if handed then drop(handed, g, free_early) end
      if not retain then release(n, free_early) end
    end
  end

  -- runs the graph from root (its gradient grad), then the callbacks queued
  -- meanwhile; raises the first error at the caller's caller
  -- (create: create_graph, the backward recorded: grad mode on, S.raw the
  -- recording methods, lunet.autograd.double running each node)
  local function run_backward(root, grad, retain, defer, later, create, capture)
    local old_enabled, old_creating, old_raw = S.grad_enabled, S.creating, S.raw
    S.grad_enabled = create or false
    S.creating = create or false
    if create then
      D = D or require 'lunet.autograd.double'
      S.raw = Tensor
    end
    local outer = current
    current = nil
    local ok, err
    if root then ok, err = pcall(run_graph, root, grad, retain, defer, later, create, capture)
    else ok, err = pcall(run_weights, later, retain) end
    S.grad_enabled, S.creating, S.raw = old_enabled, old_creating, old_raw
    if not ok and current then
      err = ('backward of %s: %s'):format(current, tostring(err):gsub('^[^:\n]*:%d+: ', '', 1))
    end
    current = outer   -- (a backward run from a hook inside another)
    local cbs = S.callbacks
    if cbs[1] then
      -- callbacks queued during this backward (autograd.queue_callback) run once it
      -- ends, with ok = false when it failed; their own errors are raised too
      S.callbacks = {}
      for i = 1, #cbs do
        local ok2, err2 = pcall(cbs[i], ok)
        if ok and not ok2 then ok, err = false, err2 end
      end
    end
    if not ok then error(err, 3) end
  end

  -- t:backward([grad], [opts]) with opts.retain_graph
  local BACKWARD_OPTS = { retain_graph = 'boolean', create_graph = 'boolean' }
  function Tensor.backward(self, grad, opts)
    if is_table(grad) then opts, grad = grad, nil end
    if opts ~= nil then require('lunet.options').check('backward', opts, BACKWARD_OPTS) end
    if T.need_tensor('backward', self, 'self').p.grad_flag == 0 then
      error('backward: tensor does not require grad and has no grad_fn', 2)
    end
    if grad == nil then
      if self:numel() ~= 1 then
        error(('backward: grad can be implicitly created only for a single-element output, got %d elements'):format(self:numel()), 2)
      end
      grad = wrap(C.ln_empty(self.p.ndim, self.p.shape, self.p.dtype_id, self.p.device_id))
      C.ln_fill_(grad.p, 1)
    else
      if not is_tensor(grad) then error('backward: grad must be a tensor', 2) end
      if not same_shape(grad, self) then
        error(('backward: grad has shape {%s}, output has {%s}'):format(table.concat(grad:size(), ','),
          table.concat(self:size(), ',')), 2)
      end
    end
    local create = opts and opts.create_graph or false
    local retain = opts and opts.retain_graph
    if retain == nil then retain = create end
    local rec = record(self)
    local root = rec and rec.grad_fn
    if root then root = G.check_current(self, rec, 'backward') end
    if not root then
      local ok, err = pcall(accumulate_leaf, self, grad)
      if not ok then error('backward: ' .. tostring(err), 2) end
      return
    end
    if root.freed then
      error('backward: trying to backward through the graph a second time; pass {retain_graph = true} the first time', 2)
    end
    run_backward(root, grad, retain, nil, nil, create)
  end

  -- autograd.queue_callback(fn): fn(ok) runs when the backward in progress ends (as
  -- torch's Variable._execution_engine.queue_callback; DataParallel launches
  -- its remaining all-reduces from there)
  S.callbacks = S.callbacks or {}
  function S.queue_callback(fn) S.callbacks[#S.callbacks + 1] = fn end

  -- lunet.autograd.backward(tensors, grads[, opts]): one backward from several
  -- roots at once (torch.autograd.backward): the sum of tensors[i] * grads[i]
  -- differentiated, each graph node run once, after all its consumers. grads[i]
  -- (a tensor of tensors[i]'s shape, on its device) may be nil for a
  -- single-element tensor (1). Roots on different devices need no gradient from
  -- one another: DataParallel:forward_loss starts every replica's backward this
  -- way, so that no device waits for another before its last bucket.
  -- With opts.defer (a list of leaf tensors, a model's parameters): their
  -- gradients are left out of this pass and the call returns an
  -- autograd.Deferred, whose run() computes and accumulates them later (a
  -- zero-bubble pipeline's W action: the input gradient the previous stage
  -- waits for goes first). Until then the graph's nodes that need them keep
  -- their saved tensors.
  local Deferred = { __name = 'autograd.Deferred' }
  Deferred.__index = Deferred
  function Deferred:run()
    if self.done then error('autograd.Deferred: run() twice: the weight gradients were already computed', 2) end
    self.done = true
    if #self.later > 0 then run_backward(nil, nil, self.retain, nil, self.later) end
  end
  function Deferred:__tostring()
    return ('autograd.Deferred: %d nodes\' weight gradients%s'):format(#self.later, self.done and ', computed' or '')
  end
  local function defer_set(list)
    local set = {}
    for i = 1, #list do
      if not is_tensor(list[i]) then error(('autograd.backward: defer[%d] is a %s, not a tensor'):format(i, typename(list[i])), 3) end
      set[list[i]] = true
    end
    return set
  end

  local function roots_fn(n) return n.grads end
  local ROOTS_OPTS = { retain_graph = 'boolean', defer = 'table', create_graph = 'boolean' }
  S.backward = function(tensors, grads, opts)
    if opts ~= nil then require('lunet.options').check('autograd.backward', opts, ROOTS_OPTS) end
    local defer = opts and opts.defer and defer_set(opts.defer)
    if not is_table(tensors) then tensors = { tensors } end
    grads = grads or {}
    if not is_table(grads) then grads = { grads } end
    local m = #tensors
    if m == 0 then error('autograd.backward: expected a non-empty list of tensors', 2) end
    local root = { ni = 0, name = 'autograd.backward', fn = roots_fn, grads = {} }
    for i = 1, m do
      local t, g = tensors[i], grads[i]
      if not is_tensor(t) then error(('autograd.backward: tensors[%d] is a %s, not a tensor'):format(i, typename(t)), 2) end
      if t.p.grad_flag == 0 then error(('autograd.backward: tensors[%d] does not require grad and has no grad_fn'):format(i), 2) end
      if g == nil then
        if t:numel() ~= 1 then
          error(('autograd.backward: grads[%d] can be implicitly created only for a single-element tensor, got %d elements'):format(i, t:numel()), 2)
        end
        g = wrap(C.ln_empty(t.p.ndim, t.p.shape, t.p.dtype_id, t.p.device_id))
        C.ln_fill_(g.p, 1)
      elseif not is_tensor(g) or not same_shape(g, t) or g.p.device_id ~= t.p.device_id or g.p.dtype_id ~= t.p.dtype_id then
        error(('autograd.backward: grads[%d] must be a %s tensor of shape {%s} on %s'):format(i, t.dtype,
          table.concat(t:size(), ','), t.device), 2)
      end
      local rec = record(t)
      local fn = rec and rec.grad_fn
      if fn then fn = G.check_current(t, rec, 'autograd.backward') end
      if not fn then
        local ok, err = pcall(accumulate_leaf, t, g)
        if not ok then error('autograd.backward: ' .. tostring(err), 2) end
      else
        if fn.freed then
          error('autograd.backward: trying to backward through the graph a second time; pass {retain_graph = true} the first time', 2)
        end
        root.ni = root.ni + 1
        root[root.ni] = fn
        root.grads[root.ni] = g
      end
    end
    local later = defer and {} or nil
    local create = opts and opts.create_graph or false
    if create and defer then error('autograd.backward: create_graph and defer cannot be combined', 2) end
    local retain = opts and opts.retain_graph
    if retain == nil then retain = create end
    if root.ni > 0 then run_backward(root, root.grads[1], retain, defer, later, create) end
    if defer then return setmetatable({ later = later, retain = retain }, Deferred) end
  end

  -- lunet.autograd.grad(outputs, inputs[, {grad_outputs, retain_graph,
  -- create_graph = false, allow_unused = false}]): the gradients of the
  -- outputs (a tensor or a list) with respect to the inputs (a tensor or a
  -- list, leaves or not), as a list in the inputs' order (torch's tuple); no
  -- .grad is touched. retain_graph defaults to create_graph. An input the
  -- outputs do not reach is an error, or nil in its slot with allow_unused.
  local GRAD_OPTS = { grad_outputs = 'table|tensor', retain_graph = 'boolean', create_graph = 'boolean', allow_unused = 'boolean' }
  local function list_of(fn, what, v)
    if is_tensor(v) then return { v } end
    if not is_table(v) then error(('%s: %s must be a tensor or a list of tensors, got %s'):format(fn, what, typename(v)), 3) end
    for i = 1, table.maxn(v) do
      if not is_tensor(v[i]) then error(('%s: %s[%d] is a %s, not a tensor'):format(fn, what, i, typename(v[i])), 3) end
    end
    return v
  end
  S.grad = function(outputs, inputs, opts)
    local FN = 'autograd.grad'
    if opts ~= nil then require('lunet.options').check(FN, opts, GRAD_OPTS) end
    opts = opts or {}
    outputs, inputs = list_of(FN, 'outputs', outputs), list_of(FN, 'inputs', inputs)
    if #outputs == 0 then error(FN .. ': expected a non-empty list of outputs', 2) end
    if #inputs == 0 then error(FN .. ': expected a non-empty list of inputs', 2) end
    local grads = opts.grad_outputs
    if is_tensor(grads) then grads = { grads } end
    grads = grads or {}
    local create = opts.create_graph or false
    local retain = opts.retain_graph
    if retain == nil then retain = create end
    local capture = { leaves = {}, nodes = {}, out = {}, inputs = inputs }
    for i, x in ipairs(inputs) do
      if x.p.grad_flag == 0 then error(('%s: inputs[%d] does not require grad'):format(FN, i), 2) end
      local e = G.edge(x)
      if is_table(e) then capture.nodes[e] = i else capture.leaves[e] = i end
    end
    local root = { ni = 0, name = FN, fn = roots_fn, grads = {} }
    for i, t in ipairs(outputs) do
      local g = grads[i]
      if t.p.grad_flag == 0 then error(('%s: outputs[%d] does not require grad and has no grad_fn'):format(FN, i), 2) end
      if g == nil then
        if t:numel() ~= 1 then
          error(('%s: grad can be implicitly created only for a single-element output; pass grad_outputs[%d] for outputs[%d] of %d elements'):format(FN, i, i, t:numel()), 2)
        end
        g = wrap(C.ln_empty(t.p.ndim, t.p.shape, t.p.dtype_id, t.p.device_id))
        C.ln_fill_(g.p, 1)
      elseif not is_tensor(g) or not same_shape(g, t) then
        error(('%s: grad_outputs[%d] must be a tensor of shape {%s}'):format(FN, i, table.concat(t:size(), ',')), 2)
      end
      local e = G.edge(t)
      if is_table(e) and e.freed then
        error(FN .. ': trying to backward through the graph a second time; pass {retain_graph = true} the first time', 2)
      end
      root.ni = root.ni + 1
      root[root.ni], root.grads[root.ni] = e, g
    end
    run_backward(root, root.grads[1], retain, nil, nil, create, capture)
    local out = capture.out
    for i = 1, #inputs do
      if out[i] == nil and not opts.allow_unused then
        error(('%s: inputs[%d] was not used to compute the outputs (pass {allow_unused = true} for a nil gradient)'):format(FN, i), 2)
      end
    end
    return out
  end

end

return E
