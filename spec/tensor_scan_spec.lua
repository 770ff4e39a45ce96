-- cumsum / cumprod (lunet.tensor_scan, C ln_scan) against PyTorch 1.13:
-- values and result dtypes from spec/fixtures/tensor_scan.safetensors
-- (written by tools/gen_tensor_scan_fixtures.py) along each dim of a 3-d
-- tensor, of a strided view, of every integer dtype and bool, with NaN and
-- inf, with the dtype option; then shapes (empty, size-1 dims, 0-d), long
-- rows against float64 references, gradients (PyTorch's and float64 finite
-- differences, rows with zeros included) and the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'

local fx, cases = fixtures.load_fixture('tensor_scan')

-- (here, not support.fixtures': errors raised at the caller's level name this file)
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'no error')
  return tostring(e)
end

-- the case's input as the fixture says to scan it
local function input_of(case)
  local x = fx[case.name .. '.x']
  if case.view == 't' then
    x = x:transpose(1, 3):narrow(2, 2, 3)
    assert.is_false(x:is_contiguous())
  end
  return x
end

local function run(case, x)
  local f = lunet.Tensor[case.op]
  if case.dtype then return f(x, case.dim, { dtype = case.dtype }) end   -- (JSON's null decodes to nil)
  return f(x, case.dim)
end

describe('cumsum / cumprod against PyTorch 1.13 (fixtures)', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 60, tostring(#cases)) end)

  for _, case in ipairs(cases) do
    if not case.grad then
      it(case.name, function()
        local want = fx[case.name .. '.out']
        local got = run(case, input_of(case))
        assert.equal(want.dtype, got.dtype)
        -- identical: float32 accumulates in double in both (PyTorch's CPU
        -- accumulator type for float), integers wrap the same way
        assert.tensor_near(got, want, 0)
        -- the functional form and a negative dim say the same
        local nd = got:dim()
        local opts = case.dtype and { dtype = case.dtype } or nil
        assert.tensor_near(lunet[case.op](input_of(case), case.dim - nd - 1, opts), want, 0)
      end)
    end
  end

  for _, case in ipairs(cases) do
    if case.grad then
      it(case.name .. ': output and gradient (float64)', function()
        local x = fx[case.name .. '.x']:clone()
        x.requires_grad = true
        local out = x[case.op](x, case.dim)
        assert.tensor_near(out, fx[case.name .. '.out'], 1e-13)
        out:backward(fx[case.name .. '.dout'])
        assert.tensor_near(x.grad, fx[case.name .. '.dx'], 1e-12)
      end)
    end
  end
end)

describe('cumsum / cumprod: shapes and dtypes', function()
  it('scan a 2-d tensor along each dim, the dim given as an option too', function()
    local m = lunet.tensor{{1, 2, 3}, {4, 5, 6}}   -- torch: m.cumsum(0), m.cumsum(1), m.cumprod(1)
    assert.same({{1, 2, 3}, {5, 7, 9}}, m:cumsum(1):totable())
    assert.same({{1, 3, 6}, {4, 9, 15}}, m:cumsum(2):totable())
    assert.same({{1, 2, 6}, {4, 20, 120}}, m:cumprod(-1):totable())
    assert.same({{1, 2, 3}, {4, 10, 18}}, m:cumprod({dim = 1}):totable())
    local d = m:cumsum({dim = 2, dtype = 'float64'})
    assert.equal('float64', d.dtype)
    assert.same({{1, 3, 6}, {4, 9, 15}}, d:totable())
    assert.same({{1, 3, 6}, {4, 9, 15}}, m:cumsum(2, {dtype = 'double'}):totable())
    assert.equal('float32', m:cumsum(1).dtype)
  end)

  it('give a new tensor, not a view of the input', function()
    local x = lunet.tensor{1, 2, 3}
    local y = x:cumsum(1)
    y:fill_(0)
    assert.same({1, 2, 3}, x:totable())
    local one = lunet.tensor{{7, 8}}   -- a size-1 dim: a copy of the input
    local c = one:cumprod(1)
    assert.same({{7, 8}}, c:totable())
    assert.is_false(c:is_same_storage(one))
  end)

  it('keep size-1 dims and scan along one as a copy', function()
    local x = lunet.randn(1, 4, 1)
    assert.tensor_near(x:cumsum(1), x, 0)
    assert.tensor_near(x:cumprod(3), x, 0)
    assert.same({1, 4, 1}, x:cumsum(2):size())
    assert.tensor_near(x:cumsum(2):select(2, 4), x:sum(2), 1e-6)
  end)

  it('scan empty tensors to empty results of the result dtype', function()
    for _, shape in ipairs({{0}, {2, 0}, {0, 3}, {2, 0, 3}}) do
      for d = 1, #shape do
        local x = lunet.zeros(shape)
        assert.same(shape, x:cumsum(d):size())
        assert.same(shape, x:cumprod(d):size())
        assert.equal('float32', x:cumsum(d).dtype)
        -- torch.zeros(2, 0, dtype=torch.int32).cumprod(1).dtype: int64
        assert.equal('int64', x:int():cumprod(d).dtype)
        assert.equal('float64', x:cumsum(d, {dtype = 'float64'}).dtype)
      end
    end
  end)

  it('scan a 0-d tensor as itself (dim 1 or -1)', function()
    local s = lunet.tensor(2.5)        -- torch.tensor(2.5).cumsum(0): tensor(2.5)
    for _, d in ipairs({1, -1}) do
      local r = s:cumsum(d)
      assert.equal(0, r:dim())
      assert.equal(2.5, r:item())
      assert.equal(2.5, s:cumprod(d):item())
    end
    local i = lunet.tensor(3, {dtype = 'int32'}):cumsum(1)
    assert.equal('int64', i.dtype)
    assert.equal(0, i:dim())
    assert.equal(3, i:item())
  end)

  it('take float16 and bfloat16 (scanned in float32, rounded back)', function()
    for _, dt in ipairs({'float16', 'bfloat16'}) do
      local x = lunet.tensor({1.5, 2.5, 0, 3}, {dtype = dt})
      local s, p = x:cumsum(1), x:cumprod(1)
      assert.equal(dt, s.dtype)
      assert.same({1.5, 4, 4, 7}, s:totable())       -- torch (bfloat16): [1.5, 4, 4, 7]
      assert.same({1.5, 3.75, 0, 0}, p:totable())
    end
    -- the dtype option rounds the input to it first: 1 + 2^-9 is 1 in bfloat16
    local r = lunet.tensor({1 + 2 ^ -9, 1 + 2 ^ -9}, {dtype = 'float64'}):cumsum(1, {dtype = 'bfloat16'})
    assert.same({1, 2}, r:totable())
  end)

  it('run on a second CPU device (a queued launch)', function()
    collectgarbage(); collectgarbage()
    lunet.synchronize()
    lunet.set_cpu_devices(2)
    finally(function()
      jit.flush()
      for _ = 1, 10 do
        collectgarbage()
        lunet.synchronize()
        if lunet.memory_allocated('cpu:1') == 0 then break end
      end
      lunet.set_cpu_devices(1)
    end)
    coroutine.wrap(function()   -- (no stale stack slot keeps a cpu:1 tensor alive)
      local x = lunet.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = 'int32', device = 'cpu:1'})
      local y = x:t():cumsum(2)   -- (int32 cast to int64 first: that copy is freed while the scan is queued)
      assert.equal('cpu:1', y.device)
      assert.equal('int64', y.dtype)
      assert.same({{1, 5}, {2, 7}, {3, 9}}, y:to('cpu:0'):totable())
    end)()
  end)
end)

