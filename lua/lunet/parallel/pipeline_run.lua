-- One batch through a parallel.Pipeline's schedule: pipe:forward_loss(criterion,
-- x, target) returns this object, a parallel.PipelineLoss.
--
-- The schedule's steps run in order; each action runs on every replica (the
-- data-parallel copies of the pipeline, hybrid mode) and a backward action
-- is one autograd pass over all of them, so that stage s's Reducer sees one
-- backward per micro-batch and all-reduces on the stage's last one, while the
-- other stages' backward goes on. forward_loss runs the steps before the
-- first backward action (GPipe: every forward; 1F1B: the warm-up), and
-- loss:backward([scale]) the rest. The host only queues work: the devices
-- run their actions at once, each waiting for its inputs through events.
-- The criterion runs per micro-batch with reduction 'sum', its gradient
-- seeded with replicas * scale / count (count: the whole batch's targets,
-- 'mean'; 1 for 'sum'), so the gradients are those of the whole batch on one
-- device (see forward_loss.lua for the criteria this covers).
-- loss:item() (after every micro-batch's forward: after backward for 1F1B),
-- loss:tensor(), loss:output() (the outputs, no gradient, on the target's device).
local lunet = require 'lunet'
local typename = require('lunet.core').typename   -- (type, or 'tensor')
local autograd = require 'lunet.autograd'
local ACTION = require('lunet.parallel.schedule').ACTION   -- (the actions in words)
local free_now = require('lunet.tensor').free_now
local eager = require 'lunet.nn.eager'

local Run = {}
Run.__index = Run
Run.__name = 'parallel.PipelineLoss'

local function fail(msg, lvl) error('Pipeline: ' .. msg, lvl + 1) end

-- rows of x for replica r's micro-batch m: {pos, n}
function Run.new(pipe, criterion, kind, x, target, recording)
  local R, S = pipe.replicas, pipe.S
  local B = x:size(1)
  if B < R then fail(('forward_loss: a batch of %d rows for %d replicas'):format(B, R), 3) end
  local shard = {}
  local base, extra, pos = math.floor(B / R), B % R, 1
  for r = 1, R do
    local n = base + (r <= extra and 1 or 0)
    shard[r] = { pos, n }
    pos = pos + n
  end
  local M = math.min(pipe.chunks, base)
  local plan = pipe:_plan(M)
  local self = setmetatable({ pipe = pipe, criterion = criterion, kind = kind, R = R, S = S, M = M,
    steps = plan.steps, slot = plan.slot, lastB = plan.lastB, next = 1, recording = recording, timing = pipe.timing,
    split = plan.split, deferred = plan.split and {} or nil,
    mb = {}, targets = {}, outs = {}, losses = {}, sums = {}, fdone = 0, scale = 1 }, Run)
  local last = pipe.stages[1][S].device
  for r = 1, R do
    local p0, n = shard[r][1], shard[r][2]
    local mb, tg, b, e = {}, {}, math.floor(n / M), n % M
    local dev = pipe.stages[r][S].device
    local p = p0
    for m = 1, M do
      local k = b + (m <= e and 1 or 0)
      mb[m] = x:narrow(1, p, k)
      tg[m] = target:narrow(1, p, k)
      if tg[m].device ~= dev then tg[m] = tg[m]:to(dev) end
      p = p + k
    end
    self.mb[r], self.targets[r], self.outs[r], self.losses[r] = mb, tg, {}, {}
    if kind == 'class' then
      local whole = target.device ~= dev and target:to(dev) or target
      self.count = self.count or {}
      self.count[r] = whole:ne(criterion.opts.ignore_index):sum():to('float32')
    end
  end
  if recording then self.timing:begin(M, plan.split and 3 or 2) else self.timing.on = false end
  self.sync = pipe.next_sync ~= false   -- (pipe:sync_next: for this batch only)
  pipe.next_sync = nil
  self.norm = kind == 'element' and target:numel() or 1
  self.last = last
  self.home = target.device   -- (loss:output() goes there, with the targets the metrics compare it to)
  return self
end

-- ---- actions ------------------------------------------------------------------------------------

function Run:_loss(r, y, m)
  local crit = self.criterion
  local red = crit.opts.reduction
  crit.opts.reduction = 'sum'
  local ok, l = pcall(crit.forward, crit, y, self.targets[r][m])
  crit.opts.reduction = red
  if not ok then error(l, 0) end
  return l
end

function Run:_forward(s, m)
  local pipe, S = self.pipe, self.S
  local record = self.recording and not pipe:_recompute(m, self.M)
  for r = 1, self.R do
    local stage = pipe.stages[r][s]
    local inp = s == 1 and stage:receive(self.slot[1][m], self.mb[r][m]) or stage.pending[m]
    if s > 1 then stage.pending[m] = nil end
    stage:input_arrived(self.slot[s][m])
    if r == 1 then self.timing:mark(s, false) end
    local y = stage:forward(m, inp, record)
    if not lunet.is_tensor(y) then error(('the atoms returned a %s, not a tensor'):format(typename(y)), 0) end
    if s < S then
      local nxt = pipe.stages[r][s + 1]
      nxt.pending[m] = nxt:receive(self.slot[s + 1][m], y)
      -- (an output not recorded is done with once its copy is queued: lunet.nn.eager)
      if not record and not rawequal(y, inp) and eager.active() then free_now(y) end
    else
      local l = record and self:_loss(r, y, m) or autograd.no_grad(self._loss, self, r, y, m)
      if record then self.losses[r][m] = l end
      self.outs[r][m] = y:detach()
      local ld = l:detach()
      self.sums[r] = self.sums[r] and self.sums[r] + ld or ld
    end
    if r == 1 then self.timing:mark(s, true) end
  end
  if s == S then self.fdone = self.fdone + 1 end
end

-- the gradient seed of replica r's micro-batch losses
-- (the same for every micro-batch of a batch: made once, at its first backward)
function Run:_seed(r, l)
  local seeds = self.seeds
  if not seeds then seeds = {}; self.seeds = seeds end
  local s = seeds[r]
  if s then return s end
  local f = self.R * self.scale
  if self.count then s = self.count[r]:to(l.dtype):reciprocal():mul(f)
  else s = lunet.full(l:size(), f / self.norm, { dtype = l.dtype, device = l.device }) end
  seeds[r] = s
  return s
end

function Run:_backward(s, m)
  local pipe, S = self.pipe, self.S
  local roots, seeds = {}, {}
  self.timing:mark(s, false)
  for r = 1, self.R do
    local stage = pipe.stages[r][s]
    local y = stage:recompute(m, pipe.bn[r])
    local root, seed
    if s == S then
      root = self.losses[r][m] or self:_loss(r, y, m)
      self.losses[r][m] = nil
      seed = self:_seed(r, root)
    else
      root, seed = y, stage.gbuf[self.slot[s][m]]
      stage:grad_arrived(self.slot[s][m])
    end
    if root.requires_grad then roots[#roots + 1], seeds[#seeds + 1] = root, seed end
  end
  if self.split then
    -- (zero-bubble: the weights' gradients wait for W(s, m), and so does the slot)
    if #roots > 0 then self.deferred[s * (self.M + 1) + m] = autograd.backward(roots, seeds, { defer = self:_weights_of(s) }) end
  else
    self:_prepare_reducer(s, m)
    if #roots > 0 then autograd.backward(roots, seeds) end
  end
  for r = 1, self.R do
    local stage = pipe.stages[r][s]
    local g = stage:finish(m)
    if g and s > 1 then
      pipe.stages[r][s - 1]:receive_grad(self.slot[s - 1][m], g)
      if eager.active() then free_now(g) end   -- (its copy is queued: lunet.nn.eager)
    end
    if not self.split then stage:done(self.slot[s][m]) end
  end
  self.timing:mark(s, true)
end

function Run:_prepare_reducer(s, m)
  local red = self.pipe.reducers and self.pipe.reducers[s]
  if red then
    red:sync_next(self.lastB[s] == m and self.sync)
    red:prepare(true, self.R)
  end
end

-- stage s's parameters on every replica (what B(s, m) leaves to W(s, m))
function Run:_weights_of(s)
  self.weights = self.weights or {}
  local list = self.weights[s]
  if list then return list end
  list = {}
  for r = 1, self.R do
    for _, p in ipairs(self.pipe.stages[r][s].seq:parameters()) do list[#list + 1] = p end
  end
  self.weights[s] = list
  return list
end

-- W(s, m): the weights' gradients B(s, m) left, on every replica; then the slot is free
function Run:_weights(s, m)
  self.timing:mark(s, false)
  self:_prepare_reducer(s, m)
  local key = s * (self.M + 1) + m
  local d = self.deferred[key]
  self.deferred[key] = nil
  if d then d:run() end
  for r = 1, self.R do self.pipe.stages[r][s]:done(self.slot[s][m]) end
  self.timing:mark(s, true)
end

-- runs the steps from self.next (to the first with a backward action, or to
-- the end: then the batch is done); without recording only the forwards
function Run:_steps(stop_at_backward)
  local steps = self.steps
  while self.next <= #steps do
    local step = steps[self.next]
    if stop_at_backward then
      for _, a in ipairs(step) do if a[3] == 'B' then return end end
    end
    for _, a in ipairs(step) do
      self.at = a
      if a[3] == 'F' then self:_forward(a[1], a[2])
      elseif not self.recording then -- (no backward)
      elseif a[3] == 'B' then self:_backward(a[1], a[2])
      else self:_weights(a[1], a[2]) end
    end
    self.next = self.next + 1
  end
  self.at = nil
  if self.pipe.pending_run == self then self.pipe.pending_run = nil end
  if self.recording then self.timing:finish(self.M) end
  self.pipe:_batch_done()
end

-- runs the steps, or on an error leaves the pipeline clean and raises it naming the stage
function Run:_go(stop_at_backward, lvl)
  local ok, err = pcall(self._steps, self, stop_at_backward)
  if ok then return end
  self.failed = true
  self.pipe:_abort()
  local a = self.at
  -- (positions inside lunet's files say nothing to the user: the stage does)
  err = tostring(err):gsub('[%w_%./%-]+%.lua:%d+: ', ''):gsub('^Pipeline: ', '')
  if a then
    err = ('%s of micro-batch %d at stage %d (%s): %s'):format(ACTION[a[3]], a[2], a[1],
      self.pipe.stages[1][a[1]].device, err)
  end
  fail(err, lvl + 1)
end

-- ---- the loss's interface ---------------------------------------------------------------------

-- loss:backward([scale])'s checks (this loss's and dpipe_run's: both keep
-- failed, recording, next and steps): the scale, or an error at the
-- caller's caller naming the problem
function Run.backward_scale(self, scale)
  if scale ~= nil and (type(scale) ~= 'number' or scale ~= scale) then
    fail('backward: scale must be a number, got ' .. tostring(scale), 3)
  end
  if self.failed then fail('backward: this batch failed; run forward_loss again', 3) end
  if self.superseded then
    fail('backward: a later forward_loss ran before this loss\'s backward (the stages hold one batch at a time); '
      .. 'run forward_loss again for this batch', 3)
  end
  if not self.recording then fail('backward: the forward did not record gradients (eval mode or no_grad)', 3) end
  if self.next > #self.steps then fail('backward: already run for this batch; run forward_loss again', 3) end
  return scale or 1
end

-- whether a batch's steps are still to run (its backward pending), for the
-- pipelines' forward_loss (this loss's and dpipe_run's)
function Run.unfinished(run)
  return run ~= nil and run.next <= #run.steps and not run.failed
end

function Run:backward(scale)
  self.scale = Run.backward_scale(self, scale)
  self:_go(false, 2)
end

function Run:item()
  if self.fdone < self.M then
    fail('loss:item: the 1F1B schedule computes the loss during backward; read it after loss:backward()', 2)
  end
  local total = 0
  for r = 1, self.R do total = total + self.sums[r]:item() end
  return total / (self.count and self.count[1]:item() or self.norm)
end

function Run:tensor() return lunet.tensor(self:item(), { device = self.last }) end

function Run:output()
  local list = {}
  for r = 1, self.R do
    for m = 1, self.M do
      local y = self.outs[r][m]
      if not y then fail('loss:output: the outputs are not computed yet (1F1B: after loss:backward())', 2) end
      list[#list + 1] = y.device ~= self.home and y:to(self.home) or y
    end
  end
  if #list == 1 then return list[1] end
  return lunet.cat(list, 1)
end

function Run.__tostring(self)
  if self.fdone < self.M then return 'parallel.PipelineLoss (computed by backward)' end
  return ('parallel.PipelineLoss: %.6g'):format(self:item())
end

return Run
