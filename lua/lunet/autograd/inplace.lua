-- lunet.autograd.inplace: in-place ops under autograd, as in PyTorch.
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local record, is_tensor = T.record, T.is_tensor
local bump = require('lunet.core').C.ln_storage_bump
local node, edge, attach, bshape, sum_to, back_cast = G.node, G.edge, G.attach, G.bshape, G.sum_to, G.back_cast

local I = {}

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
      local base = name:sub(1, -2)
      local function inplace(self, a1, ...)
        if not S.grad_enabled or not is_tensor(self) then return f(self, a1, ...) end
        local self_grad = self.p.grad_flag ~= 0
        if not self_grad and not (is_tensor(a1) and a1.p.grad_flag ~= 0) then return f(self, a1, ...) end
        if self_grad then
          local r = record(self)
          local fn = r and r.grad_fn
          if not fn or (fn.view and is_tensor(fn[1])) then error(leaf_msg:format(name), 3) end
        end
        if cutting[name] then
          f(self, a1, ...)
          return Tensor.detach_(self)
        end
        local r
        if name == 'copy_' then
          local src = a1
          raw_copy(self, src)
          if not is_tensor(src) or src.p.grad_flag == 0 then return Tensor.detach_(self) end
          local n = node(copy_bw, 'copy_', edge(src))
          n.ss = bshape(src, self)
          n.dtype, n.device = src.p.dtype_id, src.p.device_id
          return attach(self, n)
        end
        local out_of_place = Tensor[base]
        if type(out_of_place) ~= 'function' or not raw[base] then
          error(name .. ': not differentiable in place; use lunet.no_grad or an out-of-place form', 3)
        end
        -- on a copy of self: the op may save its input, which is overwritten next
        r = out_of_place(Tensor.clone(self), a1, ...)
        raw_copy(self, r)
        local rr = record(r)
        if rr and rr.grad_fn then return attach(self, rr.grad_fn) end
        return Tensor.detach_(self)
      end
      -- every write, in grad mode or not, moves the storage's version (what
      -- a node saved must not change before its backward: graph.check_saved)
      Tensor[name] = function(self, a1, ...)
        local r = inplace(self, a1, ...)
        if is_tensor(self) then bump(self.p) end
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
