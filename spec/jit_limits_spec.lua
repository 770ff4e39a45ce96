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

  -- LuaJIT blacklists a function whose traces keep aborting (here: a closure
  -- created in it, which LuaJIT 2.1 does not compile) and jit.flush() keeps
  -- it blacklisted; lunet.reset_jit() lets it be compiled again
  local jutil, vmdef = require 'jit.util', require 'jit.vmdef'
  local function opcode(f)
    local op = bit.band(jutil.funcbc(f, 0), 0xff)
    return (vmdef.bcnames:sub(op * 6 + 1, op * 6 + 6):gsub(' ', ''))
  end

  it('lunet.reset_jit() flushes the traces and clears what LuaJIT blacklisted in lunet\'s modules', function()
    -- a module of lunet's, as loaded from its folder
    local probe = assert(loadstring('return { make = function(x) local g = function() return x end; return g end }',
      '@/tmp/lua/lunet/spec_probe.lua'))()
    package.loaded['lunet.spec_probe'] = probe
    local other = loadstring('return function(x) local g = function() return x end; return g end', '@/tmp/elsewhere.lua')()
    local ok, err = pcall(function()
      for i = 1, 1000000 do probe.make(i); other(i) end
      assert.equal('IFUNCF', opcode(probe.make))   -- blacklisted
      assert.equal('IFUNCF', opcode(other))
      jit.flush()
      assert.equal('IFUNCF', opcode(probe.make))   -- (what jit.flush() leaves)
      local flushes = 0
      local function on_trace(what) if what == 'flush' then flushes = flushes + 1 end end
      jit.attach(on_trace, 'trace')
      local count = lunet.reset_jit()
      jit.attach(on_trace)
      assert.equal(1, flushes)
      assert.equal('FUNCF', opcode(probe.make))
      assert.equal('IFUNCF', opcode(other))   -- not lunet's: left alone
      -- every function of lunet's modules, the tensor methods' among them
      assert.is_true(count > 500)
      assert.equal('FUNCF', opcode(lunet.Tensor.add))
    end)
    package.loaded['lunet.spec_probe'] = nil
    assert(ok, err)
  end)
end)
