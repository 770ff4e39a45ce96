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
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local Plan = require 'lunet.parallel.plan'
local wrap = require 'lunet.parallel.wrap'

local function auto(model, sample, opts)
  if not is_table(model) or not model._params then
    error('parallel.auto: expected an nn.Module, got ' .. typename(model), 2)
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
  local wrapped = wrap(model, plan, plan.chosen)
  rawset(wrapped, 'auto_plan', plan)
  if verbose then print(plan) end
  return wrapped
end

return auto
