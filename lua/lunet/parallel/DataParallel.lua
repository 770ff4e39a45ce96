-- parallel.DataParallel(module, opts): one replica of module per device, the
-- batch split along dim 1, gradients summed across replicas in buckets.
--
--   local dp = lunet.parallel.DataParallel(model, {devices = lunet.devices()})
--   local opt = optim.SGD(dp:parameters(), {lr = 0.1})   -- every replica's parameters
--   opt:zero_grad(); criterion(dp(x), y):backward(); opt:step()
--
-- opts: devices (default lunet.devices()), bucket_mb (25), accumulate (1),
-- balance ('even' | 'auto' | {w1, w2, ...}), compress (nil | 'fp16' | 'bf16'),
-- sync_bn (false), broadcast_buffers (true), overlap (true). The devices may
-- also come by position (DataParallel(model, {'cpu:0', 'cpu:1'})), and DDP's
-- bucket_cap_mb is bucket_mb; an unknown option is an error.
--
-- How it works. Replica 1 is `module` itself (moved to devices[1]); replica k
-- is a copy on devices[k]. forward() sends shard k to device k, runs the
-- replicas one after another (their ops are queued on their own devices, so
-- they run at once) and gathers the outputs on devices[1] with recorded
-- copies: the loss is computed there and backward carries its gradient back
-- to every replica. Replica k's gradients are then d(global loss)/d(params)
-- restricted to its shard, so their sum is exactly the single-device gradient
-- (for any split, even or not, and any loss reduction; DataParallel scales
-- them by n and averages, which is the same). As each gradient is
-- accumulated (post-accumulate hooks) it is copied into its bucket (a flat
-- buffer per device, parameters in reverse order); a bucket's all-reduce is
-- enqueued as soon as it is complete on every replica, while backward goes
-- on; afterwards p.grad is a view of the reduced bucket. Every replica's
-- optimizer step then sees the same gradients, so the replicas stay
-- identical without a per-step broadcast. state_dict() is replica 1's.
-- The buckets, their all-reduces and accumulation are a parallel.Reducer
-- (dp.reducer), the batch split a parallel.Balance (dp.balance).
--
-- dp:forward_loss(criterion, x, y) instead applies the criterion on each
-- replica's shard and starts each replica's backward from its own loss, so
-- that no device waits for another before the last bucket (forward_loss.lua).
--
-- dp:no_sync(fn) (or accumulate = k) skips the all-reduce; gradients then add
-- up locally and the next synchronised backward reduces their sum
-- (accumulate = k: every k-th forward's backward; lunet.fit then steps once
-- per k batches, see dp:sync_next). Replicas of BatchNorm use their shard's
-- statistics; buffers are broadcast from replica 1 at each forward
-- (broadcast_buffers), or sync_bn = true uses the global batch's statistics. Use dp:to(dtype) (not dp.module:to) to cast.
-- With overlap each bucket's all-reduce is queued on the devices'
-- communication streams (a second worker thread per device) as soon as its
-- gradients are in, and runs while backward goes on; the compute streams wait
-- for it at the end of backward, before the optimizer reads the gradients.
-- The last bucket's all-reduce runs on the compute streams themselves; a
-- replica done early wakes as the late one begins its last layers, so that
-- no thread wake-up is left after backward (c/comm/local.c).
-- The host queues up to two steps ahead of the devices, one for a model whose
-- steps hold much memory (see _pace).
local lunet = require 'lunet'
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local options = require 'lunet.options'
local Module = require 'lunet.nn.Module'
local share_hooks = require('lunet.nn.hooks').share
local autograd = require 'lunet.autograd'
local Communicator = require('lunet.comm').Communicator
local Reducer = require 'lunet.parallel.Reducer'
local Balance = require 'lunet.parallel.Balance'
local floss = require 'lunet.parallel.forward_loss'
local C = core.C

local AHEAD = 2   -- steps the host may queue ahead of the devices (DataParallel:_pace)
local AHEAD_BYTES = 128 * 2 ^ 20   -- ... while the first device holds less than this
local DataParallel = Module:extend('parallel.DataParallel')

local function fail(msg, lvl) error('DataParallel: ' .. msg, (lvl or 1) + 1) end

local OPTS = { devices = true, bucket_mb = true, accumulate = true, balance = true,
  compress = true, sync_bn = 'boolean', broadcast_buffers = 'boolean', overlap = 'boolean' }
local ALIASES = { bucket_cap_mb = 'bucket_mb' }
local POSITIONAL = { 'devices' }