describe('cumsum / cumprod: long rows', function()
  -- a float64 reference summed here, one element at a time
  local function lua_cumsum(x)
    local buf, n = x:double():read()
    local out, s = {}, 0
    for i = 0, n - 1 do s = s + buf[i]; out[i + 1] = s end
    return out
  end

  it('sum a 100000-element float32 row within float32 rounding of the float64 sum', function()
    local n = 100000
    local x = (lunet.arange(n):double() * 0.37):sin():mul(3):add(0.1):float()
    local got = x:cumsum(1):double():read()
    local want = lua_cumsum(x)
    local worst = 0
    for i = 1, n do
      local e = math.abs(got[i - 1] - want[i]) / (1 + math.abs(want[i]))
      if e > worst then worst = e end
    end
    -- (accumulated in double: each element is the exact sum rounded once, so
    -- within float32's half ulp; a float32 accumulator drifts far past it)
    assert.is_true(worst < 2 ^ -23, tostring(worst))
    -- 100000 times float32(0.1): a float32 accumulator drifts to 9998.557;
    -- the double sum (10000.000149) rounds to 10000, PyTorch's value too
    local tenth = lunet.full({n}, 0.1)
    local last = tenth:cumsum(1)[n]:item()
    assert.equal(10000, last)
  end)

  it('scan many long rows along either dim (threaded, by rows and by columns)', function()
    local x = lunet.randn(8, 40000)
    local ref = x:double():cumsum(2)   -- (rows of stride 1: the kernel's row loop)
    assert.tensor_near(ref:select(1, 5), lua_cumsum(x:select(1, 5)), 1e-12)
    assert.tensor_near(x:cumsum(2), ref, 2 ^ -23)
    local xt = x:t():contiguous()      -- 40000x8 scanned along dim 1: by columns
    assert.tensor_near(xt:cumsum(1), ref:t(), 2 ^ -23)
    assert.tensor_near(x:t():cumsum(1), ref:t(), 2 ^ -23)   -- the transposed view: by rows
    -- more columns than one block of the column loop (256), checked against the row loop
    local w = lunet.randn(3, 700, 300)
    assert.tensor_near(w:cumsum(2), w:transpose(2, 3):contiguous():double():cumsum(3):transpose(2, 3), 2 ^ -23)
    local v = w:narrow(2, 1, 6)        -- (a few steps: products of normals stay in range)
    assert.tensor_near(v:contiguous():cumprod(2), v:transpose(2, 3):contiguous():double():cumprod(3):transpose(2, 3),
      2 ^ -23)
  end)

  it('multiply a 100000-element row within float32 rounding of the float64 product', function()
    local n = 100000
    local x = (lunet.arange(n):double() * 0.9):cos():mul(1e-4):add(1):float()
    local got, want = x:cumprod(1), x:double():cumprod(1)
    assert.tensor_near(got, want, 2 ^ -23)
  end)

  it('sum int64 rows exactly past 2^53', function()
    local x = lunet.full({1000}, 2 ^ 52, {dtype = 'int64'})
    local s = x:cumsum(1)
    assert.equal(1000 * 2 ^ 52, tonumber(s:read()[999]))
    assert.equal('int64', s.dtype)
  end)
end)

describe('cumsum / cumprod gradients', function()
  local function check(f, x, what)
    local ok, msg = gradcheck(f, {x})
    assert.is_true(ok, (what or '') .. ': ' .. tostring(msg))
  end

  it('match float64 finite differences along each dim of a 3-d tensor', function()
    local x = lunet.randn({3, 4, 5}, {dtype = 'float64', requires_grad = true})
    for d = -3, 3 do
      if d ~= 0 then
        check(function(t) return t:cumsum(d) end, x, 'cumsum ' .. d)
        check(function(t) return t:cumprod(d) end, x, 'cumprod ' .. d)
      end
    end
    -- through a strided view
    check(function(t) return t:transpose(1, 3):cumprod(2) end, x, 'cumprod of a view')
  end)

  it('cumprod: rows with one zero, two zeros in a row, zeros apart, only zeros', function()
    local z = lunet.tensor({
      {1.5, -0.7, 2.0, 0.9, -1.2},
      {1.5, 0.0, 2.0, 0.9, -1.2},
      {1.5, 0.0, 0.0, 0.9, -1.2},
      {0.0, 2.0, 0.0, 0.9, 0.0},
      {1.5, 0.7, 2.0, 0.9, 0.0},
      {0.0, 0.0, 0.0, 0.0, 0.0},
    }, {dtype = 'float64', requires_grad = true})
    check(function(t) return t:cumprod(2) end, z, 'along rows')
    check(function(t) return t:cumprod(1) end, z, 'along columns')
    -- by hand: x = {2, 0, 3}, out = {2, 0, 0}; d(sum out)/dx = {1, 2 + 2*3, 0}
    local x = lunet.tensor({2, 0, 3}, {dtype = 'float64', requires_grad = true})
    x:cumprod(1):sum():backward()
    assert.same({1, 8, 0}, x.grad:totable())
    -- two zeros: only the products before the first one move
    local y = lunet.tensor({2, 0, 0, 3}, {dtype = 'float64', requires_grad = true})
    y:cumprod(1):sum():backward()
    assert.same({1, 2, 0, 0}, y.grad:totable())
  end)

  it('cumsum: the reversed cumulative sum of the gradient', function()
    local x = lunet.zeros({2, 3}, {requires_grad = true})
    local w = lunet.tensor{{1, 2, 3}, {4, 5, 6}}
    local loss = (x:cumsum(2) * w):sum()
    loss:backward()
    assert.same({{6, 5, 3}, {15, 11, 6}}, x.grad:totable())
  end)

  it('0-d and size-1 dims pass the gradient through', function()
    local s = lunet.tensor(3.0, {dtype = 'float64', requires_grad = true})
    check(function(t) return t:cumprod(1) end, s, '0-d cumprod')
    check(function(t) return t:cumsum(-1) end, s, '0-d cumsum')
    local one = lunet.tensor({{0.0, 2.0, -1.0}}, {dtype = 'float64', requires_grad = true})
    check(function(t) return t:cumprod(1) end, one, 'size-1 dim')
  end)

  it('the dtype option: the gradient comes back in the input dtype; an integer result records nothing', function()
    local x = lunet.tensor({{1, 2}, {3, 4}}, {requires_grad = true})
    local y = x:cumprod(2, {dtype = 'float64'})
    assert.equal('float64', y.dtype)
    assert.is_true(y.requires_grad)
    y:sum():backward()
    assert.equal('float32', x.grad.dtype)
    assert.same({{3, 1}, {5, 3}}, x.grad:totable())
    local i = x:cumsum(1, {dtype = 'int64'})
    assert.equal('int64', i.dtype)
    assert.is_false(i.requires_grad)
    assert.same({{1, 2}, {4, 6}}, i:totable())
  end)

  it('record nothing under no_grad', function()
    local x = lunet.randn({3}, {requires_grad = true})
    local y = lunet.no_grad(function() return x:cumsum(1) end)
    assert.is_false(y.requires_grad)
  end)
end)

describe('cumsum / cumprod errors', function()
  local m = lunet.randn(2, 3, 4)

  it('name the function and the problem, at the caller\'s line', function()
    local e = err_of(function() return m:cumsum(4) end)
    assert.matches('cumsum: dim 4 out of range for a 3%-d tensor', e)
    assert.matches('tensor_scan_spec.lua', e)
    e = err_of(function() return m:cumprod(2, {dtyp = 'float64'}) end)
    assert.matches("cumprod: unknown option 'dtyp'", e)
    assert.matches('tensor_scan_spec.lua', e)
    e = err_of(function() return m:cumsum(1.5) end)
    assert.matches('cumsum: dim must be an integer, got 1.5', e)
    assert.matches('tensor_scan_spec.lua', e)
    e = err_of(function() return m:cumsum(1, {dtype = 'bool'}) end)
    assert.matches('cumsum: a bool result is not supported', e, 1, true)
    assert.matches('tensor_scan_spec.lua', e)
  end)

  it('reject bad dims', function()
    assert.matches('cumsum: dim %-4 out of range for a 3%-d tensor', err_of(function() return m:cumsum(-4) end))
    assert.matches('cumprod: dim 0 out of range', err_of(function() return m:cumprod(0) end))
    assert.matches('cumsum: dim is required', err_of(function() return m:cumsum() end))
    assert.matches('cumprod: dim is required', err_of(function() return m:cumprod({dtype = 'float64'}) end))
    assert.matches('cumsum: dim must be an integer, got string', err_of(function() return m:cumsum('1') end))
    assert.matches('cumsum: dim must be an integer, got nan', err_of(function() return m:cumsum(0 / 0) end))
    assert.matches('cumprod: dim must be an integer, got boolean', err_of(function() return m:cumprod(true) end))
    assert.matches('cumsum: dim 2 out of range for a 0%-d tensor %(1 or %-1%)',
      err_of(function() return lunet.tensor(1):cumsum(2) end))
    assert.matches('cumsum: dim 0 out of range for a 0%-d tensor', err_of(function() return lunet.tensor(1):cumsum(0) end))
    assert.matches('cumsum: dim given twice', err_of(function() return m:cumsum(1, {dim = 2}) end))
    assert.matches('cumsum: dim 9 out of range', err_of(function() return m:cumsum({dim = 9}) end))
  end)

  it('reject bad options and a non-tensor self', function()
    assert.matches("cumsum: unknown option 'dims'", err_of(function() return m:cumsum({dims = 1}) end))
    assert.matches("cumsum: option 'dtype'", err_of(function() return m:cumsum(1, {dtype = 5}) end))
    assert.matches('cumsum: unknown dtype float128', err_of(function() return m:cumsum(1, {dtype = 'float128'}) end))
    assert.matches('cumprod: options must be a table, got number', err_of(function() return m:cumprod(1, 2) end))
    assert.matches('cumsum: expected an options table alone', err_of(function() return m:cumsum({dim = 1}, {}) end))
    assert.matches('cumprod: a bool result is not supported', err_of(function() return m:cumprod(1, {dtype = 'bool'}) end))
    -- (a non-tensor self is named by lunet.tensor_guard, without a line, as for lunet.sort(5))
    assert.matches('cumsum: input must be a tensor, got number', err_of(function() return lunet.cumsum(5, 1) end))
    assert.matches('cumprod: input must be a tensor, got nil', err_of(function() return lunet.cumprod(nil, 1) end))
    assert.matches('cumsum: .*tensor', err_of(function() return lunet.Tensor.cumsum({}, 1) end))
  end)

  it('the C entry point names its problems', function()
    local C, core = lunet.C, require 'lunet.core'
    assert.is_true(C.ln_scan(7, m.p, 0, -1) == nil)
    assert.matches('scan: unknown op 7', core.last_error())
    assert.is_true(C.ln_scan(C.LN_SCAN_PROD, m.p, 3, -1) == nil)
    assert.matches('cumprod: dim 4 out of range for a 3%-d tensor', core.last_error())
    assert.is_true(C.ln_scan(C.LN_SCAN_SUM, m.p, 0, 99) == nil)
    assert.matches('cumsum: invalid dtype 99', core.last_error())
    assert.is_true(C.ln_scan(C.LN_SCAN_SUM, nil, 0, -1) == nil)
    assert.matches('cumsum: input is nil', core.last_error())
    -- a negative dim counts from the end in C too
    local p = C.ln_scan(C.LN_SCAN_SUM, m.p, -1, -1)
    assert.is_true(p ~= nil)
    assert.tensor_near(require('lunet.tensor').wrap(p), m:cumsum(3), 0)
  end)

  it('a device without the kernel names it (cuda)', function()
    if not lunet.cuda.is_available() then pending('no GPU: ' .. tostring(lunet.cuda.reason())) return end
    local x = lunet.ones(3, {device = 'cuda:0'})
    assert.matches('cumsum: cuda:0 has no kernel for cumsum', err_of(function() return x:cumsum(1) end), 1, true)
  end)
end)
