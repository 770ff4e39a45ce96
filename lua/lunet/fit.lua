-- lunet.fit / lunet.Trainer: the training loop most scripts need.
--   local history = lunet.fit(model, loader, {epochs = 10, optimizer = opt,
--     val_loader = test, log = 'metrics.csv', plot = 'curves.svg',
--     checkpoint = 'run.ckpt', checkpoint_every = {steps = 200}, resume = true})
-- accumulate = k: one optimizer step per k batches, on the mean of their
-- gradients (a DataParallel made with accumulate = k does this by itself).
-- checkpoint_every: {epochs = N} (the default, N = 1), {steps = N}, both, or a
-- number N meaning every N epochs ('epoch' and 'step' mean every one).
-- An unknown option is an error naming the closest known one.
-- scheduler: stepped after each epoch (scheduler_step = 'step': after each
-- optimizer step); a ReduceLROnPlateau is stepped with the epoch's
-- validation loss, or its training loss without val_loader (as Lightning does).
-- A DistributedDataParallel model (one process per rank): the epoch's
-- metrics are summed over the ranks (each rank's loader holds its shard), and
-- only rank 0 prints, logs, plots and writes the checkpoint (atomically, as
-- lunet.save does); every rank resumes from it, with any world size (the
-- loader's position is converted: DataLoader:load_state_dict).
-- A Pipeline across processes (Pipeline(model, {group = ...})): every rank
-- calls fit alike, the ranks of a pipeline with the same batches (a
-- DataLoader with num_replicas = pipe.replicas, rank = pipe.replica - 1;
-- checked); the metrics are counted where the outputs are (the last stage's
-- ranks) and summed, so every rank returns the same history; the last stage's
-- rank of the first pipeline prints, logs and writes the checkpoint, which
-- holds the whole model and optimizer state (resumable in one process, or
-- with another stage count). Its hooks: DistributedPipeline.lua.
-- Progress: a bar with rate and ETA on a terminal; otherwise (a log, a pipe) a
-- line every few seconds (lunet.progress) and one per epoch. progress = true
-- forces the bar, 'lines' the lines, false neither.
local ffi = require 'ffi'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local json = require 'lunet.json'
local checkpoint = require 'lunet.checkpoint'
local Progress = require 'lunet.progress'
local options = require 'lunet.options'

pcall(ffi.cdef, 'int isatty(int fd);')

local Trainer = {}
Trainer.__index = Trainer

local function lunet() return require 'lunet' end

local OPTS = { epochs = 'number', loss = true, lr = 'number', optimizer = 'table', scheduler = 'table',
  scheduler_step = 'string', val_loader = true, topk = 'number', log = 'string', plot = 'string',
  checkpoint = 'string', checkpoint_every = 'number|string|table', resume = 'boolean', max_steps = 'number',
  on_interrupt = 'string', quiet = 'boolean', progress = 'boolean|string', accumulate = true }
local ALIASES = { criterion = 'loss' }   -- the name PyTorch tutorials give the loss module

local function positive_int(v) return type(v) == 'number' and v >= 1 and v % 1 == 0 end

-- checkpoint_every as {epochs = N} and/or {steps = N}
local function ckpt_every(v)
  if v == nil or v == 'epoch' then return { epochs = 1 } end
  if v == 'step' then return { steps = 1 } end
  if type(v) == 'number' then
    if not positive_int(v) then options.fail('fit', 'checkpoint_every must be a positive integer (epochs), got ' .. v) end
    return { epochs = v }
  end
  if type(v) == 'string' then
    options.fail('fit', ("checkpoint_every must be a number of epochs, 'epoch', 'step', {epochs = N} or {steps = N}, got '%s'"):format(v))
  end
  options.check('fit: checkpoint_every', v, { epochs = 'number', steps = 'number' })
  if v.epochs == nil and v.steps == nil then options.fail('fit', 'checkpoint_every needs epochs = N or steps = N') end
  for _, k in ipairs({ 'epochs', 'steps' }) do
    if v[k] ~= nil and not positive_int(v[k]) then
      options.fail('fit', ('checkpoint_every.%s must be a positive integer, got %s'):format(k, tostring(v[k])))
    end
  end
  return v
end

function Trainer.new(model, opts)
  opts = options.check('fit', opts, OPTS, ALIASES) or {}
  if not is_table(model) or not model.parameters then
    error('Trainer: model must be an nn.Module', 3)
  end
  local self = setmetatable({}, Trainer)
  self.model = model
  self.epochs = opts.epochs or 1
  -- (math.huge: until max_steps or Ctrl-C)
  if type(self.epochs) ~= 'number' or not (self.epochs >= 1) or (self.epochs % 1 ~= 0 and self.epochs ~= math.huge) then
    error('fit: epochs must be >= 1, a whole number, got ' .. tostring(self.epochs), 3)
  end
  self.criterion = opts.loss or lunet().nn.CrossEntropyLoss()
  local crit = self.criterion
  local mt = is_table(crit) and getmetatable(crit)
  if type(crit) ~= 'function' and not (mt and mt.__call) then
    error(('fit: loss must be a criterion (an nn loss module such as nn.CrossEntropyLoss(), or a function '
      .. '(output, target) -> loss), got %s'):format(typename(crit)), 3)
  end
  if model.forward_loss_only and not model:forward_loss_ok(self.criterion) then   -- (a Pipeline across processes)
    local c = self.criterion
    error(('fit: a Pipeline across processes computes the loss on its last stage (forward_loss), which takes %s '
      .. "with reduction 'mean' or 'sum' and no class weights; got %s"):format(
      'CrossEntropyLoss, NLLLoss, MSELoss or BCEWithLogitsLoss', is_table(c) and tostring(c.__name or 'a table')
      or type(c)), 3)
  end
  if opts.lr ~= nil then
    if opts.optimizer then
      options.fail('fit', 'lr and optimizer exclude each other (lr makes an SGD optimizer; give yours its own lr)')
    end
    if not (opts.lr >= 0) or opts.lr == math.huge then
      options.fail('fit', 'lr must be a finite number >= 0, got ' .. tostring(opts.lr))
    end
  end
  self.optimizer = opts.optimizer or lunet().optim.SGD(model:parameters(), { lr = opts.lr or 0.01 })
  -- (an optimizer made for another model, or before this one was made
  -- again, would step tensors the model does not use: nothing would train)
  local mine, theirs, shared = {}, 0, false
  for _, p in ipairs(model:parameters()) do mine[p] = true end
  for _, g in ipairs(is_table(self.optimizer.param_groups) and self.optimizer.param_groups or {}) do
    for _, p in ipairs(is_table(g.params) and g.params or {}) do
      theirs = theirs + 1
      if mine[p] then shared = true end
    end
  end
  if theirs > 0 and next(mine) ~= nil and not shared then
    error("fit: the optimizer holds none of the model's parameters (made for another model, or before the model was made again?)", 3)
  end
  self.scheduler = opts.scheduler
  if is_table(opts.scheduler) and is_table(opts.scheduler.optimizer) and opts.scheduler.optimizer ~= self.optimizer then
    options.fail('fit', "the scheduler was made for another optimizer than fit's (its learning rate would not change)")
  end
  self.scheduler_per = opts.scheduler_step or 'epoch'    -- or 'step' (OneCycleLR)
  if is_table(opts.scheduler) and opts.scheduler.takes_metric and self.scheduler_per == 'step' then
    options.fail('fit', ("a %s steps on the epoch's loss: it needs scheduler_step = 'epoch'"):format(tostring(opts.scheduler.name)))
  end
  local vl = opts.val_loader
  if vl ~= nil and ((type(vl) ~= 'table' and type(vl) ~= 'userdata') or not vl.iter) then
    options.fail('fit', 'val_loader must be a DataLoader, got ' .. typename(vl))
  end
  self.val_loader = vl
  if opts.topk ~= nil and not positive_int(opts.topk) then
    options.fail('fit', 'topk must be an integer >= 1, got ' .. tostring(opts.topk))
  end
  if opts.max_steps ~= nil and not positive_int(opts.max_steps) and opts.max_steps ~= math.huge then
    options.fail('fit', 'max_steps must be an integer >= 1, got ' .. tostring(opts.max_steps))
  end
  self.topk = opts.topk
  self.log_path, self.plot_path = opts.log, opts.plot
  self.ckpt_path = opts.checkpoint
  self.ckpt_every = ckpt_every(opts.checkpoint_every)
  if opts.checkpoint_every ~= nil and not self.ckpt_path then
    options.fail('fit', 'checkpoint_every needs checkpoint = a file path to write to')
  end
  if opts.resume and not self.ckpt_path then options.fail('fit', 'resume = true needs checkpoint = the file to resume from') end
  options.one_of('fit', 'scheduler_step', opts.scheduler_step, { 'epoch', 'step' })
  options.one_of('fit', 'on_interrupt', opts.on_interrupt, { 'error', 'return' })
  if type(opts.progress) == 'string' and opts.progress ~= 'lines' then
    options.fail('fit', ("progress must be true, false or 'lines', got '%s'"):format(opts.progress))
  end
  self.resume = opts.resume
  self.max_steps = opts.max_steps              -- stop early (smoke runs, tests)
  -- batches per optimizer step (see train_epoch); a DataParallel's own by default
  local acc, own = opts.accumulate, rawget(model, 'accumulate')
  if acc ~= nil and (type(acc) ~= 'number' or acc < 1 or acc % 1 ~= 0 or acc == math.huge) then
    error('fit: accumulate must be an integer >= 1, got ' .. tostring(acc), 3)
  end
  if acc and type(own) == 'number' and own ~= 1 and own ~= acc then
    error(('fit: accumulate = %d, but the model accumulates %d batches (its accumulate option); give one of them')
      :format(acc, own), 3)
  end
  self.accumulate = acc or (type(own) == 'number' and own) or 1
  self.on_interrupt = opts.on_interrupt or 'error'   -- Ctrl-C: 'error' or 'return'
  -- rank 0 of a DistributedDataParallel (or no distribution) speaks and writes
  self.main = not model.is_main or model:is_main()
  self.quiet = opts.quiet or not self.main
  if not self.main then self.log_path, self.plot_path = nil, nil end
  -- the files' folders writable now, not after the first epoch's training
  for _, w in ipairs { { 'checkpoint', self.main and self.ckpt_path }, { 'log', self.log_path }, { 'plot', self.plot_path } } do
    if w[2] then
      local ok, why = require('lunet.serialize').writable(w[2])
      if not ok then options.fail('fit', ('cannot write the %s %s: %s'):format(w[1], w[2], why)) end
    end
  end
  self.progress = opts.progress
  if not self.main then self.progress = false end
  if self.progress == nil then self.progress = not self.quiet and (ffi.C.isatty(1) == 1 or 'lines') end
  self.history, self.epoch, self.step = {}, 0, 0
  return self
end

-- ---- state for checkpoints ----------------------------------------------------------

function Trainer:state_dict(loader)
  if loader ~= nil and not is_table(loader) and type(loader) ~= 'userdata' then
    error('Trainer:state_dict: loader must be a DataLoader, got ' .. typename(loader), 2)
  end
  local seed, offset = lunet().rng_state()
  return {
    model = self.model:state_dict(),
    optimizer = self.optimizer:state_dict(),
    scheduler = self.scheduler and self.scheduler:state_dict() or nil,
    loader = loader and loader.state_dict and loader:state_dict() or nil,
    rng = { seed = seed, offset = offset },
    epoch = self.epoch, step = self.step, history = self.history,
    running = self.running,
  }
end

function Trainer:load_state_dict(state, loader)
  -- every entry checked before any is restored (a valid crc32 says nothing about types)
  local ok, err = pcall(require('lunet.trainer_state').check, self, state, loader, 'Trainer:load_state_dict')
  if not ok then error(err, 2) end
  self.model:load_state_dict(state.model)
  self.optimizer:load_state_dict(state.optimizer)
  if self.scheduler and state.scheduler then self.scheduler:load_state_dict(state.scheduler) end
  if loader and state.loader and loader.load_state_dict then loader:load_state_dict(state.loader) end
  lunet().set_rng_state(state.rng.seed, state.rng.offset)
  self.epoch, self.step, self.history = state.epoch, state.step, state.history or {}
  self.running = state.running
end

-- Under DistributedDataParallel every rank calls it (at the same steps): the
-- epoch's running metrics are summed over the ranks, and rank 0 writes them
-- (after Ctrl-C, which ranks may see at different steps, rank 0's own). A
-- Pipeline across processes gathers its stages' states on the main rank (its
-- ranks stop after the same step on Ctrl-C: any_rank).
function Trainer:save_checkpoint(loader)
  if not self.ckpt_path then return end
  local gather = self.model.gather_state
  local live, run = self.running, self.running
  if run and self.model.sum_numbers and (not self.interrupted or self.model.any_rank) then
    local t = self.model:sum_numbers({ run.loss, run.correct, run.seen, run.topk })
    run = { loss = t[1], correct = t[2], seen = t[3], topk = t[4], steps = run.steps, batches = run.batches }
  end
  if not self.main and not gather then return end
  self.running = run
  local ok, err = pcall(function()
    local state = self:state_dict(loader)
    if gather then state = self.model:gather_state(state, self.optimizer) end
    if self.main then checkpoint.save(self.ckpt_path, state) end
  end)
  self.running = live
  if not ok then error(err, 0) end
end

-- ---- one epoch ----------------------------------------------------------------------

local function new_running() return { loss = 0, correct = 0, topk = 0, seen = 0, steps = 0, batches = 0 } end

-- loss sum, correct count, top-k count for a batch (tensor ops; one sync each)
local function batch_metrics(out, y, topk)
  local correct = out:argmax(2):eq(y):sum():item()
  local k_correct
  if topk then
    local true_logit = out:gather(2, y:view(-1, 1))
    k_correct = out:gt(true_logit):sum(2):lt(topk):sum():item()
  end
  return correct, k_correct
end

-- the outputs for the metrics and the targets they are for: a Pipeline
-- across processes has them on its last stage's ranks only (nil elsewhere)
local function outputs(loss, y)
  if loss.metric_outputs then return loss:metric_outputs(y) end
  return loss:output(), y
end

-- One micro-batch: forward, loss, backward of scale * loss (scale = 1/r in a
-- group of r batches: the step's gradient is their mean). Returns the loss
-- (a number), the outputs for the metrics and their targets (see outputs).
function Trainer:micro_step(x, y, scale, sync)
  local model, crit = self.model, self.criterion
  if model.sync_next then model:sync_next(sync) end   -- DataParallel: reduce on the group's last batch only
  local out, loss
  if model.forward_loss and model:forward_loss_ok(crit) then
    loss = model:forward_loss(crit, x, y)   -- DataParallel: the loss on each replica's shard
    loss:backward(scale ~= 1 and scale or nil)
  else
    out = model(x)
    loss = crit(out, y)
    if scale ~= 1 then loss:backward(lunet().full_like(loss, scale)) else loss:backward() end
  end
  -- checked before the update (backward is already queued): the model (and
  -- any checkpoint) keeps the last finite step's parameters
  local l = loss:item()
  if l ~= l or l == math.huge or l == -math.huge then
    error(('fit: loss became %s at epoch %d, step %d; stopping (the parameters are those before this step;' ..
      ' lunet.detect_anomaly names the op that produced it)'):format(tostring(l), self.epoch + 1, self.step + 1), 0)
  end
  if out then return l, out, y end
  return l, outputs(loss, y)
end

-- With accumulate = k, one optimizer step per k batches (a group): the
-- gradient is the mean of the group's batch losses' gradients, as PyTorch's
-- (loss / k):backward() loop; an epoch's last group may be shorter (r < k
-- batches): it is stepped on too, with the mean over its r batches.
-- self.step, max_steps, checkpoint_every.steps, a per-step scheduler and the
-- progress bar count optimizer steps.
function Trainer:train_epoch(loader)
  local model, opt, k = self.model, self.optimizer, self.accumulate
  model:train()
  local run = self.running or new_running()
  self.running = run
  run.batches = run.batches or run.steps * k   -- (a checkpoint from before accumulate counted steps)
  local nbatches = #loader
  local bar = self.progress and Progress.new(math.ceil(nbatches / k), ('epoch %d/%d'):format(self.epoch + 1, self.epochs),
    nil, self.progress == 'lines')
  local t0 = lunet().clock()
  local start_images = run.seen
  local t_first, first_steps, t_last, last_steps
  -- resumed from a step checkpoint taken after the epoch's last batch: the
  -- epoch has no batches left (the loader's next iter() would start the next)
  local batches = self.epoch_done and function() return nil end or loader:iter()
  self.epoch_done = nil
  if model.range_number then
    -- DistributedDataParallel: ranks whose loaders have different lengths
    -- (not sharded by the DataLoader) stop together after the shortest's
    -- batches (ddp:join: a flag all-reduced per step), and group their
    -- accumulation by that count, so that they reduce at the same batches
    local least, most = model:range_number(nbatches)
    if least ~= most then nbatches, batches = least, model:join(batches) end
  end
  for x, y in batches do
    -- this batch's place in its group (groups start at the epoch's first batch)
    local pos = run.batches % k
    local size = math.min(k, nbatches - (run.batches - pos))
    if pos == 0 then opt:zero_grad() end
    local last = pos + 1 >= size
    local l, out, t = self:micro_step(x, y, 1 / size, last)
    local n, correct, k_correct = 0, 0, nil
    if out then n, correct, k_correct = t:size(1), batch_metrics(out, t, self.topk) end
    run.loss, run.correct, run.seen, run.batches = run.loss + l * n, run.correct + correct, run.seen + n, run.batches + 1
    if k_correct then run.topk = run.topk + k_correct end
    if last then
      opt:step()
      if self.scheduler and self.scheduler_per == 'step' then self.scheduler:step() end
      run.steps = run.steps + 1
      self.step = self.step + 1
      -- (steps after the epoch's first, whose warm-up the plan does not predict)
      local now = lunet().clock()
      if not t_first then t_first, first_steps = now, run.steps else t_last, last_steps = now, run.steps end
      if bar then
        local dt = lunet().clock() - t0
        bar:update(run.steps, ('loss %.4f acc %.2f%% %.0f img/s'):format(run.loss / run.seen,
          100 * run.correct / run.seen, (run.seen - start_images) / math.max(dt, 1e-9)))
      end
      if self.ckpt_every.steps and self.step % self.ckpt_every.steps == 0 then self:save_checkpoint(loader) end
      if self.max_steps and self.step >= self.max_steps then break end
      if self.sigint then
        local stop = self.sigint.ln_sigint_pending(1) == 1
        -- (a Pipeline across processes: every rank stops at the step where one saw it)
        if model.any_rank then stop = model:any_rank(stop) end
        if stop then
          self.interrupted, self.interrupted_running = true, run
          break
        end
      end
    end
  end
  if bar then bar:finish() end
  if model.sum_numbers then   -- DistributedDataParallel: over every rank's shard
    local t = model:sum_numbers({ run.loss, run.correct, run.seen - start_images, run.seen, run.topk })
    run = { loss = t[1], correct = t[2], seen = t[4], topk = t[5] }
    start_images = t[4] - t[3]
  end
  local dt = lunet().clock() - t0
  self.running = nil
  self.step_time = t_last and (t_last - t_first) / (last_steps - first_steps) or nil
  return {
    train_loss = run.loss / math.max(run.seen, 1),
    train_acc = run.correct / math.max(run.seen, 1),
    train_topk = self.topk and run.topk / math.max(run.seen, 1) or nil,
    images_per_s = (run.seen - start_images) / math.max(dt, 1e-9),
    time = dt,
  }
end

-- Loss and accuracy of model on loader, without gradients.
function Trainer:evaluate(loader)
  local tl = type(loader)
  if (tl ~= 'table' and tl ~= 'userdata') or not loader.iter then error('evaluate: loader must be a DataLoader', 2) end
  local model, crit = self.model, self.criterion
  model:eval()
  local loss, correct, k_correct, seen = 0, 0, 0, 0
  lunet().no_grad(function()
    for x, y in loader:iter() do
      local out, t, l = nil, y, nil
      if model.forward_loss_only then   -- (a Pipeline across processes)
        local pl = model:forward_loss(crit, x, y)
        l = pl:item()
        out, t = outputs(pl, y)
      else
        out = model(x)
        l = crit(out, y):item()
      end
      if out then
        local n = t:size(1)
        loss = loss + l * n
        local c, k = batch_metrics(out, t, self.topk)
        correct, k_correct, seen = correct + c, k_correct + (k or 0), seen + n
      end
    end
  end)
  model:train()
  if model.sum_numbers then   -- DistributedDataParallel: every rank's shard (a pipeline: its last stage's)
    local t = model:sum_numbers({ loss, correct, k_correct, seen })
    loss, correct, k_correct, seen = t[1], t[2], t[3], t[4]
  end
  return { loss = loss / math.max(seen, 1), acc = correct / math.max(seen, 1),
           topk = self.topk and k_correct / math.max(seen, 1) or nil }
end

-- ---- logging ------------------------------------------------------------------------

local columns = { 'epoch', 'step', 'lr', 'train_loss', 'train_acc', 'val_loss', 'val_acc', 'images_per_s', 'time' }

function Trainer:log_epoch(rec)
  if not self.quiet then
    local s = ('epoch %d/%d  loss %.4f  acc %.2f%%'):format(rec.epoch, self.epochs, rec.train_loss, 100 * rec.train_acc)
    if rec.val_loss then s = s .. ('  val_loss %.4f  val_acc %.2f%%'):format(rec.val_loss, 100 * rec.val_acc) end
    s = s .. ('  %.0f img/s  %.1fs'):format(rec.images_per_s, rec.time)
    print(s)
    io.stdout:flush()
  end
  if not self.log_path then return end
  local jsonl = self.log_path:match('%.jsonl?$')
  local function open(mode)   -- (an exists check that opens nothing: a FIFO would wait)
    local f, err = io.open(self.log_path, mode)
    if not f then error(('fit: cannot write the log %s: %s'):format(self.log_path, err), 0) end
    return f
  end
  local new = not require('lunet.serialize').exists(self.log_path)
  local f = open('a')
  if jsonl then f:write(json.encode(rec), '\n')
  else
    if new or (rec.epoch == 1 and not self.resumed) then
      f:close(); f = open('w'); f:write(table.concat(columns, ','), '\n')
    end
    local row = {}
    for i, c in ipairs(columns) do row[i] = rec[c] ~= nil and tostring(rec[c]) or '' end
    f:write(table.concat(row, ','), '\n')
  end
  f:close()
end

-- ---- fit ----------------------------------------------------------------------------

function Trainer:fit(loader)
  local tl = type(loader)
  if (tl ~= 'table' and tl ~= 'userdata') or not loader.iter then error('fit: loader must be a DataLoader', 2) end
  if type(loader.__len) == 'function' and loader:__len() == 0 then
    options.fail('fit', ('the loader has no batches (%s)'):format(tostring(loader)))
  end
  -- Ctrl-C (SIGINT) ends the run at the next step boundary: a final
  -- checkpoint, then the error 'fit: interrupted ...' (or, with
  -- on_interrupt = 'return', the history so far). A second Ctrl-C acts at once.
  local C = require('lunet.core').C
  self.sigint = pcall(function() return C.ln_sigint_catch end) and C.ln_sigint_catch(1) == 0 and C
  local ok, res = pcall(self.fit_loop, self, loader)
  if self.sigint then C.ln_sigint_catch(0); self.sigint = nil end
  if not ok then error(res, 0) end
  return res
end

function Trainer:fit_loop(loader)
  if self.model.check_loaders then self.model:check_loaders('fit', loader, self.val_loader) end
  if self.resume and self.ckpt_path and require('lunet.serialize').exists(self.ckpt_path) then
    local state = checkpoint.load(self.ckpt_path)
    -- (a Pipeline across processes: the whole model's state cut to this rank's stage)
    if self.model.stage_state then state = self.model:stage_state(state, self.optimizer) end
    require('lunet.trainer_state').check(self, state, loader, 'fit: resuming from ' .. self.ckpt_path)
    self:load_state_dict(state, loader)
    self.resumed = true
    local ls = self.running and loader.state_dict and loader:state_dict()
    if ls and type(ls.position) == 'number' then
      -- the batches taken this epoch: the loader's (converted when the
      -- checkpoint came from another number of ranks)
      if state.loader and state.loader.position ~= ls.position then
        self.running.steps = math.ceil(ls.position / self.accumulate)
      end
      self.running.batches = ls.position
      if not self.main then   -- the saved sums are every rank's: rank 0 carries them
        local r = self.running
        r.loss, r.correct, r.seen, r.topk = 0, 0, 0, 0
      end
    end
    self.epoch_done = ls and type(ls.position) == 'number' and ls.position >= #loader or nil
    if not self.quiet then print(('resumed from %s at epoch %d, step %d'):format(self.ckpt_path, self.epoch + 1, self.step)) end
  end
  while self.epoch < self.epochs do
    local rec = self:train_epoch(loader)
    if self.interrupted then
      self.running = self.interrupted_running
      self:save_checkpoint(loader)
      local where = ('at epoch %d, step %d'):format(self.epoch + 1, self.step)
      local saved = self.ckpt_path and ('; checkpoint saved to %s (resume = true continues)'):format(self.ckpt_path)
        or ' (no checkpoint path was given)'
      if self.on_interrupt == 'return' then
        if not self.quiet then print('fit: interrupted ' .. where .. saved) end
        return self.history
      end
      error('fit: interrupted (SIGINT) ' .. where .. saved, 0)
    end
    if self.max_steps and self.step >= self.max_steps and rec.time then
      -- a partial epoch (smoke run): still report it
    end
    self.epoch = self.epoch + 1
    rec.epoch, rec.step = self.epoch, self.step
    rec.lr = self.optimizer.param_groups and self.optimizer.param_groups[1].lr or nil
    if self.val_loader then
      local v = self:evaluate(self.val_loader)
      rec.val_loss, rec.val_acc, rec.val_topk = v.loss, v.acc, v.topk
    end
    if self.scheduler and self.scheduler_per == 'epoch' then
      if self.scheduler.takes_metric then self.scheduler:step(rec.val_loss or rec.train_loss)   -- ReduceLROnPlateau
      else self.scheduler:step() end
    end
    self.history[#self.history + 1] = rec
    self:log_epoch(rec)
    self:log_plan()
    if self.ckpt_every.epochs and self.epoch % self.ckpt_every.epochs == 0 then self:save_checkpoint(loader) end
    if self.max_steps and self.step >= self.max_steps then break end
  end
  if self.plot_path then require('lunet.plot').curves(self.plot_path, self.history) end
  return self.history
end

-- a model from lunet.parallel.auto: the step time measured beside the plan's
-- (the epoch's steps after its first; self.step_time, set by train_epoch)
function Trainer:log_plan()
  local plan = is_table(self.model) and rawget(self.model, 'auto_plan')
  if not plan or not self.step_time then return end
  local pred = plan.chosen.step
  if not self.quiet then
    print(('fit: %.2f ms a step measured, %.2f ms predicted by the plan (%s, batch %d): %+.0f%%'):format(
      self.step_time * 1e3, pred * 1e3, plan.chosen.label, plan.batch, (self.step_time / pred - 1) * 100))
  end
end

local M = {}
M.Trainer = setmetatable({ new = Trainer.new }, { __call = function(_, ...) return Trainer.new(...) end })
function M.fit(model, loader, opts)
  return Trainer.new(model, opts):fit(loader)
end
return M
