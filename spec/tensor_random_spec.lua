-- Random numbers: determinism under manual_seed, independence of the device
-- count, ranges and moments of each distribution.
local lunet = require 'lunet'
local fx = require 'support.fixtures'

-- ---- the stream (c/core/philox.h) as a scalar reference ----------------------------------

local ffi = require 'ffi'
local bit = require 'bit'
local u64 = ffi.typeof('uint64_t')
local TWO32 = 4294967296
local fb = ffi.new('float[1]')
local pun = ffi.new('union { float f; uint32_t u; }')
local function F(x) fb[0] = x; return fb[0] end   -- x rounded to float32
local function u32(x) return x % TWO32 end         -- (bit ops give signed results)

-- Philox 4x32-10 of counter ctr (a uint64) under key (a uint64): 4 words as numbers
local function philox(ctr, key)
  local c0, c1, c2, c3 = tonumber(ctr % TWO32), tonumber(ctr / TWO32), 0, 0
  local k0, k1 = tonumber(key % TWO32), tonumber(key / TWO32)
  for _ = 1, 10 do
    local p0, p1 = u64(0xD2511F53) * c0, u64(0xCD9E8D57) * c2
    local n0 = u32(bit.bxor(tonumber(p1 / TWO32), c1, k0))
    local n2 = u32(bit.bxor(tonumber(p0 / TWO32), c3, k1))
    c1, c3, c0, c2 = tonumber(p1 % TWO32), tonumber(p0 % TWO32), n0, n2
    k0, k1 = (k0 + 0x9E3779B9) % TWO32, (k1 + 0xBB67AE85) % TWO32
  end
  return { c0, c1, c2, c3 }
end

local function logf(x)
  pun.f = x
  local b = tonumber(pun.u)
  local e = math.floor(b / 2 ^ 23) - 127
  pun.u = b % 2 ^ 23 + 0x3f800000
  local m = pun.f
  if m > F(1.41421356) then m = F(m * 0.5); e = e + 1 end
  local f = F(m - 1)
  local z = F(f * f)
  local q = F(7.0376836292e-2)
  for _, c in ipairs { -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
    2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1 } do q = F(F(q * f) + F(c)) end
  local y = F(F(q * f) * z)
  y = F(y + F(e * F(-2.12194440e-4)))
  y = F(y + F(-0.5 * z))
  return F(F(f + y) + F(e * 0.693359375))
end

local function boxmuller(wa, wb)
  local u1 = F(F(bit.bor(math.floor(wa / 2), 1) % TWO32) * 2 ^ -31)
  local r = F(math.sqrt(F(-2 * logf(u1))))   -- (sqrt of a float, rounded once: as sqrtf)
  local t = math.floor(wb / 256)
  local qq = math.floor((t + 2 ^ 21) / 2 ^ 22)
  local s = F((t - qq * 2 ^ 22) * 2 ^ -22)
  local x = F(s * s)
  local ps = F(1.5819484542589635e-4)
  for _, c in ipairs { -4.681260325014591e-3, 7.969257980585098e-2, -6.459640860557556e-1, 1.5707963705062866 } do
    ps = F(F(ps * x) + F(c))
  end
  local sn = F(s * ps)
  local pc = F(9.037196286953986e-4)
  for _, c in ipairs { -2.086014114320278e-2, 2.5366923213005066e-1, -1.2337005138397217 } do pc = F(F(pc * x) + F(c)) end
  local cs = F(F(pc * x) + 1)
  local q = qq % 4
  local c, sv = cs, sn
  if q % 2 == 1 then c, sv = sn, cs end
  if q == 1 or q == 2 then c = -c end
  if q >= 2 then sv = -sv end
  return F(r * c), F(r * sv)
end

-- element i (0-based) of a float32 draw from (seed, offset): k = 4
local function ref_f32(dist, seed, offset, i, p0, p1)
  local w = philox(u64(offset) + math.floor(i / 4), u64(seed))
  local j = i % 4
  if dist == 'uniform' then
    local lo, range, hi = F(p0), F(p1 - p0), F(p1)
    local v = F(F(lo) + F(range * F(math.floor(w[j + 1] / 256) * 2 ^ -24)))
    if v >= hi then pun.f = hi; pun.u = pun.u - 1; v = pun.f end   -- (the float below hi, for hi > 0)
    return v
  elseif dist == 'normal' then
    local p = math.floor(j / 2) * 2
    local zc, zs = boxmuller(w[p + 1], w[p + 2])
    return F(F(p0) + F(F(p1) * (j % 2 == 0 and zc or zs)))
  else   -- bernoulli
    return w[j + 1] < math.ceil(p0 * TWO32) and 1 or 0
  end
end

