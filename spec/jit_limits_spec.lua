-- lunet raises LuaJIT's trace limits at load (lunet.core): with the defaults
-- the trace cache filled while a ResNet-8 was planned and tried on two
-- devices, every trace was flushed several times, and the steps after each
-- flush ran interpreted (the planner's trials timed them several times too
-- slow).
local lunet = require 'lunet'

describe('LuaJIT trace limits', function()
  it('planning and trying ResNet-8 on 2 devices flushes no traces', function()
    local flushes = 0
    local function on_trace(what) if what == 'flush' then flushes = flushes + 1 end end
    local models = dofile('bench/models.lua')
    lunet.set_cpu_devices(2)
    local ok, err = pcall(function()
      jit.attach(on_trace, 'trace')
      lunet.manual_seed(1)
      local m = models.resnet8.build(lunet.nn)
      local plan = lunet.parallel.plan(m, lunet.randn(16, 3, 32, 32), { devices = lunet.devices('cpu'), batch = 16, trials = 2 })
      assert(plan.chosen and plan.chosen.measured)
    end)
    jit.attach(on_trace)
    collectgarbage(); collectgarbage()
    lunet.synchronize()
    lunet.set_cpu_devices(1)
    assert(ok, err)
    assert.equal(0, flushes)
  end)
end)
