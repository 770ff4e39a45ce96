-- lunet.parallel.wrap(model, plan, candidate) -> the model wrapped as the
-- candidate says: the model itself on the plan's first device (accumulate
-- k: wrapped.accumulate = k), a DataParallel, or a Pipeline (a hybrid's
-- replica r on devices (r-1)p+1 .. rp, as the cost model has them).
-- parallel.auto wraps the plan's choice with it; the plan's trials
-- (lunet.parallel.trial) each candidate they time.
local lunet = require 'lunet'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)

local function fail(msg) error('parallel.wrap: ' .. msg, 3) end

local function wrap(model, plan, c)
  if not is_table(model) or not model._params then fail('expected an nn.Module, got ' .. typename(model)) end
  if not is_table(plan) or not is_table(plan.devices) then fail('expected a plan (lunet.parallel.plan), got ' .. typename(plan)) end
  if not is_table(c) or type(c.kind) ~= 'string' or type(c.devices) ~= 'number' then
    fail('expected one of the plan\'s candidates, got ' .. typename(c))
  end
  local devs = {}
  for d = 1, c.devices do devs[d] = plan.devices[d] end
  if c.kind == 'single' then
    local m = model:to(devs[1])
    if c.accumulate > 1 then rawset(m, 'accumulate', c.accumulate) end
    return m
  elseif c.kind == 'data' then
    local bal, even = {}, true
    for d = 1, c.devices do bal[d] = plan.speed[d] or 1; if bal[d] ~= bal[1] then even = false end end
    return lunet.parallel.DataParallel(model, { devices = devs, accumulate = c.accumulate,
      balance = not even and bal or nil })
  end
  local okp, Pipeline = pcall(require, 'lunet.parallel.Pipeline')
  if (c.kind == 'pipeline' or c.kind == 'hybrid') and okp then
    return Pipeline(model, { devices = devs, chunks = c.chunks, schedule = c.schedule, balance = c.balance,
      replicas = c.replicas > 1 and c.replicas or nil, interleave = c.interleave })
  end
  fail(('the plan chose %s, which this build cannot make'):format(c.label))
end

return wrap
