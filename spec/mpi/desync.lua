-- Run by spec/mpi_spec.lua (2+ processes): ranks out of step must fail with
-- an error naming both call sites, never hang. Each case prints
-- "rank R case NAME: <error>" and the ranks go on together.
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local info = dist.init{timeout = 2}
local R = info.rank
local world = dist.world()

local function case(name, fn)
  local ok, err = pcall(function() fn(); lunet.synchronize() end)
  io.stdout:write(('rank %d case %s: %s\n'):format(R, name, ok and 'no error' or tostring(err)))
  io.stdout:flush()
end

local t = lunet.ones({10})
case('different ops', function()
  if R == 0 then world:allreduce({t})        -- DESYNC-A
  else world:broadcast({t}, {root = 1}) end  -- DESYNC-B
end)
case('different shapes', function()
  world:allreduce({lunet.ones({10 + R})}, {op = 'max'})
end)
case('different reductions', function()
  world:allreduce({t}, {op = R == 0 and 'sum' or 'avg'})
end)
case('async out of step, raised at wait', function()
  world:allreduce({lunet.ones({20 + R})}, {async = true})
  world:wait()
end)
case('a rank late beyond the timeout', function()
  if R == 1 then os.execute("sleep 3") end
  world:allreduce({t})
end)
case('after a timeout', function()
  world:allreduce({lunet.ones({3})})
end)
io.stdout:write(('rank %d done\n'):format(R))
