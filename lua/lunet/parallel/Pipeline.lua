-- parallel.Pipeline(model, opts): model parallelism. An nn.Sequential cut
-- into contiguous stages (its atoms, lunet.parallel.atoms: nested Sequentials
-- flattened, other containers whole), one per device; each batch split into
-- micro-batches that flow through the stages by a schedule.
--
--   local pipe = lunet.parallel.Pipeline(model, {devices = {'cpu:0', 'cpu:1'}, chunks = 8})
--   local opt = optim.Adam(pipe:parameters())          -- the model's own parameters
--   opt:zero_grad()
--   local loss = pipe:forward_loss(criterion, x, y)     -- forwards (the schedule's first half)
--   loss:backward(); opt:step(); print(loss:item())     -- backwards
--
-- opts: devices (one per stage; default lunet.devices()), chunks (micro-batches
-- a batch, default 4 per stage), schedule ('1f1b' default, 'gpipe',
-- 'interleaved', 'zb', or a function (stages, chunks) -> steps, see
-- parallel.schedule), interleave (with 'interleaved': the stages each device
-- runs, spread along the model, default 2: stage s on device (s - 1) %
-- #devices + 1; a smaller bubble for more boundary copies; 'zb': zero-bubble
-- ZB-H1, each backward split into the input's gradient, which the stage
-- before waits for, and the weights', run later in the bubble), balance (a list
-- of atom counts per stage; 'time', the default, or 'memory': measured with a
-- sample batch, opts.sample or else the first batch, see pipeline_balance;
-- 'params': equal parameter counts), checkpoint
-- ('never' default, 'except_last', 'always': forward without keeping
-- activations, recomputed in backward), deferred_bn (false), replicas (1:
-- data parallel of pipelines over #devices / replicas stages each, gradients
-- all-reduced per stage by a parallel.Reducer), bucket_mb, compress (its options).
-- group (a lunet.comm Communicator over processes, e.g. dist.world()): each
-- rank runs one stage in its own process (DistributedPipeline.lua).
-- Parameters keep the model's names: pipe:state_dict() is model:state_dict()
-- (with replicas, parameters() also lists the other replicas', as DataParallel's).
-- pipe(x) runs the micro-batches through the stages and returns the output on
-- x's device, as DataParallel does (recording a graph that backward follows
-- across devices: criterion(pipe(x), y):backward() works, as GPipe without
-- recomputation);
-- pipe:forward_loss(criterion, x, y) runs the schedule (pipeline_run.lua);
-- the stages hold one batch: a forward_loss before the last one's backward
-- drops that batch (its backward is then an error; across processes the
-- forward_loss is the error, DistributedPipeline.lua);
-- pipe:schedule_text() prints it; pipe:balance_report() the stages' predicted
-- and measured times (pipeline_timing.lua); pipe:rebalance() cuts them again.
-- The parts: Stage.lua (a stage's actions and buffers), schedule.lua,
-- pipeline_run.lua (one batch), pipeline_balance.lua, pipeline_bn.lua.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local share_hooks = require('lunet.nn.hooks').share
local options = require 'lunet.options'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local autograd = require 'lunet.autograd'
local atoms = require 'lunet.parallel.atoms'
local schedule = require 'lunet.parallel.schedule'
local Stage = require 'lunet.parallel.Stage'
local Run = require 'lunet.parallel.pipeline_run'
local pbn = require 'lunet.parallel.pipeline_bn'
local floss = require 'lunet.parallel.forward_loss'
local balance = require 'lunet.parallel.pipeline_balance'
local Timing = require 'lunet.parallel.pipeline_timing'

local Pipeline = Module:extend('parallel.Pipeline')

local SPARE_SLOTS = Stage.SPARE_SLOTS

local function fail(msg, lvl) error('Pipeline: ' .. msg, (lvl or 1) + 1) end

local OPTS = { devices = 'table', chunks = 'number', schedule = 'string|function', balance = 'string|table',
  checkpoint = 'string', deferred_bn = 'boolean', replicas = 'number', bucket_mb = 'number', compress = 'string',
  sample = 'tensor', interleave = 'number' }
local CHECKPOINT = { never = true, except_last = true, always = true }

-- chunks, schedule and checkpoint of opts for S stages, checked (this
-- pipeline's and DistributedPipeline's: errors at the caller's caller + lvl)
function Pipeline.run_options(opts, S, lvl)
  local chunks = opts.chunks or 4 * S
  if chunks % 1 ~= 0 or chunks < 1 then fail('chunks must be an integer >= 1, got ' .. tostring(chunks), lvl + 1) end
  local kind = opts.schedule or '1f1b'
  if type(kind) == 'string' and kind ~= 'gpipe' and kind ~= '1f1b' and kind ~= 'interleaved' and kind ~= 'zb' then
    fail(("schedule must be 'gpipe', '1f1b', 'interleaved', 'zb' or a function (stages, chunks) -> steps, got '%s'")
      :format(kind), lvl + 1)
  end
  local ck = opts.checkpoint or 'never'
  if not CHECKPOINT[ck] then
    fail(("checkpoint must be 'never', 'except_last' or 'always', got '%s'"):format(ck), lvl + 1)
  end
  return chunks, kind, ck
end

-- the stages each of P devices runs (opts.interleave; 2 by default with the
-- interleaved schedule, else 1), checked
function Pipeline.interleave_of(opts, P, lvl)
  local v = opts.interleave
  if opts.schedule ~= 'interleaved' then
    if v ~= nil and v ~= 1 then fail("interleave needs schedule = 'interleaved'", lvl + 1) end
    return 1
  end
  v = v or 2
  if v % 1 ~= 0 or v < 2 then fail('interleave must be an integer >= 2, got ' .. tostring(v), lvl + 1) end
  if P < 2 then fail('the interleaved schedule needs at least 2 devices a pipeline', lvl + 1) end
  return v
end

local function device_names(devs, lvl)
  local names, seen = {}, {}
  for k = 1, #devs do
    local ok, id = pcall(core.device_id, 'Pipeline', devs[k])
    if not ok then error(id, 0) end   -- (device_id named the caller's line already)
    names[k] = core.device_name(id)
    if seen[names[k]] then fail('device ' .. names[k] .. ' appears twice', lvl + 1) end
    seen[names[k]] = true
  end
  return names
end

function Pipeline:__init(model, opts)
  if is_table(opts) and opts.group ~= nil then   -- stages in different processes
    local DP = require 'lunet.parallel.DistributedPipeline'
    return DP.__init(setmetatable(self, DP), model, opts)
  end
  if not is_table(model) or not rawget(model, '_params') then fail('expected an nn.Module, got ' .. typename(model), 3) end
  opts = options.check('Pipeline', opts, OPTS) or {}
  local R = opts.replicas or 1
  if R % 1 ~= 0 or R < 1 then fail('replicas must be an integer >= 1, got ' .. tostring(R), 3) end
  local devs = device_names(opts.devices or lunet.devices(), 3)
  if #devs == 0 or #devs % R ~= 0 then
    fail(('%d devices cannot hold %d replicas of equal pipelines'):format(#devs, R), 3)
  end
  local P = #devs / R   -- devices a replica
  local V = Pipeline.interleave_of(opts, P, 3)
  local S = P * V
  local chunks, kind, ck = Pipeline.run_options(opts, S, 3)
  local list = atoms.of(model)
  if #list < S then fail(('the model has %d atoms, fewer than %d stages'):format(#list, S), 3) end
  local counts = balance.counts(list, S, opts.balance, 3)
  self.S, self.P, self.replicas, self.chunks, self.kind, self.checkpoint = S, P, R, chunks, kind, ck
  self.deferred_bn, self.balance, self.atom_names = opts.deferred_bn or false, opts.balance or 'time', {}
  for i, a in ipairs(list) do self.atom_names[i] = a.name end
  self.all_devices, self.stage_devices = devs, {}
  for s = 1, S do self.stage_devices[s] = devs[(s - 1) % P + 1] end
  self.ropts = { bucket_mb = opts.bucket_mb, compress = opts.compress }
  rawset(self, 'module', model)
  local models = { model }
  for r = 2, R do models[r] = model:clone() end
  self.models, self.bn, self.plans, self.devices = models, {}, {}, devs
  -- a measured balance is made with a sample: now, or at the first batch
  if not counts and opts.sample then counts = self:_measure(opts.sample, 3) end
  if counts then self:_build(counts) end
end

function Pipeline:_measure(sample, lvl)
  local ok, counts, info = pcall(balance.measured, self, atoms.of(self.module), sample, self.balance)
  if not ok then fail(('balance %s: %s'):format(self.balance, tostring(counts):gsub('^[^:\n]*:%d+: ', '', 1)), lvl + 1) end
  self.measure = info
  return counts
end

-- the stages: every replica's atoms moved to its stages' devices
function Pipeline:_build(counts)
  local S, R, devs = self.S, self.replicas, self.all_devices
  self.counts, self.stages = counts, {}
  for r = 1, R do
    local al, first = atoms.of(self.models[r]), 1
    self.stages[r] = {}
    for s = 1, S do
      local dev = devs[(r - 1) * self.P + (s - 1) % self.P + 1]
      local mods = {}
      for i = first, first + counts[s] - 1 do mods[#mods + 1] = al[i].module; al[i].module:to(dev) end
      self.stages[r][s] = Stage.new(s, mods, dev)
      first = first + counts[s]
    end
    if (self.deferred_bn or self.checkpoint ~= 'never') and not self.bn_wrapped then
      self.bn[r] = pbn.wrap(self.models[r]:modules(), self.deferred_bn)
    end
  end
  self.bn_wrapped = true
  if R > 1 then self:_reducers(self.ropts) end
  self.timing = Timing.new(self.stages[1])
end

-- (before the first batch of a measured balance: that batch is the sample)
function Pipeline:_ready(x, lvl)
  -- (the other replicas run the hooks registered on the model since they were made)
  for r = 2, self.replicas do share_hooks(self.models[1], self.models[r]) end
  if self.stages then return end
  self:_build(self:_measure(x, lvl + 1))
end

-- pipe:balance_report(): each stage's atoms, predicted time and memory, the bubble
function Pipeline:balance_report()
  if not self.stages then return 'Pipeline: not balanced yet (the first batch is the sample; or pass sample = x)' end
  return balance.report(self)
end

-- one Reducer per stage over that stage's devices in every replica
function Pipeline:_reducers(opts)
  local Communicator = require('lunet.comm').Communicator
  local Reducer = require 'lunet.parallel.Reducer'
  self.reducers = {}
  for s = 1, self.S do
    local sets, devs = {}, {}
    for r = 1, self.replicas do
      local st = self.stages[r][s]
      sets[r], devs[r] = st.seq:parameters(), st.device
    end
    if #sets[1] > 0 then
      self.reducers[s] = Reducer.new(sets, Communicator(devs), { name = 'Pipeline', bucket_mb = opts.bucket_mb,
        compress = opts.compress })
    end
  end
end

-- pipe:rebalance([{optimizer = opt, sample = x}]) -> counts, moved: the
-- stages cut again from the times measured in training (each stage's
-- measured time spread over its atoms in proportion to their profiled
-- times, which the profile of a measured balance gives, else a profile with
-- the sample, by default the last batch); the atoms that change stage move
-- to their new devices (with opt's state for their parameters). moved is
-- false when the cut stays.
local REBALANCE_OPTS = { optimizer = 'table', sample = 'tensor' }
function Pipeline:rebalance(opts)
  opts = options.check('Pipeline:rebalance', opts, REBALANCE_OPTS) or {}
  if not self.stages then fail('rebalance: no batch has run yet', 2) end
  lunet.synchronize()
  self.timing:collect()
  local measured = self.timing:per_micro()
  if not measured then fail('rebalance: no training step has been timed yet (train with forward_loss first)', 2) end
  if not self.measure then
    local sample = opts.sample or self.last_input
    if not sample then fail('rebalance: needs a sample batch (opts.sample)', 2) end
    local ok, _, info = pcall(balance.measured, self, atoms.of(self.module), sample, 'time')
    if not ok then fail('rebalance: ' .. tostring(_):gsub('^[^:\n]*:%d+: ', '', 1), 2) end
    self.measure = info
  end
  local counts = balance.remeasured(self, measured)
  local same = true
  for s = 1, self.S do if counts[s] ~= self.counts[s] then same = false end end
  self.timing:reset()
  if same then return counts, false end
  self:_abort()
  for _, red in pairs(self.reducers or {}) do red.step, red.reduced = nil, nil end
  self:_build(counts)
  local opt = opts.optimizer
  if opt and is_table(opt.state) then
    autograd.no_grad(function()
      for p, st in pairs(opt.state) do
        if is_table(st) and lunet.is_tensor(p) then
          for k, v in pairs(st) do
            if lunet.is_tensor(v) and v.device ~= p.device then st[k] = v:to(p.device) end
          end
        end
      end
    end)
  end
  return counts, true
end

-- ---- schedules ----------------------------------------------------------------------------------

-- the checked schedule for M micro-batches, its buffer slots and each stage's last backward
function Pipeline:_plan(M)
  local p = self.plans[M]
  if p then return p end
  local ok, steps = pcall(schedule.make, self.kind, self.S, M, self.P)
  if not ok then fail(steps, 3) end
  local slot = schedule.slots(steps, self.S, M, SPARE_SLOTS)
  -- (each stage's last backward, or weights' gradient: where its replicas' gradients are all-reduced)
  local split = schedule.split(steps)
  local lastB = {}
  for _, step in ipairs(steps) do
    for _, a in ipairs(step) do if a[3] == (split and 'W' or 'B') then lastB[a[1]] = a[2] end end
  end
  p = { steps = steps, slot = slot, lastB = lastB, split = split }
  self.plans[M] = p
  return p
end

function Pipeline:_recompute(m, M)
  local ck = self.checkpoint
  return ck == 'always' or (ck == 'except_last' and m < M)
end

-- pipe:schedule_text([chunks]): the schedule as a timeline (F3: forward of micro-batch 3; B3 its
-- backward, or with 'zb' its input's gradient, W3 its weights')
-- (stages_where: what follows the stage count, DistributedPipeline's ' over processes')
local TEXT_CHUNKS = 1024   -- (a column a step: wider than any terminal already)
function Pipeline:schedule_text(M)
  M = M or self.chunks
  if type(M) ~= 'number' or M % 1 ~= 0 or M < 1 then fail('schedule_text: chunks must be an integer >= 1', 2) end
  if M > TEXT_CHUNKS then
    fail(('schedule_text: a timeline of %s micro-batches is too wide to print; pass chunks up to %d'):format(
      tostring(M), TEXT_CHUNKS), 2)
  end
  local steps = self:_plan(M).steps
  local name = type(self.kind) == 'string' and self.kind or 'custom'
  return ('%s, %d stage%s%s, %d micro-batch%s, %d steps\n'):format(name, self.S, self.S == 1 and '' or 's',
    self.stages_where or '', M, M == 1 and '' or 'es', #steps)
    .. schedule.text(steps, self.S, self.S > (self.P or self.S) and self.stage_devices or nil)
end

-- ---- running ------------------------------------------------------------------------------------

-- pipe:sync_next(flag): whether the next batch's backward all-reduces the
-- replicas' gradients (true by default, each batch). lunet.fit's accumulate
-- = k sets it for each batch: only a group's last reduces, the others add
-- up locally, as DataParallel's do. No effect without replicas.
function Pipeline:sync_next(flag)
  if type(flag) ~= 'boolean' then fail('sync_next: expected true or false, got ' .. typename(flag), 2) end
  self.next_sync = flag
end

function Pipeline:_begin_batch()
  if self.training then for r = 1, self.replicas do if self.bn[r] then self.bn[r]:begin() end end end
end

function Pipeline:_batch_done()
  for r = 1, self.replicas do if self.bn[r] then self.bn[r]:commit() end end
end

function Pipeline:_abort()
  if self.timing then self.timing:abort() end
  for r = 1, self.replicas do
    for s = 1, self.S do self.stages[r][s]:reset() end
    if self.bn[r] then self.bn[r]:abort() end
  end
  for _, red in pairs(self.reducers or {}) do red:abort() end
end

local function need_input(x, fname, lvl)
  if not lunet.is_tensor(x) then fail(fname .. ': input must be a tensor, got ' .. typename(x), lvl + 1) end
  if x:dim() == 0 or x:size(1) == 0 then fail(fname .. ': input must have a non-empty batch dimension', lvl + 1) end
end

-- pipe:forward_loss(criterion, x, target) -> loss (a parallel.PipelineLoss: backward, item, output)
function Pipeline:forward_loss(criterion, x, target)
  local ok, kind = pcall(floss.mean_kind, criterion, 1)
  if not ok then
    fail('forward_loss: ' .. tostring(kind):gsub('^[^:\n]*:%d+: ', '', 1):gsub('^DataParallel: forward_loss: ', '', 1)
      :gsub('%(or dp%(x%)%)', '(or pipe(x))'), 2)
  end
  need_input(x, 'forward_loss', 2)
  self:_ready(x, 2)
  self.last_input = x
  if not lunet.is_tensor(target) then fail('forward_loss: target must be a tensor, got ' .. typename(target), 2) end
  if target:dim() == 0 or target:size(1) ~= x:size(1) then
    fail(('forward_loss: target has %s rows, the input %d'):format(target:dim() == 0 and 'no' or target:size(1),
      x:size(1)), 2)
  end
  local okr, run = pcall(Run.new, self, criterion, kind, x, target, autograd.is_grad_enabled())
  if not okr then error((tostring(run):gsub('^[^:\n]*:%d+: ', '', 1)), 2) end
  -- (the stages hold one batch: a batch whose backward has not run is
  -- dropped, and its loss:backward() says so, instead of running over this
  -- batch's buffers)
  if Run.unfinished(self.pending_run) then
    self.pending_run.superseded = true
    self:_abort()
  end
  self.pending_run = run.recording and run or nil
  self:_begin_batch()
  run:_go(run.recording, 2)   -- (not recording: every forward now, there is no backward to run them)
  return run
end
function Pipeline.forward_loss_ok(_, criterion) return floss.ok(criterion) end

-- pipe:abandon() -> whether a batch was pending: drops the batch whose
-- loss:backward() has not run (a loss lost or not finite), as the next
-- forward_loss would; that loss's backward then says so
function Pipeline:abandon()
  if not Run.unfinished(self.pending_run) then return false end
  self.pending_run.superseded = true
  self:_abort()
  self.pending_run = nil
  return true
end

local function run_forward(self, x)
  local R, S = self.replicas, self.S
  local B = x:size(1)
  local M = math.min(self.chunks, math.floor(B / R))
  local last = x.device   -- (the output goes back to the input's device: criterion(pipe(x), y) as usual)
  local outs, pos = {}, 1
  for r = 1, R do
    local n = math.floor(B / R) + (r <= B % R and 1 or 0)
    local b, e = math.floor(n / M), n % M
    for m = 1, M do
      local k = b + (m <= e and 1 or 0)
      local y = x:narrow(1, pos, k)
      pos = pos + k
      for s = 1, S do
        local st = self.stages[r][s]
        st:collect()
        if y.device ~= st.device then y = y:to(st.device) end
        y = st.seq:forward(y)
        if not lunet.is_tensor(y) then error(('stage %d returned a %s, not a tensor'):format(s, typename(y)), 0) end
      end
      outs[#outs + 1] = y.device ~= last and y:to(last) or y
    end
  end
  if #outs == 1 then return outs[1] end
  return lunet.cat(outs, 1)
end

function Pipeline:forward(x)
  need_input(x, 'forward', 2)
  if self.replicas > 1 and autograd.is_grad_enabled() and self.training then
    fail('forward: with replicas, train with pipe:forward_loss(criterion, x, y) (or run pipe(x) in lunet.no_grad)', 2)
  end
  if x:size(1) < self.replicas then fail(('forward: a batch of %d rows for %d replicas'):format(x:size(1), self.replicas), 2) end
  self:_ready(x, 2)
  self:_begin_batch()
  local ok, y = pcall(run_forward, self, x)
  if not ok then
    self:_abort()
    fail('forward: ' .. tostring(y):gsub('[%w_%./%-]+%.lua:%d+: ', ''):gsub('^Pipeline: ', ''), 2)
  end
  self:_batch_done()
  return y
end

-- ---- Module interface: the model's parameters under their own names -----------------------------

function Pipeline:named_modules(prefix, out)
  out = out or {}
  prefix = prefix or ''
  out[#out + 1] = { prefix, self }
  self.module:named_modules(prefix, out)
  for r = 2, self.replicas do
    self.models[r]:named_modules((prefix == '' and '' or prefix .. '.') .. 'replica' .. r, out)
  end
  return out
end

function Pipeline:apply(fn)
  if type(fn) ~= 'function' then fail('apply: expected a function, got ' .. typename(fn), 2) end
  for r = 1, self.replicas do self.models[r]:apply(fn) end
  fn(self)
  return self
end

function Pipeline:state_dict(opts) return self.module:state_dict(opts) end

function Pipeline:load_state_dict(sd, strict)
  local ok, res = pcall(self.module.load_state_dict, self.module, sd, strict)
  if not ok then error(res, 2) end
  autograd.no_grad(function()
    for r = 2, self.replicas do
      local own = self.models[r]:state_dict()
      for k, t in pairs(self.module:state_dict()) do own[k]:copy_(t) end
    end
  end)
  return res
end

function Pipeline:to(what, more)
  local dtype = type(what) == 'string' and core.dtype_ids[what] and what or is_table(what) and what.dtype or more
  local dev = is_table(what) and what.device or (type(what) == 'string' and not core.dtype_ids[what] and what)
  if dev then fail(('to: the stages live on %s; make the Pipeline with the devices you want'):format(
    table.concat(self.devices, ', ')), 2) end
  if not dtype then fail('to: expected a dtype', 2) end
  if not self.stages then
    for r = 1, self.replicas do self.models[r]:to(dtype) end
    return self
  end
  for r = 1, self.replicas do
    for s = 1, self.S do
      local st = self.stages[r][s]
      for _, m in ipairs(st.mods) do m:to({ dtype = dtype, device = st.device }) end
    end
  end
  for _, red in pairs(self.reducers or {}) do red:rebuild() end
  return self
end

function Pipeline:extra_repr()
  if not self.stages then
    return ('%s, %d chunks, %d stages on %s, balance by %s at the first batch'):format(
      type(self.kind) == 'string' and self.kind or 'custom', self.chunks, self.S, table.concat(self.devices, ', '),
      self.balance)
  end
  local per = {}
  for s = 1, self.S do per[s] = ('%s: %d'):format(self.stages[1][s].device, self.counts[s]) end
  local rep = self.replicas > 1 and (', %d replicas'):format(self.replicas) or ''
  local loop = self.S > self.P and (', %d stages on %d devices'):format(self.S, self.P) or ''
  return ('%s, %d chunks%s, atoms per stage %s%s'):format(type(self.kind) == 'string' and self.kind or 'custom',
    self.chunks, loop, table.concat(per, ', '), rep)
end

function Pipeline:repr(indent)
  indent = indent or ''
  return ('%s(%s) {\n%s  (module): %s\n%s}'):format(self.__name, self:extra_repr(), indent,
    self.module:repr(indent .. '  '), indent)
end

return Pipeline
