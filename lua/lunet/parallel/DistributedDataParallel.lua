-- parallel.DistributedDataParallel(module, opts): data parallel training
-- across processes, one replica per process (PyTorch's DDP).
--
--   local dist = require 'lunet.distributed'
--   dist.init()
--   local ddp = lunet.parallel.DistributedDataParallel(model)   -- group = dist.world()
--   local loader = data.DataLoader(ds, {batch_size = 64, shuffle = true, seed = 1})  -- sharded by rank
--   for x, y in ddp:join(loader:iter()) do   -- stops every rank when one runs out
--     opt:zero_grad(); ddp:forward_loss(crit, x, y):backward(); opt:step()
--   end
--
-- opts: group (a lunet.comm Communicator holding ONE rank in this process;
-- default lunet.distributed's world), and DataParallel's bucket_mb (25),
-- accumulate (1), compress (nil | 'fp16' | 'bf16'), sync_bn (false),
-- broadcast_buffers (true), overlap (true), balance (nil | {w1, ..., wW} |
-- 'auto'). The module moves to the group's device for this process.
-- Ranks: the group's API numbers them 1-based (rank r + 1 for process rank r
-- of MPI and lunet.distributed); ddp.rank is the 0-based process rank.
--
-- It is a DataParallel of one local replica whose gradient buckets are
-- all-reduced ('avg') over the group: parameters and buffers are broadcast
-- from rank 0 at construction (and buffers at each forward, unless
-- broadcast_buffers = false or sync_bn), so every process steps alike.
-- ddp(x) on each rank's own batch gives PyTorch's gradients (the average of
-- the ranks' gradients: the global batch's for equal batches).
-- ddp:forward_loss(criterion, x, y) gives the global batch's exact gradient
-- for any batch sizes (the criterion's mean over every rank's targets: their
-- count is all-reduced with the loss, on the devices, without a host wait),
-- and loss:item() is that global loss, the same on every rank.
-- balance: with a list of weights (one per rank) or 'auto', x is the GLOBAL
-- batch, the same on every rank, and each takes its share (weights: fixed;
-- 'auto': each rank times its own forwards, as DataParallel's replicas, and
-- the ranks' speeds are all-reduced every other step, read two steps later
-- (by then done: no rank waits for that) and applied by every rank at the
-- same step, so that the split stays the same everywhere; see _exchange).
-- sync_bn: BatchNorm layers normalise with the statistics of every rank's
-- batch (an all-reduce of the per-channel sums, differentiable: its backward
-- all-reduces the gradients; sync_bn.lua).
-- ddp:join(iterator): uneven inputs (sync.lua).
local lunet = require 'lunet'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local options = require 'lunet.options'
local autograd = require 'lunet.autograd'
local DataParallel = require 'lunet.parallel.DataParallel'
local Reducer = require 'lunet.parallel.Reducer'
local Balance = require 'lunet.parallel.Balance'
local floss = require 'lunet.parallel.forward_loss'
local ffi = require 'ffi'

local DDP = DataParallel:extend('parallel.DistributedDataParallel')

local function fail(msg, lvl) error('DistributedDataParallel: ' .. msg, (lvl or 1) + 1) end

local OPTS = { group = 'table', bucket_mb = true, accumulate = true, balance = true,
  compress = true, sync_bn = 'boolean', broadcast_buffers = 'boolean', overlap = 'boolean' }
local ALIASES = { bucket_cap_mb = 'bucket_mb', process_group = 'group' }

-- the default group: lunet.distributed's world (initialised if need be)
local function world(lvl)
  local ok, dist = pcall(require, 'lunet.distributed')
  if not ok then fail('no group given and lunet.distributed is not available: ' .. tostring(dist), lvl + 1) end
  if not dist.is_initialized() then dist.init() end
  return dist.world()
end

function DDP:__init(module, opts)
  if not is_table(module) or not module._params then fail('expected an nn.Module, got ' .. typename(module), 3) end
  -- (the reducer's buckets are sized by the parameters: placeholders would stay)
  for _, m in ipairs(module:modules()) do
    if m.has_uninitialized_params and m:has_uninitialized_params() then
      fail(m.__name .. ' has uninitialized parameters: run a forward (or load_state_dict) before wrapping it', 3)
    end
  end
  opts = options.check('DistributedDataParallel', opts, OPTS, ALIASES) or {}
  local group = opts.group or world(3)
  if type(group.local_size) ~= 'function' or type(group.ranks) ~= 'function' then
    fail('group must be a lunet.comm Communicator, got ' .. tostring(group), 3)
  end
  if group:local_size() ~= 1 then
    fail(('group holds %d ranks in this process; one process holds one rank (for several local devices, '
      .. 'use DataParallel inside each process)'):format(group:local_size()), 3)
  end
  local ropts = Reducer.options({ bucket_mb = opts.bucket_mb, accumulate = opts.accumulate,
    compress = opts.compress, overlap = opts.overlap, name = 'DistributedDataParallel' }, nil, 3)
  local W = group:size()
  self.group, self.world_size, self.rank = group, W, group:ranks()[1] - 1
  self.dev = group:devices()[1]
  if opts.balance ~= nil and opts.balance ~= 'even' then
    self.global_balance = Balance.new(W, opts.balance, 'DistributedDataParallel', 3)
  end
  -- a DataParallel of one replica (no local split, no gradient scaling) ...
  self.devices, self.n = { self.dev }, 1
  self.bucket_mb, self.accumulate = ropts.bucket_mb, ropts.accumulate
  -- (balance = 'auto': the local one times this rank's forwards)
  self.balance = Balance.new(1, opts.balance == 'auto' and 'auto' or 'even')
  self.auto_step = 0
  self.sync_bn = opts.sync_bn and true or false
  self.broadcast_buffers = opts.broadcast_buffers ~= false
  module:to(self.dev)
  self.replicas = { module }
  rawset(self, 'module', module)
  self:add_module('replica1', module)
  -- ... whose collectives span the group
  self.comm = W > 1 and group or nil
  self.params, self.bufs = { module:parameters() }, { module:buffers() }
  self.reducer = Reducer.new(self.params, self.comm, ropts)
  if self.sync_bn then require('lunet.parallel.sync_bn').convert(self) end
  self.fwd_events, self.fwd_pending, self.fwd_count = ffi.new('ln_event[?]', 2), {}, 0
  self.ahead_bytes = math.huge
  self:broadcast_parameters()   -- rank 0's parameters and buffers
end

-- this process's rows [first, first + count) of a global batch of B (balance)
function DDP:_slice(B)
  local sizes = self.global_balance:split(B)
  local first = 1
  for r = 1, self.rank do first = first + sizes[r] end
  return first, sizes[self.rank + 1]
end

-- balance = 'auto': every rank's measured speed (samples/s of its forward)
-- in a vector all-reduced at step t and read at step t + 2; every rank then
-- applies the same vector (a speed of 0: not measured yet, nothing changes)
function DDP:_exchange()
  self.auto_step = self.auto_step + 1
  local pend = self.speed_pending
  if pend and self.auto_step - pend.step >= 2 then
    self.speed_pending = nil
    local v, ones = pend.t:totable(), {}
    local all = true
    for k = 1, self.world_size do ones[k] = 1; all = all and v[k] > 0 end
    if all then self.global_balance:observe(ones, v) end
  end
  if not self.speed_pending then
    self.balance:collect()
    local v = {}
    for k = 1, self.world_size do v[k] = 0 end
    v[self.rank + 1] = self.balance.speed[1] or 0
    local t = lunet.tensor(v, { dtype = 'float64', device = self.dev })
    self.comm:allreduce({ t }, { op = 'sum' })
    self.speed_pending = { t = t, step = self.auto_step }
  end
end

-- the local batch: x itself, or (balance) this rank's rows of the global batch
function DDP:_local(x, fname, lvl)
  if not self.global_balance then return x end
  if not lunet.is_tensor(x) or x:dim() == 0 then return x end   -- (DataParallel's checks name the problem)
  if self.global_balance.auto and self.comm and fname ~= 'target' then self:_exchange() end
  local first, count = self:_slice(x:size(1))
  if count == 0 then fail(('%s: the global batch of %d has no row for rank %d'):format(fname, x:size(1), self.rank), lvl + 1) end
  return x:narrow(1, first, count)
end

-- DataParallel's errors, in this class's name, at the caller's line
local function rethrow(err, lvl)
  err = tostring(err):gsub('^[^:\n]*:%d+: ', '', 1):gsub('^DataParallel: ', 'DistributedDataParallel: ', 1)
  error(err, lvl + 1)
end

function DDP:forward(x, ...)
  local ok, out = pcall(DataParallel.forward, self, self:_local(x, 'forward', 2), ...)
  if not ok then rethrow(out, 2) end
  return out
end

-- ---- forward_loss: the global batch's loss ---------------------------------------------------

local DLoss = setmetatable({}, { __index = floss.Loss })
DLoss.__index = DLoss
DDP.Loss = DLoss

-- loss:backward(scale): each rank's sum seeded with W / (global count), so
-- that the average over the W ranks is the global mean's gradient
function DLoss:backward(scale)
  if scale ~= nil and (type(scale) ~= 'number' or scale ~= scale) then
    error('parallel.Loss:backward: scale must be a number, got ' .. tostring(scale), 2)
  end
  local s, m = self.sums[1], self.W * (scale or 1)
  local seed
  if self.mean then seed = self.stats:narrow(1, 2, 1):reciprocal():mul(m):view(s:size())
  else seed = lunet.full(s:size(), m, { dtype = s.dtype, device = s.device }) end
  autograd.backward({ s }, { seed:to(s.dtype) })
end

-- the global batch's loss, the same number on every rank (waits for the devices)
function DLoss:item()
  local st = self.stats:totable()
  return self.mean and st[1] / st[2] or st[1]
end

function DLoss.__tostring(self)
  return ('parallel.Loss(%s, %d ranks): %.6g'):format(self.reduction, self.W, self:item())
end

-- ddp:forward_loss(criterion, x, target, ...) -> loss, output (this rank's
-- output): as DataParallel's, over every rank's batch
function DDP:forward_loss(criterion, x, target, ...)
  if not floss.ok(criterion) then   -- (raises the criterion's error)
    local _, err = pcall(floss.run, self, 1, criterion, x, target, ...)
    rethrow(err, 2)
  end
  x, target = self:_local(x, 'forward_loss', 2), self:_local(target, 'target', 2)
  local ok, loss, outs = pcall(floss.run, self, 1, criterion, x, target, ...)
  if not ok then rethrow(loss, 2) end
  local s = loss.sums[1]
  local count
  if loss.counts then count = loss.counts[1]:view(1)
  else count = lunet.full({ 1 }, loss.norm, { dtype = 'float32', device = self.dev }) end
  -- [sum of the losses, count] over every rank: one small all-reduce
  local stats = lunet.cat({ s:detach():to('float32'):view(1), count:to('float32') }, 1)
  if self.comm then self.comm:allreduce({ stats }, { op = 'sum' }) end
  loss.stats, loss.W, loss.mean = stats, self.world_size, loss.reduction == 'mean'
  loss.counts, loss.norm = nil, nil
  setmetatable(loss, DLoss)
  return loss, outs and outs[1]
end

-- ---- across ranks ----------------------------------------------------------------------------

-- ddp:sum_numbers({a, b, ...}) -> the sums over every rank (a host wait)
function DDP:sum_numbers(list)
  if not self.comm then return list end
  local t = lunet.tensor(list, { dtype = 'float64', device = self.dev })
  self.comm:allreduce({ t }, { op = 'sum' })
  return t:totable()
end

-- ddp:range_number(n) -> the least and the largest n over every rank (a host wait)
function DDP:range_number(n)
  if not self.comm then return n, n end
  local t = lunet.tensor({ n, -n }, { dtype = 'float64', device = self.dev })
  self.comm:allreduce({ t }, { op = 'max' })
  local v = t:totable()
  return -v[2], v[1]
end

function DDP:is_main() return self.rank == 0 end

-- ddp:join(iter[, state]) -> an iterator over iter's values that ends on every
-- rank at the first step where any rank's iter has ended (PyTorch's Join,
-- without the shadowing: the ranks still holding batches skip the rest).
-- Each step all-reduces one flag and waits for it (a host wait per step).
function DDP:join(iter, state, ctl)
  if type(iter) ~= 'function' then fail('join: expected an iterator function (loader:iter()), got ' .. typename(iter), 2) end
  local flag = lunet.zeros({ 1 }, { device = self.dev })
  local done = false
  return function()
    if done then return nil end
    local a, b, c, d = iter(state, ctl)
    ctl = a
    if not self.comm then
      if a == nil then done = true end
      return a, b, c, d
    end
    flag:fill_(a == nil and 1 or 0)
    self.comm:allreduce({ flag }, { op = 'max' })
    if flag:item() > 0 then
      done = true
      self.joined = a ~= nil   -- this rank still had data
      return nil
    end
    return a, b, c, d
  end
end

function DDP:extra_repr()
  return ('rank %d of %d on %s'):format(self.rank, self.world_size, self.dev)
end

DDP.__tostring = function(self)
  local n = self.module:num_parameters()
  return self:repr() .. ('\n%s parameter%s'):format(require('lunet.nn.Module').format_count(n), n == 1 and '' or 's')
end

-- to(dtype) casts; to another device is an error (the group fixed it)
function DDP:to(what, more)
  local ok, err = pcall(DataParallel.to, self, what, more)
  if not ok then error((tostring(err):gsub('DataParallel', 'DistributedDataParallel')), 2) end
  return self
end

return DDP
