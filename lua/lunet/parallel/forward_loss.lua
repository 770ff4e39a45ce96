-- dp:forward_loss(criterion, x, target, ...) -> loss, outputs
--
-- DataParallel's forward and loss in one call, with the criterion applied on
-- each replica's own shard: the outputs are never gathered on the first
-- device, and each replica's backward starts from its own loss, so no device
-- waits for another until the last gradient bucket (with dp(x) the loss on
-- devices[1] needs every replica's output, and every replica's backward
-- needs its gradient: two meetings a step). The same gradients as
-- criterion(dp(x), target):backward(), for any split.
--
--   local loss = dp:forward_loss(crit, x, y)
--   loss:backward(); opt:step(); print(loss:item())
--
-- loss is a parallel.Loss: loss:backward(), loss:item() (the batch's loss, a
-- number: waits for the devices), loss:tensor() (that value on devices[1]),
-- loss:output() (the outputs gathered on devices[1], for metrics).
-- lunet.fit trains a DataParallel this way when its criterion allows.
-- outputs[k] is replica k's output on its device (nil where it got no sample).
-- The criterion is an nn loss module with reduction 'mean' or 'sum'
-- (CrossEntropyLoss, NLLLoss, MSELoss, BCEWithLogitsLoss); each replica sums
-- its shard's losses and the mean divides by the batch's count (MSELoss,
-- BCEWithLogitsLoss: the target's elements; CrossEntropyLoss, NLLLoss: the
-- targets other than ignore_index, counted by every device over the whole
-- target, which it receives instead of its shard: no device waits for that).
local lunet = require 'lunet'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local autograd = require 'lunet.autograd'

local Loss = {}
Loss.__index = Loss

local by_class = { ['nn.CrossEntropyLoss'] = 'class', ['nn.NLLLoss'] = 'class',
  ['nn.MSELoss'] = 'element', ['nn.BCEWithLogitsLoss'] = 'element' }

local function fail(msg, lvl) error('DataParallel: forward_loss: ' .. msg, lvl + 1) end

-- how the criterion's mean is normalised: 'class' (count of targets not
-- ignored), 'element' (target elements), or nil for 'sum'
local function mean_kind(criterion, lvl)
  local kind = is_table(criterion) and by_class[criterion.__name]
  if not kind then
    fail(('criterion must be an nn loss module (%s), got %s'):format(
      'CrossEntropyLoss, NLLLoss, MSELoss or BCEWithLogitsLoss', is_table(criterion) and
      tostring(criterion.__name or 'a table') or type(criterion)), lvl + 1)
  end
  local r = criterion.opts.reduction
  if r == 'sum' then return nil end
  if r ~= 'mean' then fail(("reduction must be 'mean' or 'sum', got '%s'"):format(tostring(r)), lvl + 1) end
  if kind == 'class' and criterion.weight ~= nil then
    fail("a class-weighted mean is not supported; use reduction 'sum' (or dp(x))", lvl + 1)
  end
  return kind
end

-- ---- parallel.Loss ---------------------------------------------------------------------------

