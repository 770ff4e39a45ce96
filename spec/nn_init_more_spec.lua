-- nn.init's xavier_normal_, trunc_normal_, orthogonal_, eye_, dirac_ as
-- torch 1.13's: shapes, exact properties, seeded reproducibility, moments
-- against the analytic ones (tolerances from the sample size), errors; and
-- that every initialiser runs under no_grad (a leaf parameter initialised
-- in place).
local lunet = require 'lunet'
local nn = lunet.nn
local init = nn.init

local err_of = require('support.fixtures').err_of

-- sample mean and variance (float64)
local function moments(t)
  local x = t:double():reshape(-1)
  local m = x:mean():item()
  local d = x - m
  return m, (d * d):mean():item(), x:numel()
end

-- the normal distribution's moments truncated to [a, b], by Simpson's rule on
-- its density (independent of the erf the initialiser uses)
local function trunc_moments(mu, sigma, a, b)
  local N = 20000
  local h = (b - a) / N
  local function integral(f)
    local s = f(a) + f(b)
    for i = 1, N - 1 do s = s + (i % 2 == 1 and 4 or 2) * f(a + i * h) end
    return s * h / 3
  end
  local function pdf(x) return math.exp(-0.5 * ((x - mu) / sigma) ^ 2) end
  local Z = integral(pdf)
  local m = integral(function(x) return x * pdf(x) end) / Z
  local v = integral(function(x) return (x - m) ^ 2 * pdf(x) end) / Z
  local m4 = integral(function(x) return (x - m) ^ 4 * pdf(x) end) / Z
  return m, v, m4
end

-- sample mean and variance within 5 standard errors of the analytic ones
local function check_moments(t, mean, var, m4)
  local m, v, n = moments(t)
  assert.is_true(math.abs(m - mean) < 5 * math.sqrt(var / n), ('mean %g, expected %g'):format(m, mean))
  local se_var = math.sqrt((m4 - var * var) / n)
  assert.is_true(math.abs(v - var) < 5 * se_var, ('variance %g, expected %g'):format(v, var))
end

