-- Random numbers: determinism under manual_seed, independence of the device
-- count, ranges and moments of each distribution.
local lunet = require 'lunet'

local function moments(t)
  local buf, n = t:double():read()
  local s, s2 = 0, 0
  for i = 0, n - 1 do s = s + buf[i]; s2 = s2 + buf[i] * buf[i] end
  local mean = s / n
  return mean, math.sqrt(s2 / n - mean * mean)
end

describe('random numbers', function()
  it('the same seed gives the same numbers; another seed different ones', function()
    lunet.manual_seed(123)
    local a, b = lunet.rand(100), lunet.randn(3, 7)
    lunet.manual_seed(123)
    assert.is_true(lunet.rand(100):equal(a))
    assert.is_true(lunet.randn(3, 7):equal(b))
    lunet.manual_seed(124)
    assert.is_false(lunet.rand(100):equal(a))
  end)

  it('successive draws differ, and the stream position is what matters, not the shape', function()
    lunet.manual_seed(9)
    local a = lunet.rand(6)
    local b = lunet.rand(6)
    assert.is_false(a:equal(b))
    lunet.manual_seed(9)
    local c = lunet.rand(2, 3)      -- the same 6 numbers as a, another shape
    assert.is_true(c:view(6):equal(a))
  end)

  it('numbers do not depend on the number of CPU devices or where they are drawn', function()
    lunet.manual_seed(77)
    local ref = {lunet.rand(1000):totable(), lunet.randn(500):totable(), lunet.randint(0, 10, {50}):totable()}
    collectgarbage(); collectgarbage()
    local before = lunet.C.ln_cpu_device_count()
    lunet.set_cpu_devices(3)
    local ok, got = pcall(function()
      lunet.manual_seed(77)
      return {lunet.rand(1000, {device = 'cpu:2'}):totable(), lunet.randn(500, {device = 'cpu:1'}):totable(),
              lunet.randint(0, 10, {50}, {device = 'cpu:0'}):totable()}
    end)
    collectgarbage(); collectgarbage()
    lunet.set_cpu_devices(before)
    assert.is_true(ok, tostring(got))
    assert.same(ref, got)
  end)

  it('rand is uniform on [0, 1): range and moments; uniform_(lo, hi) on a view only', function()
    lunet.manual_seed(1)
    local t = lunet.rand(200000)
    assert.is_true(t:min():item() >= 0)
    assert.is_true(t:max():item() < 1)
    local m, s = moments(t)
    assert.near(0.5, m, 0.005)
    assert.near(math.sqrt(1 / 12), s, 0.005)
    local z = lunet.zeros(4, 5)
    z:narrow(2, 2, 2):uniform_(3, 4)
    assert.equal(0, z:narrow(2, 1, 1):abs():sum():item() + z:narrow(2, 4, 2):abs():sum():item())
    local mid = z:narrow(2, 2, 2)
    assert.is_true(mid:ge(3):all():item() and mid:lt(4):all():item())
  end)

  it('randn and normal_ have the requested mean and std, in float32 and float64', function()
    lunet.manual_seed(2)
    local m, s = moments(lunet.randn(200000))
    assert.near(0, m, 0.01)
    assert.near(1, s, 0.01)
    m, s = moments(lunet.empty(100000, {dtype = 'float64'}):normal_(3, 0.5))
    assert.near(3, m, 0.01)
    assert.near(0.5, s, 0.01)
  end)

  it('randint covers [low, high) as int64; bernoulli_ has mean p', function()
    lunet.manual_seed(3)
    local r = lunet.randint(-2, 3, {10000})
    assert.equal('int64', r.dtype)
    assert.equal(-2, r:min():item())
    assert.equal(2, r:max():item())
    for v = -2, 2 do
      local frac = r:eq(v):sum():item() / 10000
      assert.near(0.2, frac, 0.03)
    end
    assert.equal('int32', lunet.randint(0, 5, {3}, {dtype = 'int32'}).dtype)
    local b = lunet.zeros(100000):bernoulli_(0.3)
    assert.near(0.3, b:mean():item(), 0.01)
    assert.is_true(b:eq(0):logical_or(b:eq(1)):all():item())
  end)

  it('bad arguments are named', function()
    local ok, e = pcall(lunet.manual_seed, -1)
    assert.is_false(ok)
    assert.matches('manual_seed: seed must be a non%-negative integer', e)
    -- (2^64 wrapped to seed 0's numbers, 2^70 to 2^63's)
    for _, s in ipairs({ 2 ^ 64, 2 ^ 70, math.huge, 0 / 0 }) do
      ok, e = pcall(lunet.manual_seed, s)
      assert.is_false(ok, tostring(s))
      assert.matches('manual_seed: seed must be a non%-negative integer below 2%^64', e)
    end
    -- the largest ones below 2^64 stay distinct seeds
    lunet.manual_seed(2 ^ 64 - 2048)
    local a = lunet.rand(4)
    lunet.manual_seed(0)
    assert.is_false(lunet.rand(4):equal(a))
    ok, e = pcall(lunet.randint, 0, 5, 3)
    assert.is_false(ok)
    assert.matches('randint: size must be a table of sizes', e)
  end)
end)
