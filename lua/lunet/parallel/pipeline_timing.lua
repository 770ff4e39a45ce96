-- The stages' busy time measured in training (parallel.Pipeline, for
-- pipe:rebalance() and balance_report()). Each action of a stage is
-- bracketed by two stream timestamps on its device (ln_stream_timestamp): the
-- first runs once the device has its input (the copy's event wait is queued
-- before it), so the difference is the action's work, not its wait. One
-- batch is timed at a time; its stamps are read once every stage's device has
-- passed them (never waiting: a batch still running leaves the next untimed).
local ffi = require 'ffi'
local C = require('lunet.core').C

local Timing = {}
Timing.__index = Timing

function Timing.new(stages)
  local self = setmetatable({ stages = stages, S = #stages, cap = 0, sum = {}, count = {}, n = {},
    events = ffi.new('ln_event[?]', #stages) }, Timing)
  self:reset()
  return self
end

function Timing:reset()
  for s = 1, self.S do self.sum[s], self.count[s] = 0, 0 end
  self.batches = 0
end

-- a batch of M micro-batches starts, each `actions` a stage (2, F and B;
-- 3 with zero-bubble's W): timed unless the last timed one is still running
function Timing:begin(M, actions)
  self:collect()
  if self.pending then self.on = false; return end
  local n = (actions or 2) * M
  if n > self.cap then
    self.cap = n
    self.stamps = ffi.new('double[?]', 2 * self.cap * self.S)
  end
  self.on = true
  for s = 1, self.S do self.n[s] = 0 end
end

function Timing:mark(s, done)
  if not self.on then return end
  local k = self.n[s]
  if k >= self.cap then return end
  local st = self.stages[s]
  C.ln_stream_timestamp(st.dev_id, self.stamps + 2 * (self.cap * (s - 1) + k) + (done and 1 or 0))
  if done then self.n[s] = k + 1 end
end

-- the batch's actions are queued (micro: its micro-batch count)
function Timing:finish(micro)
  if not self.on then return end
  self.on = false
  for s = 1, self.S do C.ln_event_record(self.stages[s].dev_id, self.events + s - 1) end
  self.pending = micro
end

-- a failed batch: its stamps are not read
function Timing:abort()
  self.on = false
  if self.pending == nil then return end
  for s = 1, self.S do C.ln_event_synchronize(self.events + s - 1) end
  self.pending = nil
end

function Timing:collect()
  if not self.pending then return end
  for s = 1, self.S do
    if C.ln_event_query(self.events + s - 1) ~= 1 then return end
  end
  for s = 1, self.S do
    local base, t = 2 * self.cap * (s - 1), 0
    for k = 0, self.n[s] - 1 do t = t + self.stamps[base + 2 * k + 1] - self.stamps[base + 2 * k] end
    self.sum[s] = self.sum[s] + t
    self.count[s] = self.count[s] + self.pending
  end
  self.batches = self.batches + 1
  self.pending = nil
end

-- seconds a micro-batch (forward and backward) per stage, or nil before a timed batch
function Timing:per_micro()
  if self.batches == 0 then return nil end
  local out = {}
  for s = 1, self.S do out[s] = self.sum[s] / math.max(self.count[s], 1) end
  return out
end

return Timing
