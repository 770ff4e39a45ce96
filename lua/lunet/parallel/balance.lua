-- DataParallel's batch split: shard sizes in proportion to per-device
-- weights (balance = even, a list, or 'auto': measured from each device's
-- forward time). Installed into DataParallel by DataParallel.lua.
local core = require 'lunet.core'
local C = core.C

return function(DataParallel)
  -- shard sizes for a batch of B: proportional to the weights (largest
  -- remainders), every device at least one sample while B >= n
  function DataParallel:split_sizes(B)
    local n, w = self.n, self.weights
    local total = 0
    for k = 1, n do total = total + w[k] end
    local sizes, rem, used = {}, {}, 0
    for k = 1, n do
      local exact = B * w[k] / total
      sizes[k] = math.floor(exact)
      rem[k] = exact - sizes[k]
      used = used + sizes[k]
    end
    while used < B do
      local best = 1
      for k = 2, n do if rem[k] > rem[best] then best = k end end
      sizes[best], rem[best], used = sizes[best] + 1, -1, used + 1
    end
    if B >= n then
      for k = 1, n do
        if sizes[k] == 0 then
          local big = 1
          for j = 2, n do if sizes[j] > sizes[big] then big = j end end
          sizes[big], sizes[k] = sizes[big] - 1, 1
        end
      end
    end
    return sizes
  end

  -- balance = 'auto': weights follow each device's measured samples per second
  -- (its forward's time between two stream timestamps, smoothed), at least
  -- 1/(4n) of the batch each. observe(times, sizes) is also a hook for specs.
  function DataParallel:observe(times, sizes)
    local sp = self.speed
    for k = 1, self.n do
      if sizes[k] > 0 and times[k] > 0 then
        local s = sizes[k] / times[k]
        sp[k] = sp[k] and (0.7 * sp[k] + 0.3 * s) or s
      end
    end
    for k = 1, self.n do if not sp[k] then return end end
    -- a floor of 1/(4n) of the batch: fixed per-step costs make a small shard
    -- look slow per sample, which would otherwise starve a device for good
    local total = 0
    for k = 1, self.n do total = total + sp[k] end
    for k = 1, self.n do self.weights[k] = math.max(sp[k], total / (4 * self.n)) end
  end

  -- read the stamps of the last timed forward once every device has passed
  -- them (never waits: an unfinished measurement is read at a later forward)
  function DataParallel:_collect_times()
    local pend = self.timing
    if not pend then return end
    for k = 1, self.n do
      if pend[k] > 0 and C.ln_event_query(self.stamp_events + k - 1) == 0 then return end
    end
    self.timing = nil
    local times = {}
    for k = 1, self.n do times[k] = self.stamps[2 * k - 1] - self.stamps[2 * k - 2] end
    self:observe(times, pend)
  end
end
