-- lunet.parallel: multi-device training.
--   lunet.parallel.DataParallel(module, {devices = lunet.devices(), ...})
local parallel = {}

parallel.DataParallel = require 'lunet.parallel.DataParallel'

return parallel
