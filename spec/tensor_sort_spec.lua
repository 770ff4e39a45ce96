-- sort / argsort / topk against PyTorch 1.13's results (1-based here).
-- torch was not importable on the machine that wrote this file, so the
-- expected outputs below are hand-derived from PyTorch's documented rules
-- and noted with the torch call they stand for: stable ordering of equal
-- elements (torch.sort(..., stable=True)), NaN above every number (last
-- ascending, first descending, picked first by topk's largest), -0.0 == 0.0.
-- Larger and strided cases are checked against `ref_sort` below, a plain
-- stable insertion sort in Lua with the same rules.
local lunet = require 'lunet'

local NAN = 0 / 0

-- NaN-safe flat list of a tensor's values (NaN -> 'nan')
local function vals(t)
  local out = {}
  local function walk(v)
    if type(v) == 'table' then for _, x in ipairs(v) do walk(x) end
    elseif v ~= v then out[#out + 1] = 'nan'
    else out[#out + 1] = v end
  end
  walk(t:totable())
  return out
end

-- (here, not support.fixtures': errors raised at the caller's level name this file)
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok)
  return tostring(e)
end

-- stable insertion sort of list (1-based positions), NaN largest
local function ref_sort(list, desc)
  local idx = {}
  for i = 1, #list do idx[i] = i end
  local function before(a, b)
    if desc then return (a ~= a and b == b) or a > b end
    return (a == a and b ~= b) or a < b
  end
  for i = 2, #idx do
    local x, j = idx[i], i
    while j > 1 and before(list[x], list[idx[j - 1]]) do idx[j] = idx[j - 1]; j = j - 1 end
    idx[j] = x
  end
  return idx
end

describe('sort', function()
  it('sorts a 1-d tensor, ascending and descending', function()
    local x = lunet.tensor{3, 1, 2, 5, 4}
    local v, i = x:sort()   -- torch.tensor([3.,1,2,5,4]).sort()
    assert.same({1, 2, 3, 4, 5}, v:totable())
    assert.same({2, 3, 1, 5, 4}, i:totable())
    assert.equal('int64', i.dtype)
    assert.equal('float32', v.dtype)
    v, i = x:sort(1, true)  -- .sort(0, descending=True)
    assert.same({5, 4, 3, 2, 1}, v:totable())
    assert.same({4, 5, 1, 3, 2}, i:totable())
    v, i = x:sort({descending = true, stable = true})
    assert.same({4, 5, 1, 3, 2}, i:totable())
  end)

  it('sorts a 2-d tensor along each dim (the last by default)', function()
    local m = lunet.tensor{{3, 1, 2}, {1, 1, 0}}
    local v, i = m:sort(1)  -- torch: .sort(0, stable=True)
    assert.same({{1, 1, 0}, {3, 1, 2}}, v:totable())
    assert.same({{2, 1, 2}, {1, 2, 1}}, i:totable())
    v, i = m:sort(2)        -- .sort(1, stable=True)
    assert.same({{1, 2, 3}, {0, 1, 1}}, v:totable())
    assert.same({{2, 3, 1}, {3, 1, 2}}, i:totable())
    local v2, i2 = m:sort()
    assert.same(v:totable(), v2:totable())
    assert.same(i:totable(), i2:totable())
    v2, i2 = m:sort(-1)
    assert.same(i:totable(), i2:totable())
    v, i = m:sort(1, true)  -- .sort(0, descending=True, stable=True)
    assert.same({{3, 1, 2}, {1, 1, 0}}, v:totable())
    assert.same({{1, 1, 1}, {2, 2, 2}}, i:totable())
    assert.same({{2, 3, 1}, {3, 1, 2}}, m:argsort():totable())
    assert.same({{1, 1, 1}, {2, 2, 2}}, m:argsort({dim = 1, descending = true}):totable())
  end)

  it('sorts a non-contiguous 3-d tensor (a transpose) along each dim', function()
    local base = (lunet.arange(24):double() * 7):fmod(5):float():view(2, 3, 4)
    base[{1, 2, 3}] = 0 / 0
    local x = base:transpose(1, 3)   -- 4x3x2, strided
    assert.is_false(x:is_contiguous())
    local xt = x:totable()
    for dim = 1, 3 do
      for _, desc in ipairs({false, true}) do
        local v, i = x:sort(dim, desc)
        assert.same({4, 3, 2}, v:size())
        local vt, it = v:totable(), i:totable()
        -- each line along dim against the reference
        for a = 1, (dim == 1 and 1 or 4) do
          for b = 1, (dim == 2 and 1 or 3) do
            for c = 1, (dim == 3 and 1 or 2) do
              local line, pos = {}, {a, b, c}
              for k = 1, x:size(dim) do
                pos[dim] = k
                line[k] = xt[pos[1]][pos[2]][pos[3]]
              end
              local want = ref_sort(line, desc)
              for k = 1, x:size(dim) do
                pos[dim] = k
                assert.equal(want[k], it[pos[1]][pos[2]][pos[3]])
                local got, exp = vt[pos[1]][pos[2]][pos[3]], line[want[k]]
                if exp ~= exp then assert.is_true(got ~= got) else assert.equal(exp, got) end
              end
            end
          end
        end
      end
    end
  end)

  it('is stable: equal elements keep their order', function()
    local x = lunet.tensor{2, 1, 2, 1, 2}
    local v, i = x:sort()          -- torch .sort(stable=True)
    assert.same({1, 1, 2, 2, 2}, v:totable())
    assert.same({2, 4, 1, 3, 5}, i:totable())
    v, i = x:sort(1, true)         -- .sort(descending=True, stable=True)
    assert.same({2, 2, 2, 1, 1}, v:totable())
    assert.same({1, 3, 5, 2, 4}, i:totable())
    -- a long run of ties (past the kernel's insertion-sorted runs)
    local t = lunet.arange(100):fmod(3)
    local _, ti = t:sort()
    local want = {}
    for r = 0, 2 do for k = 1, 100 do if (k - 1) % 3 == r then want[#want + 1] = k end end end
    assert.same(want, ti:totable())
  end)

  it('puts NaN above every number; -0.0 equals 0.0', function()
    local x = lunet.tensor{3, NAN, 1, -0.0, 0.0, NAN, -math.huge}
    local v, i = x:sort()          -- torch .sort(stable=True)
    assert.same({-math.huge, 0, 0, 1, 3, 'nan', 'nan'}, vals(v))
    assert.same({7, 4, 5, 3, 1, 2, 6}, i:totable())
    v, i = x:sort(1, true)         -- .sort(descending=True, stable=True)
    assert.same({'nan', 'nan', 3, 1, 0, 0, -math.huge}, vals(v))
    assert.same({2, 6, 1, 3, 4, 5, 7}, i:totable())
    assert.same({7, 4, 5, 3, 1, 2, 6}, x:double():argsort():totable())
  end)

  it('sorts int64, uint8, bool and the other dtypes', function()
    local x = lunet.tensor({5, -3, 9, 0, -3}, {dtype = 'int64'})
    local v, i = x:sort()          -- torch.tensor([5,-3,9,0,-3]).sort(stable=True)
    assert.same({-3, -3, 0, 5, 9}, v:totable())
    assert.equal('int64', v.dtype)
    assert.same({2, 5, 4, 1, 3}, i:totable())
    v, i = x:sort(1, true)
    assert.same({9, 5, 0, -3, -3}, v:totable())
    assert.same({3, 1, 4, 2, 5}, i:totable())
    local u = lunet.tensor({200, 3, 255, 0, 3}, {dtype = 'uint8'})
    v, i = u:sort()                -- dtype=torch.uint8
    assert.same({0, 3, 3, 200, 255}, v:totable())
    assert.equal('uint8', v.dtype)
    assert.same({4, 2, 5, 1, 3}, i:totable())
    v, i = u:sort(1, true)
    assert.same({255, 200, 3, 3, 0}, v:totable())
    assert.same({3, 1, 2, 5, 4}, i:totable())
    local b = lunet.tensor{true, false, true, false}
    v, i = b:sort()
    assert.same({false, false, true, true}, v:totable())
    assert.same({2, 4, 1, 3}, i:totable())
    for _, dt in ipairs({'float32', 'float64', 'float16', 'bfloat16', 'int32', 'int64', 'uint8'}) do
      local t = lunet.tensor({3, 1, 2, 1}, {dtype = dt})
      v, i = t:sort()
      assert.equal(dt, v.dtype)
      assert.same({1, 1, 2, 3}, v:totable())
      assert.same({2, 4, 3, 1}, i:totable())
      assert.same({1, 3, 2, 4}, t:argsort(1, true):totable())
    end
  end)

  it('sorts a 0-d tensor as itself and empty dims to empty results', function()
    local s = lunet.tensor(5.0)
    local v, i = s:sort()          -- torch.tensor(5.).sort(): (5., 0)
    assert.equal(0, v:dim())
    assert.equal(0, i:dim())
    assert.equal(5, v:item())
    assert.equal(1, i:item())
    local _, i1 = s:sort(1)
    assert.equal(1, i1:item())
    assert.equal(1, s:argsort(-1):item())
    v, i = lunet.zeros(0):sort()
    assert.same({0}, v:size())
    assert.same({0}, i:size())
    v, i = lunet.zeros(2, 0):sort()
    assert.same({2, 0}, v:size())
    assert.same({2, 0}, i:size())
    v, i = lunet.zeros(0, 3):sort(2)
    assert.same({0, 3}, i:size())
    assert.same({2, 0}, lunet.zeros(2, 0):argsort(1):size())
  end)

  it('sorts a large row: values nondecreasing, indices a permutation that gathers them', function()
    local x = lunet.rand(10000)
    local v, i = x:sort()
    assert.is_true(v:narrow(1, 2, 9999):ge(v:narrow(1, 1, 9999)):all():item())
    assert.same(lunet.arange(1, 10001):totable(), i:sort():totable())
    assert.is_true(x:gather(1, i):eq(v):all():item())
    -- many rows: the kernel's threaded path
    local m = lunet.randn(20, 10000)
    local mv, mi = m:sort(2, true)
    assert.is_true(mv:narrow(2, 1, 9999):ge(mv:narrow(2, 2, 9999)):all():item())
    assert.is_true(m:gather(2, mi):eq(mv):all():item())
    assert.is_true(mi:sort(2):eq(lunet.arange(1, 10001):view(1, 10000)):all():item())
  end)

  it('lunet.sort and lunet.argsort are the functional forms', function()
    local x = lunet.tensor{3, 1, 2}
    local v, i = lunet.sort(x)
    assert.same({1, 2, 3}, v:totable())
    assert.same({2, 3, 1}, i:totable())
    assert.same({1, 3, 2}, lunet.argsort(x, 1, true):totable())
  end)
end)

describe('topk', function()
  local x = lunet.tensor{1, 5, 3, 5, 2}

  it('picks the k largest in order (k = 0, 1, 2, all)', function()
    local v, i = x:topk(2)         -- torch.tensor([1.,5,3,5,2]).topk(2)
    assert.same({5, 5}, v:totable())
    assert.same({2, 4}, i:totable())
    v, i = x:topk(1)
    assert.same({5}, v:totable())
    assert.same({2}, i:totable())
    v, i = x:topk(0)
    assert.same({0}, v:size())
    assert.same({0}, i:size())
    v, i = x:topk(5)
    assert.same({5, 5, 3, 2, 1}, v:totable())
    assert.same({2, 4, 3, 5, 1}, i:totable())
  end)

  it('picks the k smallest with largest = false', function()
    local v, i = x:topk(2, 1, false)   -- .topk(2, 0, largest=False)
    assert.same({1, 2}, v:totable())
    assert.same({1, 5}, i:totable())
    v, i = x:topk(3, {largest = false, sorted = true})
    assert.same({1, 2, 3}, v:totable())
    assert.same({1, 5, 3}, i:totable())
  end)

  it('works along a dim of a 2-d tensor, and with NaN', function()
    local m = lunet.tensor{{3, 1, 2}, {1, 4, 0}}
    local v, i = m:topk(1, 1)      -- .topk(1, 0)
    assert.same({{3, 4, 2}}, v:totable())
    assert.same({{1, 2, 1}}, i:totable())
    v, i = m:topk(2)               -- .topk(2) (dim -1)
    assert.same({{3, 2}, {4, 1}}, v:totable())
    assert.same({{1, 3}, {2, 1}}, i:totable())
    local n = lunet.tensor{1, NAN, 3}
    v, i = n:topk(2)               -- largest picks NaN first
    assert.same({'nan', 3}, vals(v))
    assert.same({2, 3}, i:totable())
    v, i = n:topk(2, {largest = false})
    assert.same({1, 3}, vals(v))
    assert.same({1, 3}, i:totable())
    v, i = lunet.topk(lunet.tensor({7, 9, 8}, {dtype = 'int64'}), 2)
    assert.same({9, 8}, v:totable())
    assert.same({2, 3}, i:totable())
  end)

  it('handles 0-d and empty inputs', function()
    local s = lunet.tensor(5.0)
    local v, i = s:topk(1)         -- torch.tensor(5.).topk(1): (5., 0)
    assert.equal(0, v:dim())
    assert.equal(5, v:item())
    assert.equal(1, i:item())
    v, i = lunet.zeros(0):topk(0)
    assert.same({0}, v:size())
    v, i = lunet.zeros(3, 0):topk(0)
    assert.same({3, 0}, i:size())
  end)
end)

describe('sort / topk gradients', function()
  it('topk values carry gradient to the top-k positions', function()
    local x = lunet.randn({3, 5}, {requires_grad = true})
    local v = x:topk(2)
    v:sum():backward()
    local xt, gt = x:detach():totable(), x.grad:totable()
    for r = 1, 3 do
      local order = ref_sort(xt[r], true)
      local want = {0, 0, 0, 0, 0}
      want[order[1]], want[order[2]] = 1, 1
      assert.same(want, gt[r])
    end
  end)

  it('sort values carry gradient back through the permutation', function()
    local x = lunet.tensor({{3, 1, 2}, {0, 5, 4}}, {requires_grad = true})
    local v = x:sort(2)
    local w = lunet.tensor{{1, 2, 3}, {4, 5, 6}}
    local loss = (v * w):sum()
    loss:backward()
    -- positions {2, 3, 1} and {1, 3, 2} get weights 1, 2, 3 and 4, 5, 6
    assert.same({{3, 1, 2}, {4, 6, 5}}, x.grad:totable())
  end)
end)

describe('sort / argsort / topk errors', function()
  local m = lunet.tensor{{3, 1, 2}, {1, 1, 0}}

  it('name the function and the problem, at the caller\'s line', function()
    local e = err_of(function() return m:sort(3) end)
    assert.matches('sort: dim 3 out of range for a 2%-d tensor', e)
    assert.matches('tensor_sort_spec.lua', e)
    e = err_of(function() return m:topk(5) end)
    assert.matches("topk: k 5 is larger than dim 2's size 3", e)
    assert.matches('tensor_sort_spec.lua', e)
    e = err_of(function() return m:argsort({dimm = 1}) end)
    assert.matches("argsort: unknown option 'dimm'", e)
    assert.matches('tensor_sort_spec.lua', e)
    e = err_of(function() return m:topk(1.5) end)
    assert.matches('topk: k must be an integer', e)
    assert.matches('tensor_sort_spec.lua', e)
    -- (a non-tensor self is named by lunet.tensor_guard, without a line, as for lunet.argmax(5))
    assert.matches('sort: input must be a tensor, got number', err_of(function() return lunet.sort(5) end))
  end)

  it('reject bad inputs', function()
    assert.matches('sort: .*tensor', err_of(function() return lunet.Tensor.sort({}) end))
    assert.matches('argsort: input must be a tensor', err_of(function() return lunet.argsort('x') end))
    assert.matches('topk: input must be a tensor', err_of(function() return lunet.topk(nil, 1) end))
    assert.matches('sort: dim must be an integer, got 1.5', err_of(function() return m:sort(1.5) end))
    assert.matches('sort: dim must be an integer', err_of(function() return m:sort('1') end))
    assert.matches('argsort: dim %-3 out of range', err_of(function() return m:argsort(-3) end))
    assert.matches('sort: dim 2 out of range for a 0%-d tensor', err_of(function() return lunet.tensor(1):sort(2) end))
    assert.matches('sort: descending must be a boolean, got number', err_of(function() return m:sort(1, 1) end))
    assert.matches("sort: option 'descending'", err_of(function() return m:sort({descending = 'yes'}) end))
    assert.matches("sort: option 'stable'", err_of(function() return m:sort({stable = 1}) end))
    assert.matches("sort: unknown option 'dims'", err_of(function() return m:sort({dims = 1}) end))
    assert.matches('topk: k must be an integer, got 1.5', err_of(function() return m:topk(1.5) end))
    assert.matches('topk: k must be an integer, got nil', err_of(function() return m:topk() end))
    assert.matches('topk: k must be >= 0, got %-1', err_of(function() return m:topk(-1) end))
    assert.matches("topk: k 3 is larger than dim 1's size 2", err_of(function() return m:topk(3, 1) end))
    assert.matches("topk: k 2 is larger than dim 1's size 1", err_of(function() return lunet.tensor(1):topk(2) end))
    assert.matches("topk: k 1 is larger than dim 1's size 0", err_of(function() return lunet.zeros(0):topk(1) end))
    assert.matches('topk: largest must be a boolean', err_of(function() return m:topk(1, 2, 'no') end))
    assert.matches('topk: sorted must be a boolean', err_of(function() return m:topk(1, 2, true, 0) end))
    assert.matches("topk: unknown option 'larger'", err_of(function() return m:topk(1, {larger = true}) end))
    assert.matches('topk: dim 3 out of range', err_of(function() return m:topk(1, 3) end))
  end)
end)
