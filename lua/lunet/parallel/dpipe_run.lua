-- One batch through a Pipeline across processes (DistributedPipeline.lua):
-- pipe:forward_loss(criterion, x, target) returns this object, a
-- parallel.PipelineLoss, on every rank.
--
-- Every rank walks the same checked schedule and runs its own stage's
-- actions. At a boundary, F(s, m) sends its output to rank s + 1
-- (Communicator:send: queued on the device's stream, it never waits for the
-- receiver) and F(s + 1, m) receives it into its boundary buffer (recv:
-- queued, the device waits for the data; the host goes on); B(s + 1, m)
-- sends the input's gradient back to rank s, whose B(s, m) receives it as
-- the seed of its backward (zero-bubble: W(s, m), the weights' gradients,
-- sends nothing). Messages between two ranks match in the order
-- they are sent, so both ranks post them in schedule order (DP:_plan checks
-- that neighbouring stages run their micro-batches in the same order).
-- The shapes: the first message of a batch from rank s to s + 1 is a header
-- (the batch's rows, the output's dtype and its dims past the first), which
-- the receiving host reads once a batch; each micro-batch's rows follow
-- from the batch's. The loss (the last rank's) is sent to every rank after
-- the schedule's step holding the last F(S, .) (1F1B: after the last step):
-- loss:item() is the same everywhere (1F1B: after loss:backward(), as in one
-- process). A rank whose stage fails sends every other one a message it
-- cannot take (DistributedPipeline:_poison), so that none waits for it.
local lunet = require 'lunet'
local core = require 'lunet.core'
local typename = core.typename
local autograd = require 'lunet.autograd'
local ACTION = require('lunet.parallel.schedule').ACTION   -- (the actions in words)
local Stage = require 'lunet.parallel.Stage'

local Run = {}
Run.__index = Run
Run.__name = 'parallel.PipelineLoss'

Run.POISON = 7   -- uint8 elements: what a failed rank sends the others (DistributedPipeline:_poison)
local HDR = 12   -- header: rows, micro-batches, dtype id, dims, then the dims past the first (at most HDR - 4)

