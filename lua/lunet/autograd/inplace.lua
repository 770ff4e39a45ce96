-- lunet.autograd.inplace: in-place ops under autograd, as in PyTorch.
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local record, is_tensor = T.record, T.is_tensor
local C = require('lunet.core').C
local bump, bump_unrecorded = C.ln_storage_bump, C.ln_storage_bump_unrecorded
local raise = require('lunet.options').raise   -- (at the user's line, also through set_index)
local node, edge, attach, bshape, sum_to, back_cast = G.node, G.edge, G.attach, G.bshape, G.sum_to, G.back_cast
local views = require 'lunet.autograd.views'

local I = {}

-- why writing t in place while recording is refused, as PyTorch refuses it:
-- 'leaf' (a leaf that requires grad), 'view' (a view of one), else nil.
-- (nn.functional's in-place activations ask first, to name themselves.)
function I.refused(t)
  if t.p.grad_flag ~= 0 then
    local r = record(t)
    local fn = r and r.grad_fn
    if not fn then return 'leaf' end
    if fn.view and is_tensor(fn[1]) then return 'view' end   -- (a view made straight from the leaf)
  end
  local base = views.base_of(t)
  if base and base.p.grad_flag ~= 0 then
    local rb = record(base)
    if not (rb and rb.grad_fn) then return 'view' end
  end
  return nil
end
local refused = I.refused

-- install(Tensor, raw): wraps every method of Tensor ending in _ (after all
-- the others are wrapped: it records through their out-of-place forms)
function I.install(Tensor, raw)
  -- ---- in-place ops ------------------------------------------------------------------------
  -- As in PyTorch: changing a leaf that requires grad (or a view of one) in
  -- place while recording is an error (run it inside lunet.no_grad, as
  -- optimizers and initialisers do). On other tensors, when the tensor or an
  -- argument requires grad, the op is recorded by computing it out of place,
  -- copying the result in and moving its grad_fn to the tensor; fill-like ops
  -- cut the history. With nothing requiring grad they cost one or two checks.
  do
    local leaf_msg = '%s: a leaf tensor that requires grad (or a view of one) cannot be changed in place' ..
      ' while recording; use the out-of-place op, or lunet.no_grad'
    local part_msg = '%s: writing a tensor that requires grad into part of a tensor that does not (a view of it) is' ..
      ' not recorded on that tensor, so its gradient would be lost; build it out of place (cat, stack, where)'
    -- whether t is a view of part of its storage (the write is then part of a larger tensor)
    local function is_part_of_storage(t)
      return tonumber(C.ln_storage_nbytes(t.p)) > t:numel() * C.ln_dtype_size(t.p.dtype_id)
    end
    -- whether a later argument requires grad (scatter_add_(dim, index, src),
    -- index_add_: src; the backwards of gather and index_select write a
    -- gradient that requires grad into zeros so, under create_graph)
    local function later_needs(...)
      for i = 1, select('#', ...) do
        local t = select(i, ...)
        if is_tensor(t) and t.p.grad_flag ~= 0 then return true end
      end
      return false
    end
    local cutting = { fill_ = true, zero_ = true, uniform_ = true, normal_ = true, bernoulli_ = true }
    local raw_copy = Tensor.copy_

    local function copy_bw(n, g)
      g = sum_to(g, n.ss)
      return back_cast(n, g)
    end

    local names = {}
    for name, f in pairs(Tensor) do
      if type(f) == 'function' and name:sub(-1) == '_' and name ~= 'requires_grad_' and name ~= 'detach_' then
        names[#names + 1] = name
      end
    end
    for _, name in ipairs(names) do
      local f = Tensor[name]
      raw[name] = f
      local base_name = name:sub(1, -2)   -- (the out-of-place op)
      -- recorded: self or a1 requires grad, in grad mode. Each write moves
      -- the storage's version before the node is attached (attach stamps
      -- the tensor with it: graph.check_current).
      local function recorded(self, a1, ...)
        local self_grad = self.p.grad_flag ~= 0
        if refused(self) then raise(leaf_msg:format(name)) end
        -- a view's base (autograd.views): the write rewrites its history too
        -- (or, not requiring grad, starts it)
        local base, geo, base_edge = views.base_of(self), nil, false
        if base then
          geo = not is_part_of_storage(base) and views.geometry(self, base)
          -- (both current before the write: it moves their version)
          if geo then edge(self); base_edge = edge(base) end
        end
        if not geo and not self_grad and is_part_of_storage(self) then
          -- (the tensor this is a view of would not record the write: its gradient would miss a1's)
          raise(part_msg:format(name))
        end
        local src_edge = false
        if cutting[name] then
          f(self, a1, ...)
          bump(self.p)
          if geo then return views.rebase(base, self, geo, base_edge, false) end
          return Tensor.detach_(self)
        end
        if name == 'copy_' then
          local src = a1
          raw_copy(self, src)
          bump(self.p)
          if is_tensor(src) and src.p.grad_flag ~= 0 then
            src_edge = node(copy_bw, 'copy_', edge(src))
            src_edge.ss = bshape(src, self)
            src_edge.dtype, src_edge.device = src.p.dtype_id, src.p.device_id
          end
        else
          local out_of_place = Tensor[base_name]
          if type(out_of_place) ~= 'function' or not raw[base_name] then
            raise(name .. ': not differentiable in place; use lunet.no_grad or an out-of-place form')
          end
          -- on a copy of self: the op may save its input, which is overwritten next
          local r = out_of_place(Tensor.clone(self), a1, ...)
          raw_copy(self, r)
          bump(self.p)
          local rr = record(r)
          src_edge = rr and rr.grad_fn or false
        end
        if geo then return views.rebase(base, self, geo, base_edge, src_edge) end
        if src_edge then return attach(self, src_edge) end
        return Tensor.detach_(self)
      end
      -- every write, in grad mode or not, moves the storage's version (what
      -- a node saved must not change before its backward: graph.check_saved);
      -- one not recorded (under no_grad) leaves the histories of the tensors
      -- on that storage as they were, as in PyTorch (graph.check_current)
      Tensor[name] = function(self, a1, ...)
        if S.grad_enabled and is_tensor(self) and (self.p.grad_flag ~= 0 or is_tensor(a1) and a1.p.grad_flag ~= 0
            or later_needs(...)) then
          local r = recorded(self, a1, ...)
          return r
        end
        local r = f(self, a1, ...)
        if is_tensor(self) then bump_unrecorded(self.p) end
        return r
      end
    end
  end

  -- lunet.autograd.backward(tensors, grads[, opts]): one backward from several
  -- roots at once (torch.autograd.backward): the sum of tensors[i] * grads[i]
  -- differentiated, each graph node run once, after all its consumers. grads[i]
  -- (a tensor of tensors[i]'s shape, on its device) may be nil for a
  -- single-element tensor (1). Roots on different devices need no gradient from
  -- one another: DataParallel:forward_loss starts every replica's backward this
end

return I
