-- Synchronised BatchNorm for DataParallel (sync_bn = true): in training, every
-- replica normalises with the mean and variance of the whole global batch.
--
-- The replicas' forwards run as coroutines in lockstep: at each BatchNorm a
-- replica posts its per-channel partial sums and yields; when all have, the
-- sums are added on the first device and sent back, with recorded copies and
-- adds, so backward carries the gradients of the statistics across replicas
-- exactly as a single device's batch norm would. Two rounds per layer (sum of
-- x, then sum of squared deviations from the global mean), as a two-pass
-- variance. Running statistics get the global values on every replica, so
-- they stay identical without a broadcast.
-- DistributedDataParallel (one replica per process, dp.world_size set): the
-- sums and counts are all-reduced over its group instead (group_sum), an op
-- whose backward all-reduces the gradient, so that each process's backward
-- gets every process's loss's gradient of the shared statistics (as
-- PyTorch's SyncBatchNorm); the count is then a tensor, never read on the host.
local lunet = require 'lunet'
local autograd = require 'lunet.autograd'
local G = require 'lunet.autograd.graph'

local M = {}

local function is_bn(m)
  return type(m.__name) == 'string' and m.__name:find('BatchNorm', 1, true) and m.num_features ~= nil
end

-- per-channel sum of x (N, C, ...) -> (C)
local function channel_sum(x)
  local Cc = x:size(2)
  return x:transpose(1, 2):reshape(Cc, -1):sum(2)
end

local function bshape(x)
  local s = { 1, x:size(2) }
  for d = 3, x:dim() do s[d] = 1 end
  return s
end

local function sync_forward(self, x)
  local ctx = self._sync_ctx
  if not (ctx and ctx.active and self.training) then return self._plain_forward(self, x) end
  self:check_input(x)
  if x:size(2) ~= self.num_features then
    error(('%s: input has %d channels, expected %d'):format(self.__name, x:size(2), self.num_features), 3)
  end
  local count = x:numel() / x:size(2)
  local mean, total = coroutine.yield({ value = channel_sum(x), count = count })
  local s = bshape(x)
  local d = x - mean:view(s)
  local var = coroutine.yield({ value = channel_sum(d * d), count = count })
  local y = d * (var + self.eps):rsqrt():view(s)
  if self.weight then y = y * self.weight:view(s) + self.bias:view(s) end
  if self.track_running_stats then
    autograd.no_grad(function()
      self.num_batches_tracked:add_(1)
      local m = self.momentum or 1 / self.num_batches_tracked:item()
      local unbiased
      if type(total) == 'number' then unbiased = var:detach() * (total / math.max(total - 1, 1))
      else unbiased = var:detach() * (total / (total - 1):clamp(1, math.huge)) end
      self.running_mean:copy_(self.running_mean * (1 - m) + mean:detach() * m)
      self.running_var:copy_(self.running_var * (1 - m) + unbiased * m)
    end)
  end
  return y
end

-- replace the forward of every BatchNorm of every replica
function M.convert(dp)
  dp._sync_ctx = { active = false }
  for k = 1, dp.n do
    for _, m in ipairs(dp.replicas[k]:modules()) do
      if is_bn(m) then
        rawset(m, '_plain_forward', getmetatable(m).forward)
        rawset(m, '_sync_ctx', dp._sync_ctx)
        rawset(m, 'forward', sync_forward)
      end
    end
  end
end

local function group_sum_backward(n, g)
  local h = g:contiguous():clone()
  n.group:allreduce({ h }, { op = 'sum' })
  return h
end

-- x summed over the group's ranks (one rank in this process), differentiably
function M.group_sum(group, x)
  local y = x:detach():contiguous():clone()
  group:allreduce({ y }, { op = 'sum' })
  if autograd.is_grad_enabled() and x.requires_grad then
    local node = G.node(group_sum_backward, 'group_sum', G.edge(x))
    node.group = group
    G.attach(y, node)
  end
  return y
end

-- DistributedDataParallel: this process's post summed over the group ->
-- value / total (total: a tensor of one element)
local function reduce_group(dp, post, k)
  local v = post.value
  local Cn = v:numel()
  local packed = lunet.cat({ v:reshape(Cn), lunet.full({ 1 }, post.count, { dtype = v.dtype, device = v.device }) }, 1)
  local s = M.group_sum(dp.comm, packed)
  local total = s:narrow(1, Cn + 1, 1):detach()
  return { [k] = s:narrow(1, 1, Cn):view(v:size()) / total }, total
end

-- posted {value, count} per replica -> the global value / total count on each device
local function reduce(dp, posts, order)
  if dp.world_size and dp.comm then return reduce_group(dp, posts[order[1]], order[1]) end
  local total, sum = 0, nil
  for _, k in ipairs(order) do
    local v = posts[k].value
    if v.device ~= dp.devices[1] then v = v:to(dp.devices[1]) end
    sum = sum and sum + v or v
    total = total + posts[k].count
  end
  if total <= 1 then
    error('DataParallel: sync_bn: expected more than 1 value per channel when training', 0)
  end
  local g = sum / total
  local res = {}
  for _, k in ipairs(order) do
    res[k] = g.device ~= dp.devices[k] and g:to(dp.devices[k]) or g
  end
  return res, total
end

-- run the replicas' forwards in lockstep; returns their outputs, each on its device
function M.run(dp, shards, sizes, ...)
  local args = { ... }
  local order, cos = {}, {}
  for k = 1, dp.n do
    if shards[k] then
      order[#order + 1] = k
      cos[k] = coroutine.create(function() return dp.replicas[k]:forward(shards[k], unpack(args)) end)
    end
  end
  local ctx = dp._sync_ctx
  ctx.active = true
  local outs, results, total = {}, {}, nil
  local ok, err = pcall(function()
    while true do
      local posts, nposts, ndone = {}, 0, 0
      for _, k in ipairs(order) do
        local co = cos[k]
        if coroutine.status(co) ~= 'dead' then
          local okr, v = coroutine.resume(co, results[k], total)
          if not okr then error(v, 0) end
          if coroutine.status(co) == 'dead' then outs[k] = v; ndone = ndone + 1
          else posts[k] = v; nposts = nposts + 1 end
        else
          ndone = ndone + 1
        end
      end
      if nposts == 0 then break end
      if ndone > 0 then error('DataParallel: sync_bn: replicas reached different numbers of BatchNorm layers', 0) end
      results, total = reduce(dp, posts, order)
    end
  end)
  ctx.active = false
  if not ok then error(err, 0) end
  for _, k in ipairs(order) do
    if not lunet.is_tensor(outs[k]) then error('DataParallel: forward: the module must return a tensor', 0) end
  end
  return outs
end

return M
