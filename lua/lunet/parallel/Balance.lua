-- parallel.Balance(n, spec[, name]): how a batch is split over n replicas.
--   spec 'even' (default), a list of n positive weights, or 'auto': weights
--   that follow each replica's measured samples per second (its forward's
--   time between two stream timestamps, smoothed).
--   local bal = Balance(2, 'auto'); bal:split(128) --> {64, 64}
-- split(B): shard sizes proportional to the weights (largest remainders),
-- every replica at least one sample while B >= n. With 'auto' the owner
-- stamps each replica's forward (stamp(k, device_id, false/true)), calls
-- timed(sizes) after a timed forward and collect() before the next split;
-- observe(times, sizes) takes measured times directly (specs).
local ffi = require 'ffi'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local C = require('lunet.core').C

local Balance = {}
Balance.__index = Balance

-- (lvl: where a bad spec's error points, as error's level seen from the caller)
function Balance.new(n, spec, name, lvl)
  name = type(name) == 'string' and name or 'Balance'
  local function fail(msg) error(name .. ': ' .. msg, (lvl or 1) + 2) end
  if type(n) ~= 'number' or n < 1 or n % 1 ~= 0 or n == math.huge then
    fail('the replica count must be an integer >= 1, got ' .. tostring(n))
  end
  spec = spec or 'even'
  local w, auto = {}, spec == 'auto'
  if spec == 'even' or spec == 'auto' then
    for k = 1, n do w[k] = 1 end
  elseif not is_table(spec) then
    fail(("balance must be 'even', 'auto' or a list of %d weights, got %s"):format(n, tostring(spec)))
  else
    if #spec ~= n then fail(('balance has %d weights for %d devices'):format(#spec, n)) end
    for k = 1, n do
      if type(spec[k]) ~= 'number' or not (spec[k] > 0) or spec[k] == math.huge then
        fail(('balance[%d] must be a positive number, got %s'):format(k, tostring(spec[k])))
      end
      w[k] = spec[k]
    end
  end
  local self = setmetatable({ n = n, weights = w, auto = auto }, Balance)
  if auto then
    self.speed = {}
    self.stamps = ffi.new('double[?]', 2 * n)
    self.stamp_events = ffi.new('ln_event[?]', n)
  end
  return self
end

function Balance:split(B)
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

-- the weights follow the measured speeds, at least 1/(4n) of the batch each:
-- fixed per-step costs make a small shard look slow per sample, which would
-- otherwise starve a device for good
function Balance:observe(times, sizes)
  local sp = self.speed
  for k = 1, self.n do
    if sizes[k] > 0 and times[k] > 0 then
      local s = sizes[k] / times[k]
      sp[k] = sp[k] and (0.7 * sp[k] + 0.3 * s) or s
    end
  end
  for k = 1, self.n do if not sp[k] then return end end
  local total = 0
  for k = 1, self.n do total = total + sp[k] end
  for k = 1, self.n do self.weights[k] = math.max(sp[k], total / (4 * self.n)) end
end

-- whether the next forward should be timed (one measurement in flight at a time)
function Balance:timing() return self.auto and not self.pending end

-- replica k's forward starts (done = false) or is queued (true) on device id
function Balance:stamp(k, id, done)
  C.ln_stream_timestamp(id, self.stamps + 2 * k - (done and 1 or 2))
  if done then C.ln_event_record(id, self.stamp_events + k - 1) end
end

function Balance:timed(sizes) self.pending = sizes end

-- read the stamps of the last timed forward once every device has passed
-- them (never waits: an unfinished measurement is read at a later forward)
function Balance:collect()
  local pend = self.pending
  if not pend then return end
  for k = 1, self.n do
    if pend[k] > 0 and C.ln_event_query(self.stamp_events + k - 1) == 0 then return end
  end
  self.pending = nil
  local times = {}
  for k = 1, self.n do times[k] = self.stamps[2 * k - 1] - self.stamps[2 * k - 2] end
  self:observe(times, pend)
end

return setmetatable(Balance, { __call = function(_, ...) return Balance.new(...) end })
