-- Reductions: values against hand-computed numbers and float64 recomputation
-- in Lua; dims, keepdim, dtypes, non-contiguous and empty inputs, errors.
local lunet = require 'lunet'

local function flat(t, out)
  out = out or {}
  if type(t) == 'table' then for _, v in ipairs(t) do flat(v, out) end else out[#out + 1] = t end
  return out
end

local err_of = require('support.fixtures').err_of

-- a reproducible non-trivial float32 tensor (values exactly representable)
local function sample(...)
  local n = 1
  for _, s in ipairs({...}) do n = n * s end
  return (lunet.arange(n):double() * 0.37):sin():mul(4):round():div(4):float():view(...)
end

describe('sum / mean / prod', function()
  local t = lunet.tensor{{1, 2, 3}, {4, 5, 6}}

  it('reduce all elements to a 0-d tensor', function()
    local s = t:sum()
    assert.equal(0, s:dim())
    assert.equal(21, s:item())
    assert.equal(3.5, t:mean():item())
    assert.equal(720, t:prod():item())
  end)

  it('reduce over a dim, 1-based and negative, with keepdim', function()
    assert.same({5, 7, 9}, t:sum(1):totable())
    assert.same({6, 15}, t:sum(2):totable())
    assert.same({6, 15}, t:sum(-1):totable())
    assert.same({{6}, {15}}, t:sum(2, true):totable())
    assert.same({{2.5, 3.5, 4.5}}, t:mean(1, true):totable())
    assert.same({6, 120}, t:prod(2):totable())
  end)

  it('functional forms resolve through lunet', function()
    assert.equal(21, lunet.sum(t):item())
    assert.same({2, 5}, lunet.mean(t, 2):totable())
  end)

  it('sum of bool/uint8/int32 gives int64; float keeps its dtype', function()
    assert.equal('int64', lunet.tensor{true, false, true}:sum().dtype)
    assert.equal(2, lunet.tensor{true, false, true}:sum():item())
    assert.equal('int64', lunet.tensor({200, 100}, {dtype = 'uint8'}):sum().dtype)
    assert.equal(300, lunet.tensor({200, 100}, {dtype = 'uint8'}):sum():item())  -- no uint8 wrap
    assert.equal('int64', lunet.tensor({1, 2}, {dtype = 'int32'}):prod().dtype)
    assert.equal('float64', lunet.tensor({1, 2}, {dtype = 'float64'}):sum().dtype)
    assert.equal('float32', t:sum(1).dtype)
  end)

  it('int64 sums are exact beyond 2^53', function()
    local big = lunet.tensor({2 ^ 53, 1, 1}, {dtype = 'int64'})
    local s = big:sum()
    assert.equal('int64', s.dtype)
    local v = s:read()[0]
    assert.is_true(v == 9007199254740994LL)
  end)

  it('mean needs a float tensor', function()
    assert.matches('mean: needs a floating%-point tensor, got int64', err_of(function() return lunet.arange(4):mean() end))
  end)

  it('float32 sums of many terms match a float64 recomputation to 1e-6', function()
    local n = 100003
    local x = lunet.rand(n)
    local ref = 0
    local buf = x:read()
    for i = 0, n - 1 do ref = ref + buf[i] end
    local s = x:sum():item()
    assert.is_true(math.abs(s - ref) <= 1e-6 * math.abs(ref), ('%g vs %g'):format(s, ref))
    -- a row and a column reduction of a large matrix against the full sum
    local m = x:narrow(1, 1, 100000):view(400, 250)
    assert.is_true(math.abs(m:sum(1):double():sum():item() - m:double():sum():item()) < 1e-3)
    assert.is_true(math.abs(m:sum(2):double():sum():item() - m:double():sum():item()) < 1e-3)
  end)

  it('results are bitwise the same for 1 and 2 kernel threads (fixed chunking)', function()
    local C = lunet.C
    lunet.manual_seed(4)
    local x = lunet.randn(3, 300000)
    local dev = x.device_id
    local before = C.ln_device_threads(dev)
    local function run()
      local v, i = x:max(2)
      return {x:sum():item(), x:var():item(), x:norm():item(), x:sum(2):totable(), x:mean(1):sum():item(), i:totable()}
    end
    C.ln_set_device_threads(dev, 2)
    local two = run()
    C.ln_set_device_threads(dev, 1)
    local one = run()
    C.ln_set_device_threads(dev, before)
    assert.same(one, two)
  end)

  it('match float64 per-dim recomputation on a 3-d tensor, every dim', function()
    local x = sample(3, 4, 5)
    local v = x:totable()
    for d = 1, 3 do
      local got = x:sum(d):totable()
      local sz = {3, 4, 5}
      -- recompute
      local function at(i, j, k) return v[i][j][k] end
      local ok = true
      local dims = {}
      for a = 1, 3 do if a ~= d then dims[#dims + 1] = a end end
      for p = 1, sz[dims[1]] do
        for q = 1, sz[dims[2]] do
          local acc = 0
          for r = 1, sz[d] do
            local idx = {}
            idx[dims[1]], idx[dims[2]], idx[d] = p, q, r
            acc = acc + at(idx[1], idx[2], idx[3])
          end
          if math.abs(got[p][q] - acc) > 1e-5 then ok = false end
        end
      end
      assert.is_true(ok, 'sum over dim ' .. d)
    end
  end)

  it('sum of an empty tensor is 0, prod is 1, mean is nan', function()
    local e = lunet.zeros(0, 3)
    assert.equal(0, e:sum():item())
    assert.same({0, 0, 0}, e:sum(1):totable())
    assert.same({}, e:sum(2):totable())
    assert.equal(1, e:prod():item())
    local m = e:mean():item()
    assert.is_true(m ~= m)
  end)
end)

describe('max / min / argmax / argmin', function()
  local t = lunet.tensor{{3, 7, 7}, {9, -1, 2}}

  it('no dim gives a 0-d value', function()
    assert.equal(9, t:max():item())
    assert.equal(-1, t:min():item())
    assert.equal(0, t:max():dim())
  end)

  it('with a dim gives values and 1-based int64 indices (first occurrence)', function()
    local v, i = t:max(2)
    assert.same({7, 9}, v:totable())
    assert.same({2, 1}, i:totable())
    assert.equal('int64', i.dtype)
    v, i = t:min(1)
    assert.same({3, -1, 2}, v:totable())
    assert.same({1, 2, 2}, i:totable())
    v, i = t:max(1, true)
    assert.same({{9, 7, 7}}, v:totable())
    assert.same({{2, 1, 1}}, i:totable())
  end)

  it('argmax/argmin: flat 1-based index without a dim, per dim with one', function()
    assert.equal(4, t:argmax():item())
    assert.equal(5, t:argmin():item())
    assert.same({2, 1}, t:argmax(2):totable())
    assert.same({1, 2, 2}, t:argmin(1):totable())
    assert.equal('int64', t:argmax().dtype)
  end)

  it('max with a tensor argument is the elementwise maximum', function()
    assert.same({3, 5}, lunet.tensor{1, 5}:max(lunet.tensor{3, 2}):totable())
    assert.same({1, 2}, lunet.tensor{1, 5}:min(lunet.tensor{3, 2}):totable())
  end)

  it('NaN wins max and min, as in PyTorch', function()
    local x = lunet.tensor{1, 0 / 0, 3}
    local m = x:max():item()
    assert.is_true(m ~= m)
    local v, i = x:min(1)
    assert.is_true(v:item() ~= v:item())
    assert.equal(2, i:item())
    assert.equal(2, x:argmax():item())
  end)

  it('keeps integer and bool dtypes', function()
    local x = lunet.tensor({5, -3, 8}, {dtype = 'int32'})
    assert.equal('int32', x:max().dtype)
    assert.equal(8, x:max():item())
    assert.equal(-3, x:min():item())
    assert.equal(3, x:argmax():item())
    assert.equal(true, lunet.tensor{false, true}:max():item())
  end)

  it('long rows (parallel chunks) find the same index as a scan', function()
    local x = lunet.randn(300000)
    local buf = x:read()
    local bi, bv = 0, -math.huge
    for k = 0, 299999 do if buf[k] > bv then bv, bi = buf[k], k end end
    assert.equal(bi + 1, x:argmax():item())
    local v, i = x:view(3, 100000):max(2)
    assert.equal(bv, v:max():item())
    assert.equal(bi % 100000 + 1, i[math.floor(bi / 100000) + 1]:item())
  end)

  it('first occurrence and NaN across long rows and columns', function()
    for _, dt in ipairs({'float32', 'float64', 'int32', 'int64'}) do
      local x = lunet.zeros(3, 300, {dtype = dt})
      x[1][200] = 5; x[1][250] = 5; x[1][3] = -7
      x[2][290] = 1
      if dt:match('float') then x[3][100] = 0 / 0; x[3][280] = 0 / 0; x[3][5] = 9 end
      local v, i = x:max(2)
      assert.same({200, 290, dt:match('float') and 100 or 1}, i:totable(), dt)
      assert.same({200, 290, dt:match('float') and 100 or 1}, x:argmax(2):totable(), dt)
      assert.same({3, 1, dt:match('float') and 100 or 1}, x:argmin(2):totable(), dt)  -- NaN wins min too
      local xt = x:t():contiguous()          -- the same through the column kernel
      local vt, it = xt:max(1)
      assert.same(i:totable(), it:totable(), dt)
      assert.same(x:argmin(2):totable(), xt:argmin(1):totable(), dt)
      assert.equal(5, v[1]:item())
    end
  end)

  it('reducing an empty tensor is a clear error', function()
    assert.matches('max: cannot reduce an empty tensor %(shape {0,3}%)', err_of(function() return lunet.zeros(0, 3):max() end))
    assert.matches('argmin: cannot reduce over dim 1 of size 0', err_of(function() return lunet.zeros(0, 3):argmin(1) end))
    -- over a non-empty dim of an empty tensor the result is just empty
    local v, i = lunet.zeros(0, 3):max(2)
    assert.same({0}, v:size())
    assert.same({0}, i:size())
  end)
end)

describe('var / std', function()
  local t = lunet.tensor{{1, 2, 3, 4}, {2, 4, 6, 8}}

  it('unbiased by default, correction and unbiased flag options', function()
    assert.near(1.6666667, t[1]:var():item(), 1e-6)
    assert.near(1.25, t[1]:var({correction = 0}):item(), 1e-6)
    assert.near(1.25, t[1]:var(false):item(), 1e-6)
    assert.near(math.sqrt(5 / 3), t[1]:std():item(), 1e-6)
    assert.tensor_near(t:var(2), {5 / 3, 20 / 3}, 1e-6)
    assert.tensor_near(t:var(2, {correction = 0}), {1.25, 5}, 1e-6)
    assert.tensor_near(t:std(1, false), {0.5, 1, 1.5, 2}, 1e-6)
    assert.tensor_near(t:var(2, true, true), {{5 / 3}, {20 / 3}}, 1e-6)
    assert.tensor_near(t:var(1, {keepdim = true}), {{0.5, 2, 4.5, 8}}, 1e-6)
  end)

  it('matches a float64 two-pass recomputation on shifted data', function()
    -- a large offset defeats the naive sum-of-squares formula in float32
    local x = lunet.rand(50000):add(1000)
    local buf = x:read()
    local n, s = 50000, 0
    for i = 0, n - 1 do s = s + buf[i] end
    local mean, m2 = s / n, 0
    for i = 0, n - 1 do m2 = m2 + (buf[i] - mean) ^ 2 end
    assert.near(m2 / (n - 1), x:var():item(), 1e-6 * m2 / n)
    assert.near(math.sqrt(m2 / n), x:view(10, 5000):t():std({correction = 0}):item(), 1e-6)
  end)

  it('one element with correction 1 gives nan; ints are refused', function()
    local v = lunet.tensor{3}:var():item()
    assert.is_true(v ~= v)
    assert.matches('std: needs a floating%-point tensor', err_of(function() return lunet.arange(3):std() end))
  end)
end)

describe('norm', function()
  local t = lunet.tensor{{3, -4}, {0, 12}}

  it('a zero norm has a zero gradient, as torch 1.13 (the root and |a|^p, p < 1, gave NaN)', function()
    for _, p in ipairs({ 2, 1, 3, 0.5, math.huge }) do
      local x = lunet.zeros(3, { dtype = 'float64' }):requires_grad_()
      x:norm(p):backward()
      assert.tensor_near(x.grad, { 0, 0, 0 }, 0)
    end
    -- per row: a zero row beside others (torch 1.13's values)
    local x = lunet.tensor({ { 0, 0 }, { 1, 2 } }, { dtype = 'float64' }):requires_grad_()
    x:norm(2, 2):sum():backward()
    assert.tensor_near(x.grad, { { 0, 0 }, { 1 / math.sqrt(5), 2 / math.sqrt(5) } }, 1e-15)
    x = lunet.tensor({ { 0, 0.5 }, { 1, 2 } }, { dtype = 'float64' }):requires_grad_()
    x:norm(0.5, 2):sum():backward()
    assert.tensor_near(x.grad, { { 0, 1 }, { 1 + math.sqrt(2), 1 + 1 / math.sqrt(2) } }, 1e-12)
    -- away from zero the gradient is unchanged (float64 finite differences)
    local gradcheck = require 'gradcheck'
    for _, p in ipairs({ 2, 1.5, 0.5, 3 }) do
      local ok, msg = gradcheck(function(t) return t:norm(p, 2) end,
        { (lunet.rand(3, 4, { dtype = 'float64' }) + 0.2):requires_grad_() })
      assert(ok, msg)
    end
  end)

  it('2-norm by default, other orders and per dim', function()
    assert.near(13, t:norm():item(), 1e-6)
    assert.near(19, t:norm(1):item(), 1e-6)
    assert.near(12, t:norm(math.huge):item(), 1e-6)
    assert.near(0, t:norm(-math.huge):item(), 1e-6)
    assert.near(3, t:norm(0):item(), 1e-6)  -- nonzero count
    assert.near((27 + 64 + 1728) ^ (1 / 3), t:norm(3):item(), 1e-5)
    assert.tensor_near(t:norm(2, 2), {5, 12}, 1e-6)
    assert.tensor_near(t:norm(1, 1, true), {{3, 16}}, 1e-6)
    assert.near(13, t:norm('fro'):item(), 1e-6)
  end)

  it('refuses bad orders and integer tensors', function()
    assert.matches('norm: p must be a number', err_of(function() return t:norm('nuc') end))
    assert.matches('norm: needs a floating%-point tensor', err_of(function() return lunet.arange(3):norm() end))
  end)
end)

describe('any / all', function()
  it('reduce to bool over all elements or a dim', function()
    local b = lunet.tensor{{true, false}, {false, false}}
    assert.equal(true, b:any():item())
    assert.equal(false, b:all():item())
    assert.same({true, false}, b:any(2):totable())
    assert.same({false, false}, b:all(1):totable())
    assert.equal('bool', lunet.tensor{1.5, 0}:any().dtype)
    assert.equal(false, lunet.tensor{1.5, 0}:all():item())
    assert.equal(true, lunet.tensor({1, 2}, {dtype = 'int64'}):all():item())
  end)

  it('empty: any is false, all is true', function()
    assert.equal(false, lunet.zeros(0):any():item())
    assert.equal(true, lunet.zeros(0):all():item())
  end)
end)

describe('reductions of views', function()
  it('transposed, narrowed and expanded inputs give the contiguous answer', function()
    local x = sample(6, 7)
    local xc = x:t():contiguous()
    for _, d in ipairs({1, 2}) do
      assert.tensor_near(x:t():sum(d), xc:sum(d), 1e-6)
      assert.tensor_near(x:t():max(d), xc:max(d), 0)
      assert.tensor_near(x:t():var(d), xc:var(d), 1e-5)
      assert.tensor_near(x:t():argmin(d), xc:argmin(d), 0)
    end
    assert.near(xc:sum():item(), x:t():sum():item(), 1e-5)
    assert.equal(xc:argmax():item(), x:t():argmax():item())
    local n = x:narrow(2, 2, 3)
    assert.tensor_near(n:sum(1), n:contiguous():sum(1), 1e-6)
    assert.near(n:contiguous():sum():item(), n:sum():item(), 1e-6)
    local e = lunet.tensor{1, 2, 3}:view(3, 1):expand(3, 4)
    assert.same({4, 8, 12}, e:sum(2):totable())
    assert.same({6, 6, 6, 6}, e:sum(1):totable())
    assert.equal(24, e:sum():item())
  end)

  it('a column reduction over a middle dim of a 3-d tensor', function()
    local x = sample(4, 300, 5)
    local ref = x:double():sum(2)
    assert.tensor_near(x:sum(2), ref, 1e-5)
    local v, i = x:max(2)
    assert.tensor_near(v, x:gather(2, i:view(4, 1, 5)):view(4, 5), 0)
  end)

  it('float16 and bfloat16 reduce in float32 and keep their dtype', function()
    local h = lunet.tensor{1, 2, 3.5}:half()
    assert.equal('float16', h:sum().dtype)
    assert.equal(6.5, h:sum():item())
    assert.equal(3.5, lunet.tensor{1, 2, 3.5}:bfloat16():max():item())
    assert.equal(3, h:argmax():item())
  end)
end)

describe('reductions over several dims', function()
  local x = lunet.arange(24):float():view(2, 3, 4)

  it('sum/mean/amax/var/norm over a list of dims, with keepdim', function()
    assert.same({66, 210}, x:sum({2, 3}):totable())
    assert.same({66, 210}, x:sum({-1, 2}):totable())
    assert.same({1, 3, 1}, x:mean({1, 3}, true):size())
    assert.same({7.5, 11.5, 15.5}, x:mean({1, 3}):totable())
    assert.same({0, 1, 2, 3}, x:amin({1, 2}):totable())
    assert.same({20, 21, 22, 23}, x:amax({1, 2}):totable())
    assert.near(50, x:var({1, 2, 3}):item(), 1e-5)
    assert.tensor_near(x:std({2, 3}, {correction = 0}), {math.sqrt(143 / 12), math.sqrt(143 / 12)}, 1e-6)
    assert.near(math.sqrt(506), x:norm(2, {2, 3}):totable()[1], 1e-5)
    assert.equal(276, x:sum({}):item())   -- an empty list reduces everything, as in PyTorch
  end)

  it('a transposed input gives the same answer; repeated dims are refused', function()
    local xt = x:transpose(1, 3)                 -- 4x3x2
    assert.same({66, 210}, xt:sum({1, 2}):totable())
    assert.matches('sum: dim 1 appears twice', err_of(function() return x:sum({1, -3}) end))
    assert.matches('sum: dim 5 out of range', err_of(function() return x:sum({1, 5}) end))
  end)
end)

describe('reduction argument errors', function()
  local t = lunet.ones(2, 3)
  it('name the function for bad dims, keepdim and self', function()
    assert.matches('sum: dim 3 out of range for a 2%-d tensor', err_of(function() return t:sum(3) end))
    assert.matches('sum: dim must be an integer', err_of(function() return t:sum('x') end))
    assert.matches('mean: keepdim must be a boolean', err_of(function() return t:mean(1, 1) end))
    assert.matches('sum: input must be a tensor, got nil', err_of(function() return lunet.sum(nil) end))
    assert.matches('var: correction must be >= 0', err_of(function() return t:var(1, {correction = -1}) end))
    assert.matches('amax: cannot reduce over dim 2 of size 0', err_of(function() return lunet.ones(2, 0):amax(2) end))
    assert.matches('amin: dim 5 out of range', err_of(function() return t:amin(5) end))
  end)
end)