-- every replica's backward from its own loss, seeded with n / count (the
-- buckets are averaged over the n replicas), in one autograd pass.
-- loss:backward(scale): the gradient of scale * loss (fit's accumulation
-- passes 1/k, as (loss / k):backward() would)
function Loss:backward(scale)
  if scale ~= nil and (type(scale) ~= 'number' or scale ~= scale) then
    error('parallel.Loss:backward: scale must be a number, got ' .. tostring(scale), 2)
  end
  local roots, seeds, m = {}, {}, self.n * (scale or 1)
  for k = 1, self.n do
    local s = self.sums[k]
    if s then
      roots[#roots + 1] = s
      seeds[#seeds + 1] = self.counts and self.counts[k]:to(s.dtype):reciprocal():mul(m)
        or lunet.full(s:size(), m / self.norm, { dtype = s.dtype, device = s.device })
    end
  end
  autograd.backward(roots, seeds)
end

-- the batch's loss (waits for the devices)
function Loss:item()
  local total, count = 0, nil
  for k = 1, self.n do
    local s = self.sums[k]
    if s then
      total = total + s:item()
      count = count or (self.counts and self.counts[k]:item())
    end
  end
  return total / (count or self.norm)
end

-- the replicas' outputs gathered on the first device, for metrics (no
-- gradient; queued after backward, the copies wait for no device)
function Loss:output()
  local dp, list = self.dp, {}
  for k = 1, self.n do
    local y = self.outputs[k]
    if y then list[#list + 1] = y:detach():to(dp.devices[1]) end
  end
  if #list == 1 then return list[1] end
  return lunet.cat(list, 1)
end

-- the same as a tensor on the first device (no gradient)
function Loss:tensor()
  return lunet.tensor(self:item(), { device = self.dp.devices[1] })
end

function Loss.__tostring(self)
  local active = 0
  for k = 1, self.n do if self.sums[k] then active = active + 1 end end
  return ('parallel.Loss(%s, %d replica%s): %.6g'):format(self.reduction, active, active == 1 and '' or 's', self:item())
end

-- each replica's summed loss (a plain function for pcall: a closure made per
-- step would stop the JIT's trace of the training loop)
local function shard_sums(dp, criterion, ys, targets, sums)
  for k = 1, dp.n do
    if ys[k] then
      sums[k] = criterion(ys[k], targets[k])
      dp:_forward_queued(k)
    end
  end
end

local M = { Loss = Loss, mean_kind = mean_kind }   -- (mean_kind: parallel.Pipeline's forward_loss too)

-- one replica set's forward and loss: dp is the DataParallel (its _begin,
-- _shard, _outputs and _end_forward: the same split, pacing and step as its forward)
local function run_loss(dp, criterion, kind, x, target, sizes, ...)
  local shards = dp:_shard(x, sizes)
  local loss = setmetatable({ dp = dp, sums = {}, n = dp.n, reduction = kind and 'mean' or 'sum' }, Loss)
  local targets
  if kind == 'class' then
    local ignore = criterion.opts.ignore_index
    targets, loss.counts = {}, {}
    local pos = 1
    for k = 1, dp.n do
      if sizes[k] > 0 then
        local whole = target.device ~= dp.devices[k] and target:to(dp.devices[k]) or target
        loss.counts[k] = whole:ne(ignore):sum():to('float32')
        targets[k] = whole:narrow(1, pos, sizes[k])
        pos = pos + sizes[k]
      end
    end
  else
    targets = dp:_shard(target, sizes)
    loss.norm = kind and target:numel() or 1
  end
  local ys = dp:_outputs(shards, sizes, ...)
  local reduction = criterion.opts.reduction
  criterion.opts.reduction = 'sum'
  local ok, err = pcall(shard_sums, dp, criterion, ys, targets, loss.sums)
  criterion.opts.reduction = reduction
  if not ok then error(err, 0) end
  loss.outputs = ys
  return loss, ys
end

-- M.run(dp, criterion, x, target, ...) -> loss, outputs (dp:forward_loss; lvl:
-- where argument errors point, as error's level seen from the caller)
function M.run(dp, lvl, criterion, x, target, ...)
  lvl = lvl + 1
  local kind = mean_kind(criterion, lvl)
  if not lunet.is_tensor(target) then fail('target must be a tensor, got ' .. typename(target), lvl) end
  -- (checked before _begin, which paces the host and opens the step)
  if lunet.is_tensor(x) and x:dim() > 0 and (target:dim() == 0 or target:size(1) ~= x:size(1)) then
    fail(('target has %s rows, the input %d'):format(target:dim() == 0 and 'no' or target:size(1), x:size(1)), lvl)
  end
  local sizes, active = dp:_begin(x, 'forward_loss', lvl)
  local ok, loss, outs = pcall(run_loss, dp, criterion, kind, x, target, sizes, ...)
  return dp:_end_forward(active, ok, loss, lvl), outs
end

-- whether forward_loss can split this criterion (fit uses it when it can)
function M.ok(criterion) return (pcall(mean_kind, criterion, 1)) end

return M
