-- lunet.parallel.auto(model, sample_input, opts) -> the model wrapped as the
-- planner chose (lunet.parallel.plan with the same opts): the model itself
-- on the first device, a DataParallel, or a Pipeline where
-- lunet.parallel.Pipeline exists. wrapped.auto_plan is the plan; lunet.fit
-- then logs each epoch's measured step time beside the predicted one.
-- Accumulation chosen for one device: wrapped.accumulate = k (fit steps once
-- per k batches). opts.verbose = true prints the plan.
--
--   local model = lunet.parallel.auto(net, lunet.randn(32, 3, 32, 32), {batch = 128})
--   print(model.auto_plan.reason)
local lunet = require 'lunet'
local Plan = require 'lunet.parallel.plan'

local function auto(model, sample, opts)
  if type(model) ~= 'table' or not model._params then
    error('parallel.auto: expected an nn.Module, got ' .. type(model), 2)
  end
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  local verbose = o.verbose
  o.verbose = nil
  -- what can be built here
  local okp, Pipeline = pcall(require, 'lunet.parallel.Pipeline')
  if not okp then Pipeline = nil end
  o.kinds = o.kinds or (Pipeline and { 'single', 'data', 'pipeline', 'hybrid' } or { 'single', 'data' })
  local plan = Plan.new(model, sample, o)
  local c = plan.chosen
  local devs = {}
  for d = 1, c.devices do devs[d] = plan.devices[d] end
  local wrapped
  if c.kind == 'single' then
    wrapped = model:to(devs[1])
    if c.accumulate > 1 then rawset(wrapped, 'accumulate', c.accumulate) end
  elseif c.kind == 'data' then
    local bal, even = {}, true
    for d = 1, c.devices do bal[d] = plan.speed[d] or 1; if bal[d] ~= bal[1] then even = false end end
    wrapped = lunet.parallel.DataParallel(model, { devices = devs, accumulate = c.accumulate,
      balance = not even and bal or nil })
  elseif (c.kind == 'pipeline' or c.kind == 'hybrid') and Pipeline then
    -- (hybrid: replica r's stages on devices (r-1)p+1 .. rp, as the cost model has them)
    wrapped = Pipeline(model, { devices = devs, chunks = c.chunks, schedule = c.schedule, balance = c.balance,
      replicas = c.replicas > 1 and c.replicas or nil })
  else
    error(('parallel.auto: the plan chose %s, which this build cannot make'):format(c.label), 2)
  end
  rawset(wrapped, 'auto_plan', plan)
  if verbose then print(plan) end
  return wrapped
end

return auto