describe('nn.init more', function()
  it('xavier_normal_: std gain * sqrt(2 / (fan_in + fan_out)), seeded', function()
    lunet.manual_seed(3)
    local w = init.xavier_normal_(lunet.empty(64, 32, 3, 3), 2)
    assert.same({ 64, 32, 3, 3 }, w:size())
    local std = 2 * math.sqrt(2 / (32 * 9 + 64 * 9))
    check_moments(w, 0, std * std, 3 * std ^ 4)
    lunet.manual_seed(3)
    assert.tensor_near(init.xavier_normal_(lunet.empty(64, 32, 3, 3), 2), w, 0)
    assert.matches('init.xavier_normal_: gain must be a number', err_of(init.xavier_normal_, w, 'x'), 1, true)
    assert.matches('at least 2 dims', err_of(init.xavier_normal_, lunet.empty(5)), 1, true)
  end)

  it('erf (trunc_normal_\'s bounds) to double precision', function()
    assert.near(0.8427007929497149, init._erf(1), 1e-15)
    assert.near(-0.9999779095030014, init._erf(-3), 1e-15)
  end)

  it('trunc_normal_: values in [a, b], the truncated normal\'s moments, seeded', function()
    for _, c in ipairs({ { nil, nil, nil, nil, 0, 1, -2, 2 }, { 1, 2, -1, 4, 1, 2, -1, 4 },
      { 0, 1, 2.5, 4, 0, 1, 2.5, 4 } }) do   -- (the last one far in the tail)
      lunet.manual_seed(11)
      local t = init.trunc_normal_(lunet.empty(200, 500), c[1], c[2], c[3], c[4])
      local a, b = c[7], c[8]
      assert.is_true(t:min():item() >= a and t:max():item() <= b)
      local mean, var, m4 = trunc_moments(c[5], c[6], a, b)
      check_moments(t, mean, var, m4)
      lunet.manual_seed(11)
      assert.tensor_near(init.trunc_normal_(lunet.empty(200, 500), c[1], c[2], c[3], c[4]), t, 0)
    end
    local t64 = init.trunc_normal_(lunet.empty({ 1000 }, { dtype = 'float64' }), 0, 0.02, -0.04, 0.04)
    assert.is_true(t64:abs():max():item() <= 0.04)
    assert.matches('init.trunc_normal_: a must be less than b', err_of(init.trunc_normal_, t64, 0, 1, 2, -2), 1, true)
    assert.matches('init.trunc_normal_: std must be non%-negative', err_of(init.trunc_normal_, t64, 0, -1))
    assert.matches('init.trunc_normal_: mean must be a number', err_of(init.trunc_normal_, t64, 'x'), 1, true)
    assert.matches('init.trunc_normal_: tensor must be a tensor', err_of(init.trunc_normal_, {}), 1, true)
  end)

  it('orthogonal_: W W^T (or W^T W) = gain^2 I, torch\'s sign convention, seeded', function()
    for _, s in ipairs({ { 6, 6 }, { 8, 3 }, { 3, 8 }, { 16, 4, 3, 3 }, { 20, 3, 2, 2 }, { 1, 5 }, { 5, 1 } }) do
      for _, gain in ipairs({ 1, 2 }) do
        lunet.manual_seed(5)
        local w = init.orthogonal_(lunet.empty(s), gain)
        assert.same(s, w:size())
        local rows = s[1]
        local W = w:double():reshape(rows, -1)
        local cols = W:size(2)
        local P = rows < cols and W:matmul(W:t()) or W:t():matmul(W)
        assert.tensor_near(P, lunet.eye(math.min(rows, cols), { dtype = 'float64' }) * (gain * gain), 1e-5)
        -- torch's method: W is the Q of the normal matrix it drew (G, or G^T
        -- when rows < cols), R = Q^T G upper triangular with a positive diagonal
        lunet.manual_seed(5)
        local G = lunet.randn(rows, cols):double()
        local R = rows < cols and W:matmul(G:t()) / gain or W:t():matmul(G) / gain
        local n = R:size(1)
        for i = 1, n do
          assert.is_true(R[{ i, i }] > 0)
          for j = 1, i - 1 do assert.is_true(math.abs(R[{ i, j }]) < 1e-5) end
        end
        lunet.manual_seed(5)
        assert.tensor_near(init.orthogonal_(lunet.empty(s), gain), w, 0)
      end
    end
    local e = lunet.empty(0, 3)
    assert.equal(e, init.orthogonal_(e))
    assert.matches('init.orthogonal_: only tensors with 2 or more dimensions are supported',
      err_of(init.orthogonal_, lunet.empty(4)), 1, true)
  end)

  it('eye_: the identity of a 2-d tensor', function()
    for _, s in ipairs({ { 3, 5 }, { 4, 2 }, { 3, 3 } }) do
      assert.tensor_near(init.eye_(lunet.randn(s)), lunet.eye(s[1], s[2]), 0)
    end
    assert.matches('init.eye_: only tensors with 2 dimensions are supported, got 3',
      err_of(init.eye_, lunet.empty(2, 2, 2)), 1, true)
  end)

  it('dirac_: the identity convolution, per group', function()
    local w = init.dirac_(lunet.randn(4, 4, 3, 3))
    local x = lunet.randn(2, 4, 5, 5)
    assert.tensor_near(nn.F.conv2d(x, w, nil, { padding = 1 }), x, 1e-6)
    -- (6, 2, 3) with 2 groups: out channels 1-3 and 4-6, each group's first min(3, 2) = 2 pass through
    local d = init.dirac_(lunet.randn(6, 2, 3), 2)
    local expect = lunet.zeros(6, 2, 3)
    for _, p in ipairs({ { 1, 1 }, { 2, 2 }, { 4, 1 }, { 5, 2 } }) do expect[{ p[1], p[2], 2 }] = 1 end
    assert.tensor_near(d, expect, 0)
    -- 5-d, even kernel sizes (the centre is size // 2, 0-based, as torch)
    local v = init.dirac_(lunet.randn(2, 3, 2, 4, 3))
    expect = lunet.zeros(2, 3, 2, 4, 3)
    expect[{ 1, 1, 2, 3, 2 }] = 1
    expect[{ 2, 2, 2, 3, 2 }] = 1
    assert.tensor_near(v, expect, 0)
    assert.matches('init.dirac_: only tensors with 3, 4, or 5 dimensions are supported',
      err_of(init.dirac_, lunet.empty(3, 3)), 1, true)
    assert.matches('init.dirac_: dim 1 (6) must be divisible by groups (4)',
      err_of(init.dirac_, lunet.empty(6, 2, 3), 4), 1, true)
    assert.matches('init.dirac_: groups must be a positive integer', err_of(init.dirac_, lunet.empty(6, 2, 3), 0), 1, true)
  end)

  it('every initialiser runs under no_grad: a leaf that requires grad is initialised in place', function()
    local p = lunet.randn({ 4, 6 }, { requires_grad = true })
    assert.has_error(function() p:uniform_() end)   -- (recording: refused)
    local calls = {
      function() init.uniform_(p) end, function() init.normal_(p) end, function() init.zeros_(p) end,
      function() init.ones_(p) end, function() init.constant_(p, 3) end, function() init.kaiming_uniform_(p) end,
      function() init.kaiming_normal_(p) end, function() init.xavier_uniform_(p) end,
      function() init.xavier_normal_(p) end, function() init.trunc_normal_(p) end,
      function() init.orthogonal_(p) end, function() init.eye_(p) end,
    }
    for _, f in ipairs(calls) do
      f()
      assert.is_true(p.requires_grad)
      assert.is_true(p:is_leaf())
      assert.is_true(lunet.is_grad_enabled())
    end
    local k = lunet.randn({ 4, 4, 3 }, { requires_grad = true })
    init.dirac_(k)
    assert.equal(4, k:sum():item())
    -- grad mode is back on after an error too
    err_of(init.eye_, k)
    assert.is_true(lunet.is_grad_enabled())
    -- and the parameter still trains
    local y = (p * 2):sum()
    y:backward()
    assert.tensor_near(p.grad, lunet.full({ 4, 6 }, 2), 0)
  end)
end)