-- element i of a k = 2 draw: float64 uniform [0, 1), randint [lo, lo + range)
local function ref_wide(dist, seed, offset, i, lo, range)
  local w = philox(u64(offset) + math.floor(i / 2), u64(seed))
  local h = (i % 2) * 2
  if dist == 'uniform' then
    return (w[h + 1] * 2 ^ 21 + math.floor(w[h + 2] / 2 ^ 11)) * 2 ^ -53
  end
  return lo + tonumber((u64(w[h + 1]) * TWO32 + w[h + 2]) % range)
end

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

  it('the kernel gives the scalar reference of the stream bit for bit (c/core/philox.h)', function()
    local seed, offset = 2 ^ 40 + 12345, 2 ^ 33 + 7   -- (words 1 of key and counter in use)
    local function check(dist, t, p0, p1, ref)
      lunet.set_rng_state(seed, offset)
      if dist == 'uniform' then t:uniform_(p0, p1) elseif dist == 'normal' then t:normal_(p0, p1)
      elseif dist == 'randint' then t = lunet.randint(p0, p1, { t:numel() }) else t:bernoulli_(p0) end
      local got = t:double():totable()
      for i = 0, #got - 1 do
        local want = ref(i)
        if got[i + 1] ~= want then
          error(('%s %s element %d: kernel %.17g, reference %.17g'):format(dist, t.dtype, i, got[i + 1], want))
        end
      end
    end
    local n = 3001
    for _, c in ipairs { { 'uniform', 0, 1 }, { 'uniform', -2, 3 }, { 'normal', 0, 1 }, { 'normal', 0.5, 3 },
      { 'bernoulli', 0.3 } } do
      check(c[1], lunet.empty(n), c[2], c[3], function(i) return ref_f32(c[1], seed, offset, i, c[2], c[3]) end)
    end
    check('uniform', lunet.empty(n, { dtype = 'float64' }), 0, 1,
      function(i) return ref_wide('uniform', seed, offset, i) end)
    check('randint', lunet.empty(n), -5, 1000, function(i) return ref_wide('randint', seed, offset, i, -5, 1005) end)
    -- float16 / bfloat16: the float32 normal rounded; uniform to the dtype's 11 / 8 bits
    for _, dt in ipairs { 'float16', 'bfloat16' } do
      local bits = dt == 'float16' and 11 or 8
      lunet.set_rng_state(seed, offset)
      local h = lunet.empty(n, { dtype = dt }):normal_()
      lunet.set_rng_state(seed, offset)
      assert.is_true(h:equal(lunet.empty(n):normal_():to(dt)), dt)
      lunet.set_rng_state(seed, offset)
      local u = lunet.empty(n, { dtype = dt }):uniform_():double():totable()
      for i = 0, n - 1 do
        local w = philox(u64(offset) + math.floor(i / 4), u64(seed))[i % 4 + 1]
        assert.equal(math.floor(w / 2 ^ (32 - bits)) * 2 ^ -bits, u[i + 1])
      end
    end
  end)

  it('draws advance the offset by ceil(n / k) counters (k = 4, or 2 for float64 and randint)', function()
    for _, c in ipairs { { function() lunet.rand(10) end, 3 }, { function() lunet.randn(8) end, 2 },
      { function() lunet.empty(9):bernoulli_(0.5) end, 3 }, { function() lunet.rand(5, { dtype = 'float64' }) end, 3 },
      { function() lunet.randint(0, 3, { 7 }) end, 4 }, { function() lunet.randn(1, { dtype = 'float16' }) end, 1 } } do
      lunet.set_rng_state(5, 100)
      c[1]()
      local _, off = lunet.rng_state()
      assert.equal(100 + c[2], off)
    end
  end)

  it('the numbers do not depend on the thread count, the device, or splitting the fill', function()
    local n = 100003   -- (several threads' worth, not a multiple of 4)
    local function draws()
      lunet.manual_seed(31)
      return { lunet.rand(n), lunet.randn(n), lunet.empty(n):bernoulli_(0.4), lunet.randn(n, { dtype = 'float64' }),
        lunet.randint(0, 100, { n }), lunet.rand(n, { dtype = 'bfloat16' }) }
    end
    local before = lunet.get_num_threads()
    lunet.set_num_threads(1)
    local ref = draws()
    for _, nt in ipairs { 2, 4 } do
      lunet.set_num_threads(nt)
      local got = draws()
      for k = 1, #ref do assert.is_true(got[k]:equal(ref[k]), ('%d threads, draw %d'):format(nt, k)) end
    end
    lunet.set_num_threads(before)
    -- 2 virtual devices: the draws on cpu:1
    collectgarbage(); collectgarbage()
    local ndev = lunet.C.ln_cpu_device_count()
    lunet.set_cpu_devices(2)
    local ok, e = pcall(function()
      lunet.manual_seed(31)
      local got = { lunet.rand(n, { device = 'cpu:1' }), lunet.randn(n, { device = 'cpu:1' }) }
      for k = 1, 2 do assert.is_true(got[k]:to('cpu:0'):equal(ref[k]), 'cpu:1 draw ' .. k) end
    end)
    collectgarbage(); collectgarbage()
    lunet.set_cpu_devices(ndev)
    assert.is_true(ok, tostring(e))
    -- halves, the offset advanced between them (a split at a multiple of k)
    lunet.manual_seed(31)
    local whole = lunet.randn(n)
    lunet.manual_seed(31)
    local a, b = lunet.randn(40000), lunet.randn(n - 40000)
    assert.is_true(lunet.cat({ a, b }):equal(whole))
  end)

  it('a non-contiguous target gets the numbers of a contiguous one, in its logical order', function()
    for _, dt in ipairs { 'float32', 'float64', 'float16' } do
      lunet.manual_seed(8)
      local ref = lunet.empty(6, 5, { dtype = dt }):normal_(1, 2)
      lunet.manual_seed(8)
      local t = lunet.empty(5, 6, { dtype = dt }):t():normal_(1, 2)
      assert.is_false(t:is_contiguous())
      assert.is_true(t:equal(ref), dt)
    end
  end)

  it('rand in float16 / bfloat16 stays below 1 and below hi; 0-element and 0-d targets', function()
    lunet.manual_seed(4)
    for _, dt in ipairs { 'float16', 'bfloat16', 'float64' } do
      local u = lunet.rand(200000, { dtype = dt })
      assert.is_true(u:max():item() < 1, dt)
      local m, s = moments(u)
      assert.near(0.5, m, 0.01)
      assert.near(math.sqrt(1 / 12), s, 0.01)
      local v = lunet.empty(100000, { dtype = dt }):uniform_(0.5, 0.75)
      assert.is_true(v:min():item() >= 0.5 and v:max():item() < 0.75, dt)
    end
    assert.equal(0, lunet.rand(0):numel())
    assert.equal(0, lunet.randn(3, 0):numel())
    lunet.manual_seed(4)
    local s = lunet.empty({}):normal_()
    assert.equal(0, s:dim())
    lunet.manual_seed(4)
    assert.equal(s:item(), lunet.randn(1):item())
  end)

  it('uniform and normal pass a Kolmogorov-Smirnov test on 1e6 samples; normal tails at the right rate', function()
    local n = 1000000
    local crit = 1.9495 / math.sqrt(n)   -- (the 1e-3 critical value)
    local i = lunet.arange(0, n, { dtype = 'float64' })
    local function ks(x, cdf)
      local F = cdf(x:sort():double())
      return math.max((i + 1):div(n):sub(F):max():item(), F:sub(i:div(n)):max():item())
    end
    lunet.manual_seed(11)
    for _, dt in ipairs { 'float32', 'float64' } do
      local du = ks(lunet.rand(n, { dtype = dt }), function(x) return x end)
      local dn = ks(lunet.randn(n, { dtype = dt }), function(x) return (x / math.sqrt(2)):erf():add(1):mul(0.5) end)
      assert.is_true(du < crit, ('%s uniform: D = %g'):format(dt, du))
      assert.is_true(dn < crit, ('%s normal: D = %g'):format(dt, dn))
    end
    -- |z| > 4 and > 5 over 1e8 float32 draws: expected 6334 and 57.3 (Poisson)
    local c4, c5 = 0, 0
    local t = lunet.empty(10000000)
    for _ = 1, 10 do
      t:normal_()
      local a = t:abs()
      c4 = c4 + a:gt(4):sum():item()
      c5 = c5 + a:gt(5):sum():item()
    end
    assert.is_true(math.abs(c4 - 6334) < 5 * math.sqrt(6334), 'beyond 4 sigma: ' .. c4)
    assert.is_true(math.abs(c5 - 57.3) < 5 * math.sqrt(57.3), 'beyond 5 sigma: ' .. c5)
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
    -- float32 and half draws compute in float: bounds and their span must fit it
    assert.matches('rand: bounds %[%-3e%+38, 3e%+38%) do not fit float32',
      fx.err_of(function() lunet.empty(3):uniform_(-3e38, 3e38) end))
    assert.matches('rand: bounds %[0, 70000%) do not fit float16',
      fx.err_of(function() lunet.empty(3, { dtype = 'float16' }):uniform_(0, 7e4) end))
    assert.is_true(lunet.empty(3, { dtype = 'float64' }):uniform_(-3e38, 3e38):abs():max():item() < 3e38)
    ok, e = pcall(lunet.randint, 0, 5, 3)
    assert.is_false(ok)
    assert.matches('randint: size must be a table of sizes', e)
  end)
end)