local function fail(msg, lvl) error('Pipeline: ' .. msg, lvl + 1) end
local function strip(err)
  err = tostring(err):gsub('[%w_%./%-]+%.lua:%d+: ', ''):gsub('^Pipeline: ', '')
  -- (a failed rank's message: its stage raised the error)
  return (err:gsub('recv: the send from rank (%d+) has ' .. Run.POISON .. ' uint8 elements, the receiving tensor %d+ %w+',
    function(r) return ('stage %d failed (its rank raised the error)'):format(tonumber(r) + 1) end))
end

-- a buffer of this shape and dtype from list[slot] when it fits
local function buffer(list, slot, size, dtype, device, grad)
  local b = list[slot]
  if b and b.dtype == dtype and b:dim() == #size then
    local same = true
    for d = 1, #size do if b:size(d) ~= size[d] then same = false; break end end
    if same then return b end
  end
  b = lunet.empty(size, { dtype = dtype, device = device })
  if grad then b.requires_grad = true end
  list[slot] = b
  return b
end

local function rows_of(t, what, fname, lvl)
  if not lunet.is_tensor(t) then fail(('%s: %s must be a tensor, got %s'):format(fname, what, typename(t)), lvl + 1) end
  if t:dim() == 0 or t:size(1) == 0 then fail(('%s: %s must have a non-empty batch dimension'):format(fname, what), lvl + 1) end
  return t:size(1)
end

function Run.new(pipe, criterion, kind, x, target, recording)
  local S, s, dev, R = pipe.S, pipe.s, pipe.device, pipe.replicas
  local self = setmetatable({ pipe = pipe, criterion = criterion, kind = kind, S = S, s = s, dev = dev, R = R,
    group = pipe.group, stage = pipe.stage, recording = recording, next = 1, losses = {}, outs = {}, fdone = 0,
    scale = 1, rows = {}, mb = {}, tg = {}, sync = pipe.next_sync ~= false }, Run)
  pipe.next_sync = nil   -- (pipe:sync_next: for this batch only)
  local B, M, Bx
  if s == 1 then
    Bx = rows_of(x, 'input', 'forward_loss', 2)
    B, M = Bx, math.min(pipe.chunks, Bx)
  else
    -- what the previous stage sends: its batch's first message (the host waits for it)
    local h = lunet.empty(HDR, { dtype = 'float64', device = dev })
    local ok, v = pcall(function() return self.group:recv(h, s - 1):totable() end)
    if not ok then fail('forward_loss: stage ' .. s .. ' receiving its input\'s shape: ' .. strip(v), 2) end
    B, M, self.in_dtype, self.in_size = v[1], v[2], core.dtypes[v[3]], {}
    for d = 1, v[4] - 1 do self.in_size[d + 1] = v[4 + d] end
    self.in_float = lunet.empty(1, { dtype = self.in_dtype }):is_floating_point()
  end
  if s == S then
    local Bt = rows_of(target, 'target', 'forward_loss', 2)
    if Bt ~= B then fail(('forward_loss: target has %d rows, the input %d'):format(Bt, B), 2) end
  end
  self.B = B
  local plan = pipe:_plan(M)
  self.M, self.steps, self.slot, self.lastB = M, plan.steps, plan.slot, plan.lastB
  self.split, self.deferred = plan.split, {}
  self.share = recording and plan.share or plan.lastF
  local b, e, p = math.floor(B / M), B % M, 1
  for m = 1, M do
    local k = b + (m <= e and 1 or 0)
    self.rows[m] = k
    if s == 1 then self.mb[m] = x:narrow(1, p, k) end
    if s == S then
      local t = target:narrow(1, p, k)
      self.tg[m] = t.device ~= dev and t:to(dev) or t
    end
    p = p + k
  end
  if s == S then
    local t = target.device ~= dev and target:to(dev) or target
    if kind == 'class' then self.count = t:ne(criterion.opts.ignore_index):sum():to('float64') end
    self.norm = kind == 'element' and t:numel() or 1
    if R > 1 and kind then   -- (the mean is over every pipeline's targets: their count summed, on the devices)
      self.count = self.count or lunet.full({}, self.norm, { dtype = 'float64', device = dev })
      pipe.stage_group:allreduce({ self.count:view(1) }, { op = 'sum' })
    end
    self.home = target.device
  end
  return self
end

-- ---- actions ------------------------------------------------------------------------------------

function Run:_loss(y, m)
  local crit = self.criterion
  local red = crit.opts.reduction
  crit.opts.reduction = 'sum'
  local ok, l = pcall(crit.forward, crit, y, self.tg[m])
  crit.opts.reduction = red
  if not ok then error(l, 0) end
  return l
end

-- (times the replicas: their Reducer averages the gradients)
function Run:_seed(l)
  local f = self.R * self.scale
  if self.count then return self.count:to(l.dtype):reciprocal():mul(f) end
  return lunet.full(l:size(), f / self.norm, { dtype = l.dtype, device = l.device })
end

local function in_size(self, m)
  local size = { self.rows[m] }
  for d = 2, #self.in_size do size[d] = self.in_size[d] end
  return size
end

function Run:_forward(m)
  local st, s, S = self.stage, self.s, self.S
  local record = self.recording and not self.pipe:_recompute(m, self.M)
  local k = self.slot[s][m]
  local inp
  if s == 1 then
    inp = st:receive(k, self.mb[m])
    st:input_arrived(k)
  else
    Stage.wait_slot(st, k)
    inp = buffer(st.inbuf, k, in_size(self, m), self.in_dtype, self.dev, self.in_float)
    self.group:recv(inp, s - 1)
  end
  local y = st:forward(m, inp, record)
  if not lunet.is_tensor(y) then error(('the atoms returned a %s, not a tensor'):format(typename(y)), 0) end
  if s < S then
    if y:dim() == 0 or y:size(1) ~= self.rows[m] then
      error(('the output has %s rows for a micro-batch of %d: across processes a stage must keep the batch '
        .. 'dimension first'):format(y:dim() == 0 and 'no' or y:size(1), self.rows[m]), 0)
    end
    if not self.sent_header then
      if y:dim() > HDR - 3 then error(('the output has %d dimensions, at most %d cross processes'):format(y:dim(), HDR - 3), 0) end
      local h = { self.B, self.M, core.dtype_ids[y.dtype], y:dim() }
      for d = 2, y:dim() do h[3 + d] = y:size(d) end
      for q = #h + 1, HDR do h[q] = 0 end
      self.group:send(lunet.tensor(h, { dtype = 'float64', device = self.dev }), s + 1)
      self.sent_header = true
    end
    self.group:send(y:is_contiguous() and y or y:contiguous(), s + 1)
  else
    local l = record and self:_loss(y, m) or autograd.no_grad(self._loss, self, y, m)
    if record then self.losses[m] = l end
    self.outs[m] = y:detach()
    local ld = l:detach()
    self.sums = self.sums and self.sums + ld or ld
    self.fdone = self.fdone + 1
  end
end

function Run:_backward(m)
  local st, s, S = self.stage, self.s, self.S
  local k = self.slot[s][m]
  local y = st:recompute(m, self.pipe.bn)
  local root, seed
  if s == S then
    root = self.losses[m] or self:_loss(y, m)
    self.losses[m] = nil
    seed = self:_seed(root)
  else
    root = y
    if y:is_floating_point() then   -- (the next stage sends a gradient for floating inputs only)
      seed = buffer(st.gbuf, k, y:size(), y.dtype, self.dev, false)
      self.group:recv(seed, s + 1)
    end
  end
  if self.split then
    -- (zero-bubble: the weights' gradients wait for W(m), and so does the slot)
    if seed and root.requires_grad then
      self.deferred[m] = autograd.backward({ root }, { seed }, { defer = st.seq:parameters() })
    end
  else
    self:_prepare_reducer(m)
    if seed and root.requires_grad then autograd.backward({ root }, { seed }) end
  end
  local g = st:finish(m)
  if s > 1 and self.in_float then
    if not g then g = lunet.zeros(in_size(self, m), { dtype = self.in_dtype, device = self.dev }) end
    self.group:send(g:is_contiguous() and g or g:contiguous(), s - 1)
  end
  if not self.split then st:done(k) end
end

function Run:_prepare_reducer(m)
  local red = self.pipe.reducer
  if red then
    red:sync_next(m == self.lastB and self.sync)
    red:prepare(true, 1)
  end
end

-- W(m): the weights' gradients B(m) left; then the slot is free
function Run:_weights(m)
  self:_prepare_reducer(m)
  local d = self.deferred[m]
  self.deferred[m] = nil
  if d then d:run() end
  self.stage:done(self.slot[self.s][m])
end

-- the last stage's loss (sum / count) sent to every rank (point to point:
-- a rank that failed leaves no collective waiting)
function Run:_share()
  local t
  if self.s == self.S then
    t = self.sums:to('float64'):view(1)
    t = self.count and t / self.count or t / self.norm
    if self.R > 1 then self.pipe.stage_group:allreduce({ t }, { op = 'sum' }) end   -- every replica's part
    for k = 1, self.S - 1 do self.group:send(t, k) end
  else
    t = lunet.empty(1, { dtype = 'float64', device = self.dev })
    self.group:recv(t, self.S)
  end
  self.value = t
end

-- runs the steps from self.next (to the first with a backward action, or to the end)
function Run:_steps(stop_at_backward)
  local steps, s = self.steps, self.s
  while self.next <= #steps do
    local step = steps[self.next]
    if stop_at_backward then
      for _, a in ipairs(step) do if a[3] == 'B' then return end end
    end
    for _, a in ipairs(step) do
      if a[1] == s then
        self.at = a
        if a[3] == 'F' then self:_forward(a[2])
        elseif not self.recording then -- (no backward)
        elseif a[3] == 'B' then self:_backward(a[2])
        else self:_weights(a[2]) end
      end
    end
    self.at = nil
    if self.next == self.share then self:_share() end
    self.next = self.next + 1
  end
  if self.pipe.pending_run == self then self.pipe.pending_run = nil end
  if self.pipe.bn then self.pipe.bn:commit() end
end

-- runs the steps, or on an error leaves the stage clean and raises it naming the action
function Run:_go(stop_at_backward, lvl)
  local ok, err = pcall(self._steps, self, stop_at_backward)
  if ok then return end
  self.failed = true
  self.pipe:_abort()
  local a = self.at
  err = strip(err)
  if a then
    local dist = require 'lunet.distributed'
    err = ('%s of micro-batch %d at stage %d (%s%s): %s'):format(ACTION[a[3]], a[2], a[1],
      dist.is_initialized() and ('process rank %d, '):format(dist.rank()) or '', self.dev, err)
  end
  fail(err, lvl + 1)
end

-- ---- the loss's interface ---------------------------------------------------------------------

function Run:backward(scale)
  self.scale = require('lunet.parallel.pipeline_run').backward_scale(self, scale)
  self:_go(false, 2)
end

function Run:item()
  if not self.value then
    fail('loss:item: the 1F1B schedule computes the loss during backward; read it after loss:backward()', 2)
  end
  local ok, v = pcall(self.value.item, self.value)
  if not ok then fail('loss:item: ' .. strip(v), 2) end
  return v
end

function Run:tensor() return lunet.tensor(self:item(), { device = self.dev }) end

-- the outputs (no gradient) on the target's device, on the last stage's rank only
function Run:output()
  if self.s ~= self.S then
    fail(('loss:output: the outputs are on the last stage\'s rank only (this is stage %d of %d)'):format(self.s, self.S), 2)
  end
  local list = {}
  for m = 1, self.M do
    local y = self.outs[m]
    if not y then fail('loss:output: the outputs are not computed yet (1F1B: after loss:backward())', 2) end
    list[m] = y.device ~= self.home and y:to(self.home) or y
  end
  if #list == 1 then return list[1] end
  return lunet.cat(list, 1)
end

-- loss:metric_outputs(target) -> the outputs and target (as given to
-- forward_loss) on the last stage's ranks; nil elsewhere (lunet.fit counts
-- its metrics where they are)
function Run:metric_outputs(target)
  if self.s ~= self.S then return nil end
  return self:output(), target
end

function Run.__tostring(self)
  if not self.value then return 'parallel.PipelineLoss (computed by backward)' end
  return ('parallel.PipelineLoss: %.6g'):format(self:item())
end

return Run
