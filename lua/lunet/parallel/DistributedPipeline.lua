-- A parallel.Pipeline whose stages live in different processes:
-- Pipeline(model, {group = dist.world(), chunks = 8, ...}). Rank r of the
-- group (1-based, lunet.comm's numbering; process rank r - 1 of dist.world())
-- runs stage r on its device and holds only that stage's atoms there; the
-- other stages' modules stay where they were built and never run here.
--
--   local dist = require 'lunet.distributed'; dist.init()
--   lunet.manual_seed(1)                         -- the same model on every rank
--   local pipe = lunet.parallel.Pipeline(model, {group = dist.world(), chunks = 8, balance = 'params'})
--   local opt = optim.Adam(pipe:parameters())    -- this rank's stage's parameters
--   opt:zero_grad()
--   local loss = pipe:forward_loss(crit, x, y)   -- every rank; x read on the first, y on the last
--   loss:backward(); opt:step(); print(loss:item())   -- the same value on every rank
--
-- Every rank cuts the same model the same way (balance: a list of atom
-- counts, or 'params', the default here; 'time' or 'memory' with sample = x
-- on the first rank, which measures and sends the counts to the others; the
-- ranks check that they agree at construction) and
-- walks the same checked schedule, running only its stage's actions
-- (dpipe_run.lua). Parameters keep the model's names: state_dict() holds
-- this rank's stage; load_state_dict(sd) takes this stage's keys of a whole
-- model's sd; full_state_dict() gathers every stage's on the first rank.
-- replicas = k (group = dist.world()): k pipelines of W / k stages (process
-- p: pipeline p // (W / k) + 1, stage p % (W / k) + 1), each given its own
-- batch (a DataLoader's shard: num_replicas = k, rank = pipe.replica - 1),
-- the loss the mean over every pipeline's rows; each stage's gradients are
-- averaged over its k processes by a Reducer on a group of their own
-- (bucket_mb, compress), and its parameters and buffers start as the first
-- pipeline's (a broadcast). A forward_loss before the last batch's
-- backward is an error on every rank (that batch's transfers are still to
-- come); its backward then runs as before.
local Module = require 'lunet.nn.Module'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local options = require 'lunet.options'
local autograd = require 'lunet.autograd'
local atoms = require 'lunet.parallel.atoms'
local schedule = require 'lunet.parallel.schedule'
local Pipeline = require 'lunet.parallel.Pipeline'   -- (its option checks and schedule_text)
local Stage = require 'lunet.parallel.Stage'
local pbn = require 'lunet.parallel.pipeline_bn'
local floss = require 'lunet.parallel.forward_loss'
local balance = require 'lunet.parallel.pipeline_balance'
local Run = require 'lunet.parallel.dpipe_run'
local dstate = require 'lunet.parallel.dpipe_state'

local DP = Module:extend('parallel.Pipeline')

local function fail(msg, lvl) error('Pipeline: ' .. msg, (lvl or 1) + 1) end

local OPTS = { group = 'table', chunks = 'number', schedule = 'string|function', balance = 'string|table',
  checkpoint = 'string', deferred_bn = 'boolean', replicas = 'number', bucket_mb = 'number', compress = 'string',
  sample = 'tensor' }

local function join(prefix, name)
  if prefix == '' then return name end
  return name == '' and prefix or prefix .. '.' .. name
end

function DP:__init(model, opts)
  if not is_table(model) or not rawget(model, '_params') then fail('expected an nn.Module, got ' .. typename(model), 3) end
  if opts.devices ~= nil then
    fail('devices and group exclude each other: across processes each stage runs on its rank\'s device', 3)
  end
  opts = options.check('Pipeline', opts, OPTS)
  local group = opts.group
  if type(group.local_size) ~= 'function' or type(group.ranks) ~= 'function' then
    fail('group must be a lunet.comm Communicator (dist.world(), dist.group(ranks)), got ' .. tostring(group), 3)
  end
  if group:local_size() ~= 1 then
    fail(('group holds %d ranks in this process; across processes each holds one stage'):format(group:local_size()), 3)
  end
  local R = opts.replicas or 1
  if R % 1 ~= 0 or R < 1 then fail('replicas must be an integer >= 1, got ' .. tostring(R), 3) end
  local W, g = group:size(), group:ranks()[1]
  if W % R ~= 0 then fail(('%d processes cannot hold %d replicas of equal pipelines'):format(W, R), 3) end
  local S = W / R
  local r, s = math.floor((g - 1) / S) + 1, (g - 1) % S + 1
  if opts.schedule == 'interleaved' then
    fail("the interleaved schedule runs its stages in one process (each rank here is one stage)", 3)
  end
  local chunks, kind, ck = Pipeline.run_options(opts, S, 3)
  local bal = opts.balance or 'params'
  local list = atoms.of(model)
  if #list < S then fail(('the model has %d atoms, fewer than %d stages'):format(#list, S), 3) end
  local counts = balance.counts(list, S, bal, 3)
  if not counts then
    counts = self:_measured(group, list, { S = S, chunks = chunks, replicas = R, kind = kind }, bal, opts.sample, 3)
  end
  self:_agree(group, counts, chunks, #list, 3)
  local world = group
  if R > 1 then group = self:_groups(group, R, S, r, s, 3) end
  local first = 1
  for k = 1, s - 1 do first = first + counts[k] end
  local dev = group:devices()[1]
  local mods, mine, all = {}, {}, {}
  for i = first, first + counts[s] - 1 do
    mods[#mods + 1], mine[#mine + 1] = list[i].module, list[i]
    list[i].module:to(dev)
    for _, m in ipairs(list[i].module:modules()) do all[#all + 1] = m end
  end
  rawset(self, 'module', model)   -- (not a child: only this stage's atoms are this module's)
  self.group, self.S, self.s, self.device, self.chunks, self.kind = group, S, s, dev, chunks, kind
  self.world, self.replicas, self.replica = world, R, r
  self.checkpoint, self.counts, self.atoms, self.all_atoms, self.plans = ck, counts, mine, list, {}
  self.stage = Stage.new(s, mods, dev)
  if opts.deferred_bn or ck ~= 'never' then self.bn = pbn.wrap(all, opts.deferred_bn or false) end
  if R > 1 then self:_replicate(opts) end
  -- DataLoaders made from now on read this pipeline's shard by default
  local dist = package.loaded['lunet.distributed']
  if is_table(dist) and dist.is_initialized() then dist.set_data_shard(R, r - 1) end
end

-- replicas: the world's ranks as R pipelines of S stages (process p: replica
-- p // S + 1, stage p % S + 1); this rank's pipeline and the ranks holding
-- its stage in the other pipelines, as groups of their own
function DP:_groups(world, R, S, r, s, lvl)
  local dist = require 'lunet.distributed'
  if not dist.is_initialized() or world:size() ~= dist.world_size() or world:ranks()[1] ~= dist.rank() + 1 then
    fail('replicas: group must be dist.world() (the pipelines are cut from its process ranks)', lvl + 1)
  end
  local pipe, same = {}, {}
  for k = 1, S do pipe[k] = (r - 1) * S + k - 1 end
  for k = 1, R do same[k] = (k - 1) * S + s - 1 end
  self.pipe_ranks, self.stage_ranks = pipe, same
  local g = dist.group(pipe)
  self.stage_group = dist.group(same)
  return g
end

-- replicas: this stage's parameters and buffers from the first pipeline's,
-- and its Reducer (gradients averaged over the stage's replicas)
function DP:_replicate(opts)
  local Reducer = require 'lunet.parallel.Reducer'
  local g = self.stage_group
  autograd.no_grad(function()
    for _, a in ipairs(self.atoms) do
      for _, t in ipairs(a.module:parameters()) do g:broadcast({ t }, { root = 1 }) end
      for _, t in ipairs(a.module:buffers()) do g:broadcast({ t }, { root = 1 }) end
    end
  end)
  local params = Module.parameters(self)
  if #params > 0 then
    self.reducer = Reducer.new({ params }, g, { name = 'Pipeline', bucket_mb = opts.bucket_mb, compress = opts.compress })
  end
end

-- balance 'time' or 'memory': the group's first rank profiles every atom
-- with its sample on its device, as a one-process pipeline would over
-- devices like it (pipeline_balance.measured), and broadcasts the counts
function DP:_measured(group, list, shape, bal, sample, lvl)
  local lunet = require 'lunet'
  local dev, S = group:devices()[1], shape.S
  local v = lunet.zeros(S, { dtype = 'float64', device = dev })
  local err
  if group:ranks()[1] == 1 then
    if not lunet.is_tensor(sample) then
      err = ("balance '%s' across processes needs sample = x (a batch) on the first stage's rank"):format(bal)
    else
      shape.stage_devices = {}
      for k = 1, S do shape.stage_devices[k] = dev end
      local ok, c = pcall(balance.measured, shape, list, sample, bal)
      if ok then v = lunet.tensor(c, { dtype = 'float64', device = dev })
      else err = ('balance %s: %s'):format(bal, tostring(c):gsub('^[^:\n]*:%d+: ', '', 1)) end
    end
    if err then v:fill_(-1) end   -- (the others learn it failed)
  end
  group:broadcast({ v }, { root = 1 })
  local c = v:totable()
  if c[1] < 0 then
    fail(err or ("balance '%s': the first stage's rank could not measure (its error says why)"):format(bal), lvl + 1)
  end
  return c
end

-- every rank must cut the model alike and run as many chunks: checked once
-- (one allgather of {atoms, chunks, counts...})
function DP:_agree(group, counts, chunks, natoms, lvl)
  local lunet = require 'lunet'
  local S = #counts
  local v = { natoms, chunks }
  for k = 1, S do v[2 + k] = counts[k] end
  local mine = lunet.tensor(v, { dtype = 'float64', device = group:devices()[1] })
  local all = group:allgather({ mine })[1]:totable()
  for r = 1, group:size() do
    for k = 1, #v do
      if all[(r - 1) * #v + k] ~= v[k] then
        local theirs = {}
        for j = 1, #v do theirs[j] = all[(r - 1) * #v + j] end
        fail(('the ranks disagree: group rank %d has %d atoms, %d chunks, stages {%s}; group rank %d has %d, %d, {%s} '
          .. '(build the same model on every rank, with the same options)'):format(group:ranks()[1], v[1], v[2],
          table.concat(v, ',', 3), r, theirs[1], theirs[2], table.concat(theirs, ',', 3)), lvl + 1)
      end
    end
  end
end

-- the checked schedule for M micro-batches, its buffer slots and each stage's last forward
function DP:_plan(M)
  local p = self.plans[M]
  if p then return p end
  local ok, steps = pcall(schedule.make, self.kind, self.S, M)
  if not ok then fail(steps, 3) end
  -- messages between two ranks are matched in the order they are sent: a
  -- stage must run its micro-batches in the order of its neighbours
  local order = {}
  p = {}
  for t, step in ipairs(steps) do
    for _, a in ipairs(step) do
      local key = a[3] .. a[1]
      order[key] = order[key] or {}
      table.insert(order[key], a[2])
      if a[3] == 'F' and a[1] == self.S then p.lastF = t end   -- (the last one's step, in the end)
    end
  end
  for st = 1, self.S - 1 do
    for i = 1, M do
      if order['F' .. st][i] ~= order['F' .. (st + 1)][i] or order['B' .. st][i] ~= order['B' .. (st + 1)][i] then
        fail(('schedule: across processes stages %d and %d must run their micro-batches in the same order'):format(
          st, st + 1), 3)
      end
    end
  end
  -- (where the stage's replicas all-reduce: its last backward, or with W actions its last W)
  p.split = schedule.split(steps)
  p.lastB = order[(p.split and 'W' or 'B') .. self.s][M]
  -- the loss goes from the last rank to the others after the step of the
  -- last F(S, .), unless a backward ran by then (1F1B): then after the last
  -- step, so that each rank receives it after the gradients sent before it
  p.share = p.lastF
  for t = 1, p.lastF do
    for _, a in ipairs(steps[t]) do if a[3] == 'B' then p.share = #steps end end
  end
  p.steps, p.slot = steps, schedule.slots(steps, self.S, M, 1)
  self.plans[M] = p
  return p
end

-- pipe:forward_loss(criterion, x, target) on every rank -> loss (backward, item, output)
function DP:forward_loss(criterion, x, target)
  -- (every rank has the batch pending alike. Unlike one process's Pipeline,
  -- which drops such a batch, across processes its transfers still to come
  -- would be taken for the next batch's)
  if require('lunet.parallel.pipeline_run').unfinished(self.pending_run) then
    fail("forward_loss: the last batch's loss:backward() has not run (across processes its stages' transfers "
      .. 'are still to come); run it first', 2)
  end
  local ok, kind = pcall(floss.mean_kind, criterion, 1)
  if not ok then
    self:_poison()
    fail('forward_loss: ' .. tostring(kind):gsub('^[^:\n]*:%d+: ', '', 1):gsub('^DataParallel: forward_loss: ', '', 1), 2)
  end
  local okr, run = pcall(Run.new, self, criterion, kind, x, target, autograd.is_grad_enabled())
  if not okr then
    self:_poison()
    error((tostring(run):gsub('^[^:\n]*:%d+: ', '', 1)), 2)
  end
  if self.bn and self.training then self.bn:begin() end
  self.pending_run = run.recording and run or nil
  -- (without recording every forward runs now: 1F1B's later ones too, for eval)
  run:_go(run.recording, 2)
  return run
end

function DP:_recompute(m, M)
  local ck = self.checkpoint
  return ck == 'always' or (ck == 'except_last' and m < M)
end
function DP.forward_loss_ok(_, criterion) return floss.ok(criterion) end

-- pipe:abandon() on every rank -> whether a batch was pending: drops the
-- batch whose loss:backward() has not run (a loss lost or not finite).
-- Across processes its transfers are still to come, so its backward runs,
-- scaled by 0, to take them (every rank stays in step), and this rank's
-- parameters' gradients are put back as they were before it.
function DP:abandon()
  local run = self.pending_run
  if not require('lunet.parallel.pipeline_run').unfinished(run) then return false end
  local params, kept = self:parameters(), {}
  for i, p in ipairs(params) do local g = p.grad; kept[i] = g and g:clone() or false end
  local ok, err = pcall(run.backward, run, 0)
  for i, p in ipairs(params) do p.grad = kept[i] or nil end
  self.pending_run = nil
  if not ok then fail('abandon: ' .. tostring(err):gsub('^[^:\n]*:%d+: ', '', 1), 2) end
  return true
end

-- pipe:schedule_text([chunks]): the schedule as a timeline (every stage's, as every rank walks it)
DP.schedule_text, DP.stages_where = Pipeline.schedule_text, ' over processes'

function DP:balance_report()
  fail('balance_report: not measured across processes (the stages are cut by parameters or by your list)', 2)
end
function DP:rebalance() fail('rebalance: not offered across processes (give balance = {counts...})', 2) end

function DP:forward()
  fail('forward: across processes, run pipe:forward_loss(criterion, x, y) on every rank (loss:output() '
    .. 'gives the outputs on the last stage\'s rank)', 2)
end

-- After an error on this rank the others may wait for its messages: each
-- gets one it cannot take (POISON), so that its next receive from this rank
-- fails at once (dpipe_run names it), and its failed stream's sends tell
-- their receivers in turn. The ranks are then out of step for good.
function DP:_poison()
  local lunet = require 'lunet'
  local t = lunet.zeros(Run.POISON, { dtype = 'uint8', device = self.device })
  for k = 1, self.S do
    if k ~= self.s then pcall(self.group.send, self.group, t, k) end
  end
end

function DP:_abort()
  self:_poison()
  self.stage:reset()
  if self.bn then self.bn:abort() end
  if self.reducer then self.reducer:abort() end
end

-- ---- Module interface: this stage's parameters under the model's names -------------------------

function DP:named_modules(prefix, out)
  out = out or {}
  prefix = prefix or ''
  out[#out + 1] = { prefix, self }
  for _, a in ipairs(self.atoms) do a.module:named_modules(join(prefix, a.name), out) end
  return out
end

-- load_state_dict(sd[, strict]): this stage's keys of sd (a whole model's
-- state, or this stage's); strict: every one of them must be there
function DP:load_state_dict(sd, strict)
  if not is_table(sd) then fail('load_state_dict: expected a table of tensors, got ' .. typename(sd), 2) end
  local own, mine = {}, {}
  for k in pairs(Module.state_dict(self)) do own[k] = true end
  for k, v in pairs(sd) do if own[k] then mine[k] = v end end
  local ok, res = pcall(Module.load_state_dict, self, mine, strict)
  if not ok then error(res, 2) end
  return res
end

-- full_state_dict(): every stage's parameters and buffers sent to the first
-- rank, which returns the whole model's state_dict (the others: nil).
-- Called by every rank of the group.
function DP:full_state_dict()
  local ok, sd = pcall(dstate.gather, self, 1)
  if not ok then fail('full_state_dict: ' .. tostring(sd):gsub('[%w_%./%-]+%.lua:%d+: ', ''):gsub('^Pipeline: ', ''), 2) end
  return sd
end

-- ---- lunet.fit's hooks (fit.lua calls them as DistributedDataParallel's) ------------------------
-- The ranks of a pipeline read the same batches (each pipeline its shard);
-- the loss is every pipeline's batch's on every rank, the outputs are on the
-- last stage's ranks (loss:metric_outputs), so the metrics are counted there
-- and summed over the ranks. The last stage's rank of the first pipeline
-- prints, logs and writes the checkpoint: the whole model and optimizer
-- state (dpipe_state.lua).

-- fit evaluates with forward_loss (pipe(x) is not offered across processes)
DP.forward_loss_only = true
DP.sync_next = Pipeline.sync_next   -- (accumulate = k: only a group's last batch all-reduces the replicas')

function DP:is_main() return self.replica == 1 and self.s == self.S end

-- pipe:sum_numbers({a, b, ...}) -> the sums over every rank of the world (a host wait)
function DP:sum_numbers(list)
  local lunet = require 'lunet'
  local t = lunet.tensor(list, { dtype = 'float64', device = self.device })
  self.world:allreduce({ t }, { op = 'sum' })
  return t:totable()
end

-- pipe:any_rank(flag) -> whether flag is true on any rank of the world (a
-- host wait; fit's Ctrl-C: every rank stops at the same step, and the
-- checkpoint is gathered)
function DP:any_rank(flag)
  local lunet = require 'lunet'
  local t = lunet.tensor({ flag and 1 or 0 }, { dtype = 'float64', device = self.device })
  self.world:allreduce({ t }, { op = 'max' })
  return t:item() > 0
end

-- pipe:check_loaders(fname, loader, ...): the ranks of a pipeline must read
-- the same batches, each pipeline its own shard: a DataLoader with
-- num_replicas = pipe.replicas, rank = pipe.replica - 1. One allgather of
-- each loader's length, batch size, seed, shuffle and sharding: every rank
-- learns of a difference, so all raise together.
local LOADER = { 'batches', 'batch_size', 'seed', 'shuffle', 'num_replicas', 'rank' }
function DP:check_loaders(fname, ...)
  local lunet = require 'lunet'
  local loaders, v, K = { ... }, {}, #LOADER
  local nl = select('#', ...)
  for i = 1, nl do
    local l = loaders[i]
    local shuffled = l ~= nil and l.shuffle == true
    local vals = { l ~= nil and #l or -1, l ~= nil and l.batch_size or -1, shuffled and l.seed or -1,
      shuffled and 1 or 0, l ~= nil and l.num_replicas or 1, l ~= nil and l.rank or 0 }
    for k = 1, K do v[#v + 1] = type(vals[k]) == 'number' and vals[k] or -1 end
  end
  local W, S, R = self.world:size(), self.S, self.replicas
  local all = self.world:allgather({ lunet.tensor(v, { dtype = 'float64', device = self.device }) })[1]:totable()
  local function at(p, i, k) return all[p * #v + (i - 1) * K + k] end   -- (process rank p of the world, loader i)
  for i = 1, nl do
    local name = i == 1 and 'the loader' or 'the val_loader'
    for p = 0, W - 1 do
      local want = math.floor(p / S)   -- (its pipeline's shard)
      if at(p, i, 5) ~= R or at(p, i, 6) ~= want then
        error(('%s: %s of process rank %d is sharded as rank %d of %d, but the ranks of a pipeline across processes '
          .. 'read the same batches (the first stage\'s rank the inputs, the last\'s the targets), each pipeline its '
          .. 'shard: give the DataLoader num_replicas = pipe.replicas (%d) and rank = pipe.replica - 1 (%d on process '
          .. 'rank %d)'):format(fname, name, p, at(p, i, 6), at(p, i, 5), R, want, p), 0)
      end
      for k = 1, 4 do
        if at(p, i, k) ~= at(0, i, k) then
          error(('%s: %s differs between the ranks of the pipeline: process rank 0 has %s = %s, process rank %d %s '
            .. '(build it alike on every rank, with a seed)'):format(fname, name, LOADER[k], tostring(at(0, i, k)), p,
            tostring(at(p, i, k))), 0)
        end
      end
    end
  end
end

-- pipe:gather_state(state, optimizer) on every rank: the training state
-- `state` (Trainer:state_dict(), this stage's) with the whole model and
-- optimizer state on the main rank, nil on the others
function DP:gather_state(state, optimizer)
  if self.replica ~= 1 then return nil end   -- (the other pipelines hold the same)
  local ok, sd, osd = pcall(dstate.gather, self, self.S, optimizer, state.optimizer)
  if not ok then fail('checkpoint: ' .. tostring(sd):gsub('[%w_%./%-]+%.lua:%d+: ', ''):gsub('^Pipeline: ', ''), 2) end
  if not sd then return nil end
  state.model, state.optimizer = sd, osd
  return state
end

-- pipe:stage_state(state, optimizer): a whole training state (a checkpoint's,
-- of a pipeline with any stage count or of one process) cut to this stage's
function DP:stage_state(state, optimizer)
  local ok, res = pcall(dstate.stage_state, self, state, optimizer, 1)
  if not ok then fail('resuming: ' .. tostring(res):gsub('[%w_%./%-]+%.lua:%d+: ', ''):gsub('^Pipeline: ', ''), 2) end
  return res
end

function DP:to(what, more)
  local core = require 'lunet.core'
  local dtype = type(what) == 'string' and core.dtype_ids[what] and what or is_table(what) and what.dtype or more
  if not dtype or (is_table(what) and what.device) then
    fail(('to: this stage lives on %s (the group\'s device); only a dtype can change'):format(self.device), 2)
  end
  for _, a in ipairs(self.atoms) do a.module:to({ dtype = dtype, device = self.device }) end
  if self.reducer then self.reducer:rebuild() end
  return self
end

function DP:extra_repr()
  return ('%s, %d chunks, stage %d of %d on %s: %d atoms%s'):format(type(self.kind) == 'string' and self.kind or 'custom',
    self.chunks, self.s, self.S, self.device, self.counts[self.s],
    self.replicas > 1 and (', pipeline %d of %d'):format(self.replica, self.replicas) or '')
end

return DP
