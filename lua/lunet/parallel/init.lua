-- lunet.parallel: multi-device training.
--   lunet.parallel.DataParallel(module, {devices = lunet.devices(), ...})
local parallel = {}

parallel.DataParallel = require 'lunet.parallel.DataParallel'
parallel.Reducer = require 'lunet.parallel.Reducer'     -- gradient buckets and their all-reduces
parallel.Balance = require 'lunet.parallel.Balance'     -- how a batch is split over replicas

return parallel
