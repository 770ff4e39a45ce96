-- DataParallel's gradient buckets: each replica's gradients copied, as they
-- are accumulated in backward (post-accumulate hooks), into flat buffers of
-- at most bucket_mb, parameters in reverse order; a bucket's all-reduce is
-- queued once every replica has filled it, while backward goes on.
-- Installed into DataParallel by DataParallel.lua.
local lunet = require 'lunet'
local autograd = require 'lunet.autograd'

local function fail(msg, lvl) error('DataParallel: ' .. msg, (lvl or 1) + 1) end

return function(DataParallel)
  -- buckets of parameter indices in reverse order, at most bucket_mb each (the
  -- first, holding the last layers, is smaller so that its all-reduce starts early)
  function DataParallel:_build_buckets()
    local P = self.params[1]
    local cap = self.bucket_mb * 1048576
    local buckets, of, slot = {}, {}, {}
    local cur
    for i = #P, 1, -1 do
      local p = P[i]
      if not p.requires_grad then goto continue end   -- frozen: never reduced, never given a grad
      local bytes = p:numel() * p:element_size()
      local limit = (#buckets <= 1) and math.min(cap, 1048576) or cap
      if not cur or cur.dtype ~= p.dtype or (cur.bytes > 0 and cur.bytes + bytes > limit) then
        cur = { idx = {}, bytes = 0, numel = 0, dtype = p.dtype }
        buckets[#buckets + 1] = cur
      end
      cur.idx[#cur.idx + 1] = i
      slot[i] = cur.numel
      cur.numel = cur.numel + p:numel()
      cur.bytes = cur.bytes + bytes
      of[i] = #buckets
      ::continue::
    end
    local views = {}
    for k = 1, self.n do views[k] = {} end
    for _, b in ipairs(buckets) do
      b.flat = {}
      for k = 1, self.n do
        b.flat[k] = lunet.zeros({ b.numel }, { dtype = b.dtype, device = self.devices[k] })
        for _, i in ipairs(b.idx) do
          local p = self.params[k][i]
          views[k][i] = b.flat[k]:narrow(1, slot[i] + 1, p:numel()):view(p:size())
        end
      end
    end
    self.buckets, self.bucket_of, self.views = buckets, of, views
    self.seen = {}
  end

  -- the hooks hold the wrapper weakly: parameters' records must not keep it
  -- (and its buckets) alive once the user drops it
  function DataParallel:_hook()
    local np = #self.params[1]
    local weak = setmetatable({ self }, { __mode = 'v' })
    for k = 1, self.n do
      if #self.params[k] ~= np then fail('replicas have different parameter counts', 3) end
      for i, p in ipairs(self.params[k]) do
        p:register_post_accumulate_grad_hook(function()
          local dp = weak[1]
          if dp then dp:_on_grad(k, i) end
        end)
      end
    end
    self._finish = function(ok)
      local dp = weak[1]
      if dp then dp:_end_backward(ok) end
    end
  end

  -- p.grad becomes its bucket view (the gradient copied in; zeros when none)
  local function into_view(p, v)
    local g = p.grad
    if rawequal(g, v) then return end
    if g == nil then v:zero_() else v:copy_(g) end
    p.grad = v
  end

  function DataParallel:_on_grad(k, i)
    local st = self.step
    if not st then
      if self.reduced then
        fail('a second backward after the gradients were reduced: run forward again for each backward '
          .. '(or accumulate inside dp:no_sync)')
      end
      return
    end
    if not st.sync then return end
    if not st.queued then autograd.queue_callback(self._finish); st.queued = true end
    local b = self.bucket_of[i]
    if not b then return end
    local key = (k - 1) * #self.params[1] + i
    if self.seen[key] == st then
      if st.launched[b] then
        fail(('parameter %d of replica %d got a second gradient after its bucket was reduced (a shared '
          .. 'parameter?); use {overlap = false}'):format(i, k))
      end
      return
    end
    self.seen[key] = st
    into_view(self.params[k][i], self.views[k][i])
    if not self.overlap then return end
    local r = (st.ready[b] or 0) + 1
    st.ready[b] = r
    if r == st.active * #self.buckets[b].idx then self:_launch(b) end
  end

  function DataParallel:_launch(b)
    local st = self.step
    st.launched[b] = true
    st.nlaunched = st.nlaunched + 1
    local bucket = self.buckets[b]
    local np = #self.params[1]
    for k = 1, self.n do
      for _, i in ipairs(bucket.idx) do
        local key = (k - 1) * np + i
        if self.seen[key] ~= st then
          self.seen[key] = st
          into_view(self.params[k][i], self.views[k][i])
        end
      end
    end
    if self.comm then
      -- the last bucket of the step goes on the compute streams, which would
      -- only wait for it anyway: no hand-off to the comm workers and back (two
      -- thread wake-ups per device, most of a small bucket's time)
      local async = self.overlap and st.nlaunched < #self.buckets
      self.comm:allreduce(bucket.flat, { op = 'avg', compress = self.compress, async = async })
    end
  end

  -- end of backward: reduce the buckets not yet launched (unused parameters,
  -- overlap = false)
  function DataParallel:_end_backward(ok)
    local st = self.step
    self.step = nil
    if not st then return end
    if not ok then
      -- buckets already queued on the comm streams: order them before what follows
      if self.overlap and self.comm and next(st.launched) then pcall(self.comm.wait, self.comm) end
      return
    end
    self.step = st
    for b = 1, #self.buckets do
      if not st.launched[b] then self:_launch(b) end
    end
    -- the compute streams wait for the comm streams before anything reads the
    -- reduced buckets (the gradients are views of them)
    if self.overlap and self.comm then self.comm:wait() end
    self.step = nil
    self.reduced = true   -- until the next forward
  end
end