function DataParallel:__init(module, ...)
  if not is_table(module) or not module._params then fail('expected an nn.Module, got ' .. typename(module), 3) end
  local opts = options.check('DataParallel', options.positional('DataParallel', POSITIONAL, ...), OPTS, ALIASES) or {}
  local devs = opts.devices or lunet.devices()
  if not is_table(devs) or #devs == 0 then fail('devices must be a non-empty list', 3) end
  local names, seen = {}, {}
  for k = 1, #devs do
    local ok, id = pcall(core.device_id, 'DataParallel', devs[k])
    if not ok then error(id, 0) end   -- (device_id named the caller's line already)
    names[k] = core.device_name(id)
    if seen[names[k]] then fail('device ' .. names[k] .. ' appears twice', 3) end
    seen[names[k]] = true
  end
  local n = #names
  self.devices, self.n = names, n
  local ropts = Reducer.options(opts, 'DataParallel', 3)   -- (checked before the replicas are made)
  self.bucket_mb, self.accumulate = ropts.bucket_mb, ropts.accumulate
  self.balance = Balance.new(n, opts.balance, 'DataParallel', 3)
  self.sync_bn = opts.sync_bn and true or false
  self.broadcast_buffers = opts.broadcast_buffers ~= false

  -- (a replica copies the parameters: a placeholder would stay one in each)
  for _, m in ipairs(module:modules()) do
    if m.has_uninitialized_params and m:has_uninitialized_params() then
      fail(m.__name .. ' has uninitialized parameters: run a forward (or load_state_dict) before wrapping it', 3)
    end
  end
  module:to(names[1])
  local reps = { module }
  for k = 2, n do reps[k] = module:clone():to(names[k]) end
  self.replicas = reps
  rawset(self, 'module', module)
  for k = 1, n do self:add_module('replica' .. k, reps[k]) end
  -- (one GPU still goes through NCCL, as several do, where NCCL loads)
  local one_gpu = n == 1 and names[1]:match('^cuda') and require('lunet.comm').nccl_version()
  self.comm = (n > 1 or one_gpu) and Communicator(names) or nil
  self.params, self.bufs = {}, {}
  for k = 1, n do self.params[k], self.bufs[k] = reps[k]:parameters(), reps[k]:buffers() end
  self.reducer = Reducer.new(self.params, self.comm, ropts)
  if self.sync_bn then require('lunet.parallel.sync_bn').convert(self) end
  -- where each device's previous forward ended (see DataParallel:_pace)
  self.fwd_events, self.fwd_pending, self.fwd_count = ffi.new('ln_event[?]', n * AHEAD), {}, 0
  self.ahead_bytes = AHEAD_BYTES   -- see _pace
end

-- ---- forward -------------------------------------------------------------------------------

-- every replica's buffers become views of one flat tensor per dtype, so a
-- broadcast of replica 1's buffers is one collective per dtype
function DataParallel:_flatten_buffers()
  local groups, by = {}, {}
  for j, t in ipairs(self.bufs[1]) do
    local g = by[t.dtype]
    if not g then g = { dtype = t.dtype, idx = {}, off = {}, numel = 0 }; by[t.dtype] = g; groups[#groups + 1] = g end
    g.idx[#g.idx + 1] = j
    g.off[j] = g.numel
    g.numel = g.numel + t:numel()
  end
  autograd.no_grad(function()
    for _, g in ipairs(groups) do
      g.flat = {}
      for k = 1, self.n do
        local flat = lunet.empty({ g.numel }, { dtype = g.dtype, device = self.devices[k] })
        g.flat[k] = flat
        for _, j in ipairs(g.idx) do
          local t = self.bufs[k][j]
          local v = flat:narrow(1, g.off[j] + 1, t:numel()):view(t:size())
          v:copy_(t)
          Module._swap_into(t, v)
        end
      end
    end
  end)
  self.buf_groups = groups
end

function DataParallel:broadcast_buffers_()
  if not self.comm or #self.bufs[1] == 0 then return end
  if not self.buf_groups then self:_flatten_buffers() end
  for _, g in ipairs(self.buf_groups) do self.comm:broadcast(g.flat, { root = 1 }) end
end

-- after changing replica 1 (load_state_dict, an edit): copy it to the others
function DataParallel:broadcast_parameters()
  if not self.comm then return end
  autograd.no_grad(function()
    local list = {}
    for j = 1, #self.params[1] do
      for k = 1, self.n do list[k] = self.params[k][j] end
      self.comm:broadcast(list, { root = 1 })
    end
  end)
  self:broadcast_buffers_()
end

function DataParallel:forward(x, ...)
  local sizes, active = self:_begin(x, 'forward', 2)
  local ok, out = pcall(self._run, self, x, sizes, ...)
  return self:_end_forward(active, ok, out)
end

-- forward's first half (and forward_loss's): checks x, paces the host, splits
-- the batch and opens the step whose backward reduces the gradients
function DataParallel:_begin(x, fname, lvl)
  lvl = lvl + 1
  if not lunet.is_tensor(x) then fail(fname .. ': input must be a tensor, got ' .. typename(x), lvl) end
  if x:dim() == 0 then fail(fname .. ': input must have a batch dimension', lvl) end
  local B = x:size(1)
  if B == 0 then fail(fname .. ': empty batch', lvl) end
  if self.balance.auto then self.balance:collect() end
  self:_pace()
  local sizes = self.balance:split(B)
  local recording = autograd.is_grad_enabled()   -- (in eval mode too: fine-tuning with frozen BatchNorm)
  if self.broadcast_buffers and not self.sync_bn and #self.bufs[1] > 0 then
    self:broadcast_buffers_()
  end
  -- (the other replicas run the hooks registered on the model since they were made)
  for k = 2, self.n do share_hooks(self.replicas[1], self.replicas[k]) end
  local active = 0
  for k = 1, self.n do if sizes[k] > 0 then active = active + 1 end end
  self.reducer:prepare(recording, active)
  return sizes, active
end

-- forward's second half: active = how many replicas got samples
function DataParallel:_end_forward(active, ok, out, lvl)
  if not ok then self.reducer:abort(); error(out, (lvl or 2) + 1) end
  -- sync_bn keeps the running stats equal by updating every replica alike;
  -- replicas left without a sample this time get replica 1's
  if self.sync_bn and active < self.n and self.training then self:broadcast_buffers_() end
  return out
end

-- The host runs at most AHEAD steps ahead of the devices: forward k first
-- waits until every device has finished forward k - AHEAD. Queuing the next
-- steps while the devices still run this one keeps them from waiting for the
-- host (whose Lua shares the cores with them: one step ahead was not enough
-- on 2 cores, LeNet-5 66-76% scaling against 80-88% with 2). When it must
-- wait, the host sleeps until the devices are one forward behind: one
-- wake-up every other step, not one per device per step (3-4 sleeps a step
-- had the host using twice the CPU of two independent models).
-- Memory bounds it too: a queued step holds its activations until it has
-- run, so once the first device holds more than dp.ahead_bytes (AHEAD_BYTES)
-- the host stays within one step (ResNet-8 at 64 images a device: 125 MB a
-- step; two steps ahead took each device to 570 MB, against 235 MB for the
-- whole batch on one device, 390 MB now).
function DataParallel:_pace()
  local pend, n, events = self.fwd_pending, self.n, self.fwd_events
  local count = self.fwd_count + 1
  self.fwd_count = count
  local base = (count % AHEAD) * n
  self.fwd_base = base
  local behind = false
  for k = 1, n do
    if pend[base + k] and C.ln_event_query(events + base + k - 1) ~= 1 then behind = true end
  end
  behind = behind or C.ln_memory_allocated(core.device_id('DataParallel', self.devices[1])) > self.ahead_bytes
  -- the slots of forwards count - AHEAD .. count - 1 (behind), or just the first
  for back = AHEAD, behind and 1 or AHEAD, -1 do
    local b = ((count - back) % AHEAD) * n
    for k = 1, n do
      if pend[b + k] then
        pend[b + k] = nil
        if C.ln_event_synchronize(events + b + k - 1) ~= 0 then fail('forward: ' .. core.last_error(), 3) end
      end
    end
  end
end

-- x (and any other batch tensor) split along dim 1: shard k on device k
-- (nil where sizes[k] is 0)
function DataParallel:_shard(x, sizes)
  local shards, pos = {}, 1
  for k = 1, self.n do
    if sizes[k] > 0 then
      local s = x:narrow(1, pos, sizes[k])
      if s.device ~= self.devices[k] then s = s:to(self.devices[k]) end
      shards[k] = s
      pos = pos + sizes[k]
    end
  end
  return shards
end

-- every replica's output on its own device (nil where it has no shard)
function DataParallel:_outputs(shards, sizes, ...)
  local bal = self.balance
  local timing = self.training and bal:timing()
  local ys
  if self.sync_bn and self.training then
    ys = require('lunet.parallel.sync_bn').run(self, shards, sizes, ...)
  else
    ys = {}
    for k = 1, self.n do
      if shards[k] then
        if timing then bal:stamp(k, core.device_id('DataParallel', self.devices[k]), false) end
        local y = self.replicas[k](shards[k], ...)
        if timing then bal:stamp(k, core.device_id('DataParallel', self.devices[k]), true) end
        if not lunet.is_tensor(y) then fail('forward: the module must return a tensor, got ' .. typename(y), 3) end
        ys[k] = y
      end
    end
  end
  if timing then bal:timed(sizes) end
  return ys
end

-- device k's part of this forward is queued: _pace's next-but-one call waits for it
function DataParallel:_forward_queued(k)
  if self.n == 1 then return end
  C.ln_event_record(core.device_id('DataParallel', self.devices[k]), self.fwd_events + self.fwd_base + k - 1)
  self.fwd_pending[self.fwd_base + k] = true
end

-- the replicas' outputs gathered on devices[1] (recorded copies and a cat)
function DataParallel:_run(x, sizes, ...)
  local ys = self:_outputs(self:_shard(x, sizes), sizes, ...)
  local outs = {}
  for k = 1, self.n do
    local y = ys[k]
    if y then
      self:_scale_grad(y)
      outs[#outs + 1] = y.device ~= self.devices[1] and y:to(self.devices[1]) or y
      self:_forward_queued(k)   -- (after the output's copy, queued on this device)
    end
  end
  if #outs == 1 then return outs[1] end
  return lunet.cat(outs, 1)
end

-- Each replica's gradient is scaled by n on its way in and the buckets are
-- AVERAGED: the result is the same sum, but a gradient already reduced
-- (left in .grad by a step without zero_grad) stays as it is instead of being
-- counted n times, as with PyTorch's DDP.
function DataParallel:_scale_grad(y)
  if self.n == 1 or not y.requires_grad then return end
  if not self.scale_hook then
    local n = self.n
    self.scale_hook = function(g) return g * n end
  end
  y:register_hook(self.scale_hook)
end

-- dp:no_sync(fn, ...): backward passes inside fn only accumulate gradients
-- locally; the next backward outside reduces the sum
function DataParallel:no_sync(fn, ...) return self.reducer:no_sync(fn, ...) end

-- dp:sync_next(flag): the next recorded forward's backward all-reduces the
-- gradients (true) or only accumulates them locally (false), whatever the
-- accumulate count says; a synchronised one restarts the count (inside
-- no_sync nothing is reduced). lunet.fit drives its accumulation groups with
-- it, so that an epoch's last, shorter group is reduced too.
function DataParallel:sync_next(flag) self.reducer:sync_next(flag) end

-- dp:forward_loss(criterion, x, target, ...) -> loss, outputs: the loss on
-- each replica's shard (forward_loss.lua)
function DataParallel:forward_loss(criterion, x, target, ...)
  local loss, outs = floss.run(self, 2, criterion, x, target, ...)
  return loss, outs
end
function DataParallel.forward_loss_ok(_, criterion) return floss.ok(criterion) end

-- shard sizes for a batch of B (dp.balance); observe(times, sizes): measured
-- forward times per replica (balance = 'auto')
function DataParallel:split_sizes(B) return self.balance:split(B) end
function DataParallel:observe(times, sizes) self.balance:observe(times, sizes) end

-- ---- Module interface ------------------------------------------------------------------------

function DataParallel:state_dict(opts) return self.module:state_dict(opts) end

function DataParallel:load_state_dict(sd, strict)
  local ok, r = pcall(self.module.load_state_dict, self.module, sd, strict)
  if not ok then error(r, 2) end
  self:broadcast_parameters()
  return r
end

-- m:to(dtype) casts every replica; a device other than the first is an error
function DataParallel:to(what, more)
  local dev, dtype
  if type(what) == 'string' then
    if core.dtype_ids[what] then dtype = what else dev, dtype = what, more end
  elseif is_table(what) then dev, dtype = what.device, what.dtype
  else fail('to: expected a device, a dtype or {device=, dtype=}', 2) end
  if dev then
    local name = core.device_name(core.device_id('to', dev))
    if name ~= self.devices[1] then
      fail(('to: the replicas live on %s; create the DataParallel with the devices you want'):format(
        table.concat(self.devices, ', ')), 2)
    end
  end
  if dtype then
    for k = 1, self.n do self.replicas[k]:to({ device = self.devices[k], dtype = dtype }) end
    self.reducer:rebuild()
    self.buf_groups = nil
  end
  return self
end

function DataParallel:extra_repr()
  return ('%d devices: %s'):format(self.n, table.concat(self.devices, ', '))
end

function DataParallel:repr(indent)
  indent = indent or ''
  return ('%s(%s) {\n%s  (module): %s\n%s}'):format(self.__name, self:extra_repr(), indent,
    self.module:repr(indent .. '  '), indent)
end

DataParallel.__tostring = function(self)
  local n = self.module:num_parameters()
  return self:repr() .. ('\n%s parameter%s per replica'):format(require('lunet.nn.Module').format_count(n),
    n == 1 and '' or 's')
end

return DataParallel
