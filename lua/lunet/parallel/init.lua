-- lunet.parallel: multi-device training.
--   lunet.parallel.DataParallel(module, {devices = lunet.devices(), ...})
--   lunet.parallel.Pipeline(sequential, {devices = {...}, chunks = 8, schedule = '1f1b'})
--   lunet.parallel.DistributedDataParallel(module[, {group = dist.world(), ...}])
local parallel = {}

parallel.DataParallel = require 'lunet.parallel.DataParallel'
-- across processes: one replica per process, gradients all-reduced over a group (lunet.distributed)
parallel.DistributedDataParallel = require 'lunet.parallel.DistributedDataParallel'
parallel.Reducer = require 'lunet.parallel.Reducer'     -- gradient buckets and their all-reduces
parallel.Balance = require 'lunet.parallel.Balance'     -- how a batch is split over replicas
parallel.Pipeline = require 'lunet.parallel.Pipeline'   -- stages on devices, micro-batches by a schedule
parallel.schedule = require 'lunet.parallel.schedule'   -- pipeline schedules as data, checked

-- the planner (plan.lua): strategies, their predicted cost, the choice
parallel.profile = require 'lunet.parallel.profile'       -- layer and link measurements
parallel.partition = require 'lunet.parallel.partition'   -- contiguous stages by time under memory
parallel.cost = require 'lunet.parallel.cost'
parallel.step_sim = require 'lunet.parallel.step_sim'   -- a pipeline's step played out in time (cost.lua)
parallel.Plan = require 'lunet.parallel.plan'
parallel.trial = require 'lunet.parallel.trial'     -- the candidates trained for a few steps (opts.trials)
parallel.wrap = require 'lunet.parallel.wrap'       -- a model wrapped as a candidate says
function parallel.plan(model, sample, opts) return parallel.Plan.new(model, sample, opts) end
parallel.simulate = require 'lunet.parallel.simulate'
parallel.auto = require 'lunet.parallel.auto'

return parallel
