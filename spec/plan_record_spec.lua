-- bench/plan_record.lua: the planner grid's scenarios written down and
-- scored again under the cost model (tools/replay_plan.lua). Stated
-- profiles: nothing here is timed.
local lunet = require 'lunet'
local parallel = lunet.parallel
local record = dofile('bench/plan_record.lua')
local MB = 2 ^ 20

local function stated(n)
  local list = {}
  for i = 1, n do
    list[i] = { fwd = 0.01 * i, bwd = 0.02 * i, act_bytes = MB, param_bytes = 4096, out_bytes = MB / 4, batch = 32,
      out_shape = { 32, 8 }, name = 'atom ' .. i }
  end
  list.gc, list.host, list.in_bytes = 4e-4, 1e-3, 32 * 3 * 32 * 32 * 4
  list.whole = { { 32, 0.2 }, { 16, 0.11 }, { 8, 0.06 } }
  return list
end
local link = { copy = { alpha = 1e-5, beta = 1e-9 }, allreduce = { alpha = 2e-5, beta = 2e-9 }, overlap = 0,
  pipeline = { fixed = 1e-4, action = { gpipe = 2e-5, ['1f1b'] = 2e-5, zb = 3e-5 }, replica = 5e-5, replica_micro = 2e-5 } }

describe('bench/plan_record.lua', function()
  setup(function() lunet.set_cpu_devices(2) end)
  teardown(function() lunet.set_cpu_devices(1) end)

  it('writes values as Lua source that reads back the same (exact numbers, nesting, infinities)', function()
    local v = { 1 / 3, -2.5e-300, math.huge, { a = 'x"y\n', [2] = { true, false } }, n = 7 }
    local path = os.tmpname()
    local f = assert(io.open(path, 'w'))
    f:write(record.dump(v))
    f:close()
    local back = record.load(path)
    os.remove(path)
    assert.equal(1 / 3, back[1])
    assert.equal(-2.5e-300, back[2])
    assert.equal(math.huge, back[3])
    assert.same(v[4], back[4])
    assert.equal(7, back.n)
    assert.has_error(function() record.dump({ print }) end, 'plan_record.dump: cannot write a function')
  end)

  it("scores a recorded scenario under the cost model: its figures and the trials' calibration as the plan's", function()
    local prof = stated(4)
    local opts = { devices = { 'cpu:0', 'cpu:1' }, batch = 32, profile = prof, link = link, together = 0.8, gc = 5e-4,
      kinds = { 'single', 'data', 'pipeline', 'hybrid' } }
    local p = parallel.plan(nil, nil, opts)
    -- a recorded scenario: every candidate measured 10% over its figure,
    -- two of them tried (one calibrating) at 30% over
    local sc = { model = 'stated', devices = 2, limit = 'none', memory = 0, batch = 32, kinds = opts.kinds,
      profile = prof, link = link, together = 0.8, gc = 5e-4, candidates = {} }
    for i, c in ipairs(p.candidates) do
      local rc = { label = c.label, measured = 1.1 * c.step, passes = { 1.1 * c.step, 1.2 * c.step } }
      if i <= 2 then rc.trial, rc.calibrates = 1.3 * c.step, i == 2 or nil end
      sc.candidates[i] = rc
    end
    local path = os.tmpname()
    local f = assert(io.open(path, 'w'))
    f:write(record.dump({ sc }))
    f:close()
    local r = record.replay(record.load(path)[1])
    os.remove(path)
    assert.equal(#p.candidates, #r.rows)
    assert.equal(p.chosen.label, r.choice)
    -- (the calibration: from the calibrating trial alone, half of its log
    -- ratio; one device's candidates, none of them tried, not scaled)
    local factor, singles = math.exp(0.5 * math.log(1.3)), 0
    assert.is_true(p.candidates[1].kind ~= 'single' and p.candidates[2].kind ~= 'single')
    for i, row in ipairs(r.rows) do
      local c = p.candidates[i]
      assert.equal(c.label, row.label)
      assert.near(c.step, row.model, 1e-15)
      if c.kind == 'single' then singles = singles + 1 end
      assert.near(c.step * (c.kind == 'single' and 1 or factor), row.calibrated, 1e-12)
      assert.near(1.2 / 1.1 - 1, row.apart, 1e-12)
    end
    assert.is_true(singles >= 1)
    -- the measured fastest: the candidate predicted fastest (all 10% over)
    assert.equal(p.candidates[1].label, r.fastest)
  end)
end)
