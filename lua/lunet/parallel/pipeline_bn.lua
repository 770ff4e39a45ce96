-- BatchNorm inside a pipeline (parallel.Pipeline): each micro-batch is
-- normalised by its own statistics, as in torchgpipe. Two things change how
-- the running statistics are kept:
-- * recomputation runs a micro-batch's forward twice; the second run must
--   not update them again (frozen: momentum 0 and the batch count put back);
-- * deferred_bn = true (torchgpipe's DeferredBatchNorm): the micro-batches'
--   forwards only add up each channel's sum and sum of squares (float64), and
--   the running statistics are updated once per batch, from those, as a
--   single-device forward of the whole batch would (its mean and its
--   unbiased variance, one step of the momentum, num_batches_tracked + 1).
-- wrap(modules, deferred) -> a controller, or nil when the model has no
-- BatchNorm with running statistics; each such BatchNorm gets its own
-- forward (an instance field: it then runs unfused, with the same values).
local lunet = require 'lunet'
local autograd = require 'lunet.autograd'
local BatchNorm = require 'lunet.nn.BatchNorm'

local M = {}
M.__index = M

local function is_bn(m)
  local mt = getmetatable(m)
  while mt do
    if mt == BatchNorm then return true end
    mt = rawget(mt, 'super')
  end
  return false
end

-- x's per-channel sum and sum of squares (float64) added into acc
local function collect(acc, x)
  autograd.no_grad(function()
    local C = x:size(2)
    local xd = x:detach():to('float64'):transpose(1, 2):reshape(C, -1)
    if not acc.s1 then
      acc.s1 = lunet.zeros({ C }, { dtype = 'float64', device = x.device })
      acc.s2 = lunet.zeros({ C }, { dtype = 'float64', device = x.device })
      acc.n = 0
    end
    acc.s1:add_(xd:sum(2))
    acc.s2:add_((xd * xd):sum(2))
    acc.n = acc.n + xd:size(2)
  end)
end

function M.wrap(modules, deferred)
  local self = setmetatable({ bns = {}, acc = {}, deferred = deferred, freeze = false, collecting = false }, M)
  for _, m in ipairs(modules) do
    if is_bn(m) and m.track_running_stats and not rawget(m, 'forward') then
      local cls = getmetatable(m)
      local acc = {}
      self.bns[#self.bns + 1], self.acc[#self.bns + 1] = m, acc
      rawset(m, 'forward', function(bn, x)
        if not bn.training or not (self.freeze or self.collecting) then return cls.forward(bn, x) end
        if self.collecting and not self.freeze then collect(acc, x) end
        local momentum = bn.momentum
        bn.momentum = 0
        local ok, y = pcall(cls.forward, bn, x)
        bn.momentum = momentum
        if not ok then error(y, 0) end
        bn.num_batches_tracked:sub_(1)
        return y
      end)
    end
  end
  if #self.bns == 0 then return nil end
  return self
end

-- frozen(on) -> the previous setting: running statistics left alone (recomputation)
function M:frozen(on)
  local prev = self.freeze
  self.freeze = on
  return prev
end

-- the start of a training batch (deferred: its statistics collected from now on)
function M:begin()
  self.collecting = self.deferred
  for _, acc in ipairs(self.acc) do acc.n = 0; if acc.s1 then acc.s1:zero_(); acc.s2:zero_() end end
end

-- the end of the batch's forwards: the running statistics updated once (deferred)
function M:commit()
  if not self.collecting then return end
  self.collecting = false
  autograd.no_grad(function()
    for i, bn in ipairs(self.bns) do
      local acc = self.acc[i]
      if acc.n and acc.n > 0 then
        local n = acc.n
        local mean = acc.s1 / n
        local var = acc.s2 / n - mean * mean
        if n > 1 then var = var * (n / (n - 1)) end
        bn.num_batches_tracked:add_(1)
        local mom = bn.momentum
        if mom == nil then mom = 1 / bn.num_batches_tracked:item() end
        local rm, rv = bn.running_mean, bn.running_var
        rm:copy_(rm:to('float64') * (1 - mom) + mean * mom)
        rv:copy_(rv:to('float64') * (1 - mom) + var * mom)
      end
    end
  end)
end

-- a failed step: back to the plain forward
function M:abort() self.collecting, self.freeze = false, false end

return M
