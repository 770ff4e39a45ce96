-- median / nanmedian / kthvalue / quantile / nanquantile (lunet.tensor_order_stats)
-- against PyTorch 1.13: values, indices and float64 gradients from
-- spec/fixtures/tensor_order.safetensors (written by
-- tools/gen_tensor_order_fixtures.py) over all elements and along every
-- dim, keepdim both ways, odd and even sizes, strided views, NaN rows,
-- ties, float64 and int64, several k, number and tensor q under every
-- interpolation; then 0-d and empty inputs, the options tables, float64
-- finite-difference gradchecks and the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'

local fx, cases = fixtures.load_fixture('tensor_order')

local NAN = 0 / 0

-- (here, not support.fixtures': errors raised at the caller's level name this file)
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'no error')
  return tostring(e)
end

local function input_of(case)
  local x = fx[case.name .. '.x']
  if case.view == 't' then
    x = x:transpose(1, 3):narrow(2, 2, 3)
    assert.is_false(x:is_contiguous())
  end
  return x
end

-- the case's call, as a method or (functional) through lunet[op]
local function call(case, x, functional)
  local f = functional and lunet[case.op] or lunet.Tensor[case.op]
  local op = case.op
  if op == 'median' or op == 'nanmedian' then
    if case.dim == nil then return f(x) end   -- (JSON's null decodes to nil)
    return f(x, case.dim, case.keepdim)
  elseif op == 'kthvalue' then
    return f(x, case.k, case.dim, case.keepdim)
  end
  local q = case.q or fx[case.name .. '.q']
  return f(x, q, case.dim, case.keepdim, { interpolation = case.interpolation })
end

-- values exactly for a selection; within rounding for quantile's interpolation
local function tol_of(case, dtype)
  if case.op == 'quantile' or case.op == 'nanquantile' then return dtype == 'float64' and 1e-14 or 1e-6 end
  return 0
end

-- x:gather(dim, indices) gives the values (indices without keepdim unsqueezed)
local function assert_gathers(x, dim, keepdim, values, indices)
  local idx, v = indices, values
  if not keepdim then idx, v = idx:unsqueeze(dim), v:unsqueeze(dim) end
  assert.tensor_near(x:gather(dim, idx), v, 0)
end

describe('order statistics against PyTorch 1.13 (fixtures)', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 200, tostring(#cases)) end)

  for _, case in ipairs(cases) do
    if not case.grad then
      it(case.name, function()
        local x = input_of(case)
        local want, want_i = fx[case.name .. '.values'], fx[case.name .. '.indices']
        local v, i = call(case, x)
        assert.equal(want.dtype, v.dtype)
        assert.tensor_near(v, want, tol_of(case, want.dtype))
        if want_i then
          assert.equal('int64', i.dtype)
          assert.same(want_i:size(), i:size())
          if case.ties then
            assert_gathers(x, case.dim, case.keepdim, v, i)
          else
            assert.same(want_i:totable(), i:totable())
          end
        else
          assert.is_nil(i)
        end
        -- the functional form says the same
        local fv, fi = call(case, x, true)
        assert.tensor_near(fv, v, 0)
        if i then assert.same(i:totable(), fi:totable()) end
      end)
    end
  end

  for _, case in ipairs(cases) do
    if case.grad then
      it(case.name .. ': values and input gradient (float64)', function()
        local x = fx[case.name .. '.x']:clone()
        x.requires_grad = true
        local v = call(case, x)
        assert.tensor_near(v, fx[case.name .. '.values'], 1e-14)
        v:backward(fx[case.name .. '.dout'])
        assert.tensor_near(x.grad, fx[case.name .. '.dx'], 1e-12)
      end)
    end
  end
end)

describe('median / kthvalue / quantile: shapes, options, special inputs', function()
  it('median of a small tensor: the lower middle for an even count', function()
    local x = lunet.tensor{{3, 1, 4, 2}, {9, 7, 8, 6}}
    assert.equal(4, x:median():item())                         -- torch: x.median() -> 4.
    local v, i = x:median(2)                                   -- x.median(1)
    assert.same({2, 7}, v:totable())
    assert.same({4, 2}, i:totable())
    v, i = x:median(1, true)                                   -- x.median(0, keepdim=True)
    assert.same({{3, 1, 4, 2}}, v:totable())
    assert.same({{1, 1, 1, 1}}, i:totable())
    v, i = x:median({dim = 2, keepdim = true})
    assert.same({{2}, {7}}, v:totable())
    assert.same({{4}, {2}}, i:totable())
    v = x:median({})                                           -- dim defaults to the last
    assert.same({2, 7}, v:totable())
    v, i = lunet.median(x, -1)
    assert.same({2, 7}, v:totable())
    assert.same({4, 2}, i:totable())
  end)

  it('median propagates NaN, nanmedian leaves it out', function()
    local x = lunet.tensor{{1, NAN, 3}, {NAN, NAN, NAN}, {2, 0, 5}}
    assert.is_true(x:median():item() ~= x:median():item())
    assert.equal(2, x:nanmedian():item())                      -- torch: nanmedian of 1,3,2,0,5 -> 2
    local v, i = x:median(2)
    local vt = v:totable()
    assert.is_true(vt[1] ~= vt[1] and vt[2] ~= vt[2])
    assert.equal(2, vt[3])
    assert.same({2, 1, 1}, i:totable())                        -- the first NaN
    v, i = x:nanmedian(2)
    vt = v:totable()
    assert.equal(1, vt[1])
    assert.is_true(vt[2] ~= vt[2])
    assert.equal(2, vt[3])
    assert.same({1, 1, 1}, i:totable())
  end)

  it('kthvalue picks the k-th smallest (k = 1 the minimum), dim defaulting to the last', function()
    local x = lunet.tensor{{5, 1, 4}, {2, 8, 3}}
    local v, i = x:kthvalue(1)                                 -- torch: x.kthvalue(1) -> min
    assert.same({1, 2}, v:totable())
    assert.same({2, 1}, i:totable())
    v, i = x:kthvalue(3, 2, true)
    assert.same({{5}, {8}}, v:totable())
    assert.same({{1}, {2}}, i:totable())
    v, i = x:kthvalue(2, {dim = 1})
    assert.same({5, 8, 4}, v:totable())
    assert.same({1, 2, 1}, i:totable())
    v, i = lunet.kthvalue(lunet.tensor({7, -3, 9}, {dtype = 'int64'}), 2)
    assert.equal('int64', v.dtype)
    assert.equal(7, v:item())
    assert.equal(1, i:item())
  end)

  it('quantile: number and tensor q, dims, keepdim, options', function()
    local x = lunet.tensor{{1, 2, 3, 4}, {5, 6, 7, 8}}
    assert.near(3.1, x:quantile(0.3):item(), 1e-6)            -- torch: x.quantile(0.3) -> 3.1
    local q = lunet.tensor{0.25, 0.5}
    local r = x:quantile(q, 2, true)                           -- x.quantile(q, 1, keepdim=True)
    assert.same({2, 2, 1}, r:size())
    assert.tensor_near(r, {{{1.75}, {5.75}}, {{2.5}, {6.5}}}, 1e-6)
    assert.equal(5, x:quantile(0.5, {interpolation = 'nearest'}):item())   -- rank 3.5 -> 4 (ties to even)
    assert.tensor_near(x:quantile(0.4, 2, {interpolation = 'midpoint'}), {2.5, 6.5}, 0)
    assert.tensor_near(x:quantile(0.4, {dim = 2, interpolation = 'lower'}), {2, 6}, 0)
    assert.tensor_near(x:quantile(0.4, 2, false, {interpolation = 'higher'}), {3, 7}, 0)
    assert.same({1, 1}, x:quantile(0.5, nil, true):size())
    assert.same({2, 1, 1}, x:quantile(q, {keepdim = true}):size())
    assert.same({2, 4}, x:quantile(q, 1):size())
    assert.same({}, x:quantile(lunet.tensor(0.5)):size())
    assert.tensor_near(lunet.quantile(x, 1, 1), {5, 6, 7, 8}, 0)
    local n = lunet.tensor{{1, NAN, 3}, {NAN, NAN, NAN}}
    local v = n:quantile(0.5, 2):totable()
    assert.is_true(v[1] ~= v[1] and v[2] ~= v[2])
    v = n:nanquantile(0.5, 2):totable()
    assert.equal(2, v[1])
    assert.is_true(v[2] ~= v[2])
  end)

  it('0-d tensors: median, kthvalue and quantile of the one element', function()
    local s = lunet.tensor(5.0)
    assert.equal(0, s:median():dim())
    assert.equal(5, s:median():item())
    local v, i = s:median(1)                                   -- torch: tensor(5.).median(0) -> (5., 0)
    assert.equal(0, v:dim())
    assert.equal(5, v:item())
    assert.equal(1, i:item())
    v, i = s:kthvalue(1, -1)
    assert.equal(5, v:item())
    assert.equal(1, i:item())
    assert.equal(5, s:quantile(0.5):item())
    local q = s:quantile(lunet.tensor{0.2, 0.5}, 1, true)      -- torch: shape (2,)
    assert.same({2}, q:size())
    assert.same({}, s:nanquantile(0.3, nil, true):size())
  end)

  it('empty inputs: a NaN median over no elements, errors for an empty reduced dim', function()
    local e = lunet.zeros(0)
    assert.is_true(e:median():item() ~= e:median():item())     -- torch: tensor([]).median() -> nan
    assert.is_true(e:nanmedian():item() ~= e:nanmedian():item())
    local v, i = lunet.zeros(0, 3):median(2)                   -- torch: shape (0,)
    assert.same({0}, v:size())
    assert.same({0}, i:size())
    v = lunet.zeros(0, 3):kthvalue(2, 2, true)
    assert.same({0, 1}, v:size())
    assert.matches('median: dim 2 has size 0', err_of(function() return lunet.zeros(2, 0):median(2) end))
    assert.matches('kthvalue: k 1 out of range for dim 1 of size 0', err_of(function() return e:kthvalue(1) end))
    assert.matches('quantile: input tensor must be non%-empty', err_of(function() return e:quantile(0.5) end))
    assert.matches('median: the median of an empty int64 tensor',
      err_of(function() return lunet.zeros(0, {dtype = 'int64'}):median() end))
  end)

  it('integer and other dtypes: median and kthvalue keep the dtype', function()
    for _, dt in ipairs({'float32', 'float64', 'float16', 'bfloat16', 'int32', 'int64', 'uint8'}) do
      local t = lunet.tensor({{3, 1, 2, 7}, {4, 4, 0, 9}}, {dtype = dt})
      local v, i = t:median(2)
      assert.equal(dt, v.dtype)
      assert.same({2, 4}, v:totable())
      assert_gathers(t, 2, false, v, i)
      assert.equal(3, t:median():item())
      v = t:kthvalue(4)
      assert.same({7, 9}, v:totable())
    end
  end)

  it('a long row: the median and quantile agree with the sorted values', function()
    local x = lunet.randn(7, 1001)
    local s = x:sort(2)
    assert.tensor_near(x:median(2), s:select(2, 501), 0)
    assert.tensor_near(x:kthvalue(17, 2), s:select(2, 17), 0)
    assert.tensor_near(x:quantile(0.5, 2), s:select(2, 501), 0)
    assert.tensor_near(x:quantile(0.25, 2, {interpolation = 'lower'}), s:select(2, 251), 0)
    local xd = x:double()
    assert.tensor_near(xd:quantile(0.1234, 2), s:double():select(2, 124):lerp(s:double():select(2, 125), 0.4), 1e-12)
  end)
end)

describe('order statistics: gradients', function()
  it('median and kthvalue route the gradient to the selected element', function()
    local x = lunet.tensor({{3, 1, 2}, {0, 5, 4}}, {requires_grad = true})
    local v = x:median(2)
    v:backward(lunet.tensor{10, 20})
    assert.same({{0, 0, 10}, {0, 0, 20}}, x.grad:totable())
    x.grad = nil
    x:kthvalue(2, 1):sum():backward()
    assert.same({{1, 0, 0}, {0, 1, 1}}, x.grad:totable())
  end)

  it('median over all elements shares the gradient among the tied medians (as PyTorch)', function()
    local x = lunet.tensor({1, 2, 2, 3}, {requires_grad = true})
    x:median():backward()
    assert.same({0, 0.5, 0.5, 0}, x.grad:totable())
    local y = lunet.tensor({1, NAN, 2, NAN}, {requires_grad = true})
    y:median():backward()
    assert.same({0, 0.5, 0, 0.5}, y.grad:totable())
    lunet.no_grad(function() assert.is_false(x:median().requires_grad) end)
  end)

  it('quantile\'s linear interpolation gives q a gradient too (as PyTorch)', function()
    local x = lunet.tensor({{1, 5, 2, 7}, {3, 0, 4, 1}}, {dtype = 'float64', requires_grad = true})
    local q = lunet.tensor({0.3, 0.8}, {dtype = 'float64', requires_grad = true})
    local w = lunet.tensor({{1, 2}, {3, 4}}, {dtype = 'float64'})
    local loss = (x:quantile(q, 2) * w):sum()
    loss:backward()
    -- torch: q.grad = [9, 30]; x.grad = [[.1, 1.8, .9, 1.2], [2.4, .2, 1.6, 1.8]]
    assert.tensor_near(q.grad, {9, 30}, 1e-12)
    assert.tensor_near(x.grad, {{0.1, 1.8, 0.9, 1.2}, {2.4, 0.2, 1.6, 1.8}}, 1e-12)
  end)

  it('float64 finite differences: median(dim), nanmedian, kthvalue, quantile (linear, midpoint)', function()
    local x = lunet.randn({4, 5}, {dtype = 'float64', requires_grad = true})
    local checks = {
      function(a) return a:median(1) end,
      function(a) return a:median(2, true) end,
      function(a) return a:median() end,
      function(a) return a:nanmedian(2) end,
      function(a) return a:kthvalue(2, 1) end,
      function(a) return a:kthvalue(5) end,
      function(a) return a:quantile(0.37, 2) end,
      function(a) return a:quantile(lunet.tensor({0.1, 0.6, 0.95}, {dtype = 'float64'}), 1, true) end,
      function(a) return a:quantile(0.42) end,
      function(a) return a:quantile(0.42, 2, {interpolation = 'midpoint'}) end,
      function(a) return a:nanquantile(0.8, 1) end,
    }
    for k, f in ipairs(checks) do
      local ok, msg = gradcheck(f, {x})
      assert.is_true(ok, ('check %d: %s'):format(k, tostring(msg)))
    end
  end)
end)

describe('order statistics: errors', function()
  local m = lunet.tensor{{3, 1, 2}, {1, 1, 0}}

  it('name the function and the problem, at the caller\'s line', function()
    local e = err_of(function() return m:median(3) end)
    assert.matches('median: dim 3 out of range for a 2%-d tensor', e)
    assert.matches('tensor_order_stats_spec.lua', e)
    e = err_of(function() return m:kthvalue(4) end)
    assert.matches('kthvalue: k 4 out of range for dim 2 of size 3', e)
    assert.matches('tensor_order_stats_spec.lua', e)
    e = err_of(function() return m:quantile(1.5) end)
    assert.matches('quantile: q must be in the range %[0, 1%], got 1.5', e)
    assert.matches('tensor_order_stats_spec.lua', e)
    e = err_of(function() return m:nanquantile(0.5, {interp = 'lower'}) end)
    assert.matches("nanquantile: unknown option 'interp'", e)
    assert.matches('tensor_order_stats_spec.lua', e)
  end)

  it('reject bad inputs, dims, k, q and options', function()
    assert.matches('median: input must be a tensor, got number', err_of(function() return lunet.median(5) end))
    assert.matches('kthvalue: .*tensor', err_of(function() return lunet.Tensor.kthvalue({}, 1) end))
    assert.matches('quantile: input must be a tensor', err_of(function() return lunet.quantile('x', 0.5) end))
    assert.matches('median: dim must be an integer, got 1.5', err_of(function() return m:median(1.5) end))
    assert.matches('nanmedian: dim %-3 out of range', err_of(function() return m:nanmedian(-3) end))
    assert.matches('median: keepdim must be a boolean, got number', err_of(function() return m:median(1, 1) end))
    assert.matches("median: unknown option 'dims'", err_of(function() return m:median({dims = 1}) end))
    assert.matches("median: option 'keepdim'", err_of(function() return m:median({keepdim = 'yes'}) end))
    assert.matches('median: expected an options table alone', err_of(function() return m:median({dim = 1}, true) end))
    assert.matches('median: dim 2 out of range for a 0%-d tensor', err_of(function() return lunet.tensor(1):median(2) end))
    assert.matches('kthvalue: k must be an integer, got 1.5', err_of(function() return m:kthvalue(1.5) end))
    assert.matches('kthvalue: k must be an integer, got nil', err_of(function() return m:kthvalue() end))
    assert.matches('kthvalue: k 0 out of range', err_of(function() return m:kthvalue(0) end))
    assert.matches("kthvalue: k 3 out of range for dim 1 of size 2", err_of(function() return m:kthvalue(3, 1) end))
    assert.matches("kthvalue: unknown option 'keep'", err_of(function() return m:kthvalue(1, {keep = true}) end))
    assert.matches('quantile: input tensor must be either float or double dtype %(float32 or float64%), got int64',
      err_of(function() return m:long():quantile(0.5) end))
    assert.matches('quantile: q must be in the range %[0, 1%], got %-0.1', err_of(function() return m:quantile(-0.1) end))
    assert.matches('quantile: q must be in the range %[0, 1%], got nan', err_of(function() return m:quantile(NAN) end))
    assert.matches('quantile: q must be a number or a tensor, got string', err_of(function() return m:quantile('0.5') end))
    assert.matches('quantile: q must be a number or a tensor, got nil', err_of(function() return m:quantile() end))
    assert.matches('quantile: q values must be in the range %[0, 1%]',
      err_of(function() return m:quantile(lunet.tensor{0.5, 1.2}) end))
    assert.matches('quantile: q values must be in the range',
      err_of(function() return m:quantile(lunet.tensor{0.5, NAN}) end))
    assert.matches('quantile: q must be a number or a 0%-d or 1%-d tensor, got a 2%-d tensor',
      err_of(function() return m:quantile(lunet.tensor{{0.5}}) end))
    assert.matches("quantile: q tensor must have the input's dtype float32, got float64",
      err_of(function() return m:quantile(lunet.tensor({0.5}, {dtype = 'float64'})) end))
    assert.matches("nanquantile: interpolation must be one of linear, lower, higher, midpoint or nearest, got 'cubic'",
      err_of(function() return m:nanquantile(0.5, {interpolation = 'cubic'}) end))
    assert.matches("quantile: option 'interpolation'", err_of(function() return m:quantile(0.5, {interpolation = 1}) end))
    assert.matches('quantile: dim given twice', err_of(function() return m:quantile(0.5, 1, {dim = 2}) end))
    assert.matches('quantile: options must be a table, got number', err_of(function() return m:quantile(0.5, 1, true, 3) end))
    assert.matches('quantile: expected the options table last', err_of(function() return m:quantile(0.5, {}, true) end))
    assert.matches('quantile: dim 3 out of range', err_of(function() return m:quantile(0.5, 3) end))
    assert.matches('quantile: keepdim must be a boolean', err_of(function() return m:quantile(0.5, 1, 'no') end))
  end)
end)
