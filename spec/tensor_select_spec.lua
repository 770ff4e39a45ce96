-- nonzero / argwhere / masked_select / unique / unique_consecutive / bincount
-- (lunet.tensor_select) against PyTorch 1.13: results and float64
-- masked_select gradients from spec/fixtures/tensor_select.safetensors
-- (written by tools/gen_tensor_select_fixtures.py) over float32, float64,
-- int64, int32, uint8 and bool inputs, transposed and narrowed views, empty
-- and 0-d tensors, broadcasting masks, duplicates, NaN and -0.0, unique's
-- dim, bincount's weights and minlength; then small worked examples, the
-- options, finite-difference gradchecks, what stays out of autograd, and the
-- errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'

local fx, cases = fixtures.load_fixture('tensor_select')

local NAN = 0 / 0

-- (here, not support.fixtures': errors raised at the caller's level name this file)
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'no error')
  return tostring(e)
end

local function view_of(x, view)
  if view == 't' then return x:transpose(1, 2) end
  if view == 'tn' then return x:transpose(1, 2):narrow(1, 2, 2) end
  if view == 'col2' then return x:select(2, 2) end
  return x
end

local function input_of(case)
  local x = view_of(fx[case.name .. '.x'], case.view)
  if case.view then assert.is_false(x:is_contiguous()) end
  return x
end

-- exactly equal tensors: dtype, shape, values (NaN equal to NaN)
local function assert_same(want, got, what)
  assert.equal(want.dtype, got.dtype, what)
  assert.same(want:size(), got:size(), what)
  assert.tensor_near(got, want, 0)
end

-- the case's call, as a method or (functional) through lunet[op]
local function call(case, x, functional)
  local f = functional and lunet[case.op] or lunet.Tensor[case.op]
  local op, opts = case.op, case.opts
  if op == 'nonzero' then
    if opts.as_tuple then return f(x, opts) end
    return f(x)
  elseif op == 'argwhere' then
    return f(x)
  elseif op == 'masked_select' then
    return f(x, view_of(fx[case.name .. '.mask'], case.mask_view))
  elseif op == 'bincount' then
    return f(x, fx[case.name .. '.w'], case.minlength)
  end
  if next(opts) == nil then return f(x) end
  return f(x, opts)
end

-- unique's results: values[, inverse][, counts], as the options ask
local function unique_results(case, ...)
  local r, i = { values = (...) }, 2
  if case.opts.return_inverse then r.inverse = select(i, ...); i = i + 1 end
  if case.opts.return_counts then r.counts = select(i, ...); i = i + 1 end
  assert.equal(i - 1, select('#', ...))
  return r
end

-- values[inverse] gives x back, and counts are how often each value occurs
-- (values 1-d, the flat case)
local function assert_consistent(x, r)
  local flat = x:reshape({ x:numel() })
  assert.tensor_near(r.values:index_select(1, r.inverse:reshape({ x:numel() })), flat, 0)
  local want = lunet.zeros({ r.values:numel() }, { dtype = 'int64' })
  want:scatter_add_(1, r.inverse:reshape({ x:numel() }), lunet.ones({ x:numel() }, { dtype = 'int64' }))
  assert.same(want:totable(), r.counts:totable())
end

local function sorted_list(t)
  local l = t:double():totable()
  table.sort(l)
  return l
end

local function check_case(case, functional)
  local x = input_of(case)
  local name, op = case.name, case.op
  if op == 'nonzero' and case.opts.as_tuple then
    local cols = call(case, x, functional)
    local n = 0
    while fx[name .. '.c' .. (n + 1)] do n = n + 1 end
    assert.equal(n, #cols)
    for i = 1, n do assert_same(fx[name .. '.c' .. i], cols[i], 'column ' .. i) end
  elseif op == 'nonzero' or op == 'argwhere' or op == 'masked_select' or op == 'bincount' then
    assert_same(fx[name .. '.out'], call(case, x, functional))
  else
    local r = unique_results(case, call(case, x, functional))
    local want = fx[name .. '.values']
    if case.unordered then
      assert.equal(want.dtype, r.values.dtype)
      assert.same(sorted_list(want), sorted_list(r.values))
      assert_consistent(x, r)
      return
    end
    assert_same(want, r.values, 'values')
    if case.nan then
      -- (PyTorch 1.13 counts each NaN 0 and points it at value 1; lunet counts it once, at itself)
      if r.inverse then assert_consistent(x, r) end
      return
    end
    if r.inverse then assert_same(fx[name .. '.inverse'], r.inverse, 'inverse') end
    if r.counts then assert_same(fx[name .. '.counts'], r.counts, 'counts') end
  end
end

describe('selections against PyTorch 1.13 (fixtures)', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 100, tostring(#cases)) end)

  for _, case in ipairs(cases) do
    if not case.grad then
      it(case.name, function()
        check_case(case)
        check_case(case, true)   -- (the functional form says the same)
      end)
    end
  end

  for _, case in ipairs(cases) do
    if case.grad then
      it(case.name .. ': values and input gradient (float64)', function()
        local x = fx[case.name .. '.x']:clone()
        x.requires_grad = true
        local out = x:masked_select(fx[case.name .. '.mask'])
        assert_same(fx[case.name .. '.out'], out:detach())
        assert.is_true(out.requires_grad)
        out:backward(fx[case.name .. '.dout'])
        assert.tensor_near(x.grad, fx[case.name .. '.dx'], 1e-15)
      end)
    end
  end
end)

describe('nonzero / argwhere', function()
  it('gives the 1-based indices of the nonzero elements in row-major order', function()
    local x = lunet.tensor{{1, 0, 2}, {0, 0, 3}}
    local nz = x:nonzero()                                   -- torch: [[0, 0], [0, 2], [1, 2]]
    assert.equal('int64', nz.dtype)
    assert.same({{1, 1}, {1, 3}, {2, 3}}, nz:totable())
    assert.same(nz:totable(), lunet.argwhere(x):totable())
    assert.same(nz:totable(), x:argwhere():totable())
    assert.same(nz:totable(), lunet.nonzero(x):totable())
    local rows, cols = unpack(x:nonzero({as_tuple = true}))
    assert.same({1, 1, 2}, rows:totable())
    assert.same({1, 3, 3}, cols:totable())
    -- the indices pick the elements: x[{i, j}] ~= 0 for every row
    for _, ij in ipairs(nz:totable()) do assert.is_true(x[ij] ~= 0) end
  end)

  it('0-d input: {1, 0} or {0, 0}; as a tuple one column', function()
    assert.same({1, 0}, lunet.tensor(7):nonzero():size())
    assert.same({0, 0}, lunet.tensor(0):nonzero():size())
    local t = lunet.tensor(7):nonzero({as_tuple = true})
    assert.equal(1, #t)
    assert.same({1}, t[1]:totable())
    assert.same({0}, lunet.tensor(0):nonzero({as_tuple = true})[1]:size())
  end)

  it('counts NaN and inf as nonzero, -0.0 as zero; leaves autograd alone', function()
    local x = lunet.tensor({NAN, -0.0, math.huge, 0}, {requires_grad = true})
    local nz = x:nonzero()
    assert.same({{1}, {3}}, nz:totable())
    assert.is_false(nz.requires_grad)
  end)

  it('as_tuple = false is the matrix', function()
    local x = lunet.tensor{0, 5, 5}
    assert.same({{2}, {3}}, x:nonzero({as_tuple = false}):totable())
  end)
end)

describe('masked_select', function()
  it('picks the elements where the mask is true, broadcasting the mask', function()
    local x = lunet.arange(6):view(2, 3)
    assert.same({3, 4, 5}, x:masked_select(x:gt(2)):totable())
    assert.same({0, 2, 3, 5}, x:masked_select(lunet.tensor{true, false, true}):totable())
    assert.same({0, 2, 3, 5}, lunet.masked_select(x, lunet.tensor{true, false, true}):totable())
    -- the input broadcasts too: {2} against {2, 2}
    local y = lunet.tensor{1.0, 2.0}
    assert.same({1, 1, 2}, y:masked_select(lunet.tensor{{true, false}, {true, true}}):totable())
    -- a uint8 mask: nonzero is true (PyTorch's deprecated form)
    assert.same({1, 2}, y:masked_select(lunet.tensor({1, 1}, {dtype = 'uint8'})):totable())
  end)

  it('keeps the dtype; an empty selection is a 1-d empty tensor', function()
    local x = lunet.tensor({{1, 2}, {3, 4}}, {dtype = 'int64'})
    local r = x:masked_select(x:gt(10))
    assert.equal('int64', r.dtype)
    assert.same({0}, r:size())
    assert.same({1}, lunet.tensor(3):masked_select(lunet.tensor(true)):size())
  end)

  it('gradients: scattered back into zeros, summed over broadcast dims (gradcheck)', function()
    local x = lunet.randn({3, 4}, {dtype = 'float64', requires_grad = true})
    local mask = lunet.rand({3, 4}):gt(0.4)
    local ok, msg = gradcheck(function(a) return a:masked_select(mask) end, {x})
    assert.is_true(ok, tostring(msg))
    local b = lunet.randn({4, 1}, {dtype = 'float64', requires_grad = true})
    local m3 = lunet.rand({2, 4, 3}):gt(0.3)
    ok, msg = gradcheck(function(a) return a:masked_select(m3) end, {b})
    assert.is_true(ok, tostring(msg))
    local c = lunet.randn({5}, {dtype = 'float64', requires_grad = true})
    ok, msg = gradcheck(function(a) return (a * 2):masked_select(lunet.tensor{true, false, true, true, false}):exp() end, {c})
    assert.is_true(ok, tostring(msg))
    -- the gradient is 1 where selected (once per broadcast copy), 0 elsewhere
    local y = lunet.tensor({1.0, 2.0, 3.0}, {requires_grad = true})
    y:masked_select(lunet.tensor{{true, false, true}, {true, true, false}}):sum():backward()
    assert.same({2, 1, 1}, y.grad:totable())
  end)

  it('records nothing under no_grad', function()
    local x = lunet.randn({3}, {requires_grad = true})
    local r = lunet.no_grad(function() return x:masked_select(x:gt(-10)) end)
    assert.is_false(r.requires_grad)
  end)
end)

describe('unique / unique_consecutive', function()
  it('sorted values, inverse (1-based) and counts, as asked', function()
    local x = lunet.tensor({3, 1, 2, 1, 3, 3}, {dtype = 'int64'})
    local v = x:unique()                                     -- torch: [1, 2, 3]
    assert.same({1, 2, 3}, v:totable())
    local v2, inv = x:unique({return_inverse = true})        -- torch inverse: [2, 0, 1, 0, 2, 2]
    assert.same({1, 2, 3}, v2:totable())
    assert.same({3, 1, 2, 1, 3, 3}, inv:totable())
    local v3, counts = x:unique({return_counts = true})
    assert.same({1, 2, 3}, v3:totable())
    assert.same({2, 1, 3}, counts:totable())
    local _, i4, c4 = lunet.unique(x, {return_inverse = true, return_counts = true})
    assert.same(inv:totable(), i4:totable())
    assert.same(counts:totable(), c4:totable())
    assert.equal(1, select('#', x:unique()))
    assert.equal(3, select('#', x:unique({return_inverse = true, return_counts = true})))
  end)

  it('the inverse has the input\'s shape', function()
    local x = lunet.tensor{{2, 2}, {0, 2}}
    local _, inv = x:unique({return_inverse = true})
    assert.same({{2, 2}, {1, 2}}, inv:totable())
    local _, i0 = lunet.tensor(4):unique({return_inverse = true})
    assert.same({}, i0:size())
  end)

  it('sorted = false: still sorted (PyTorch allows any order)', function()
    local v, inv = lunet.tensor{3, 1, 2, 1}:unique({sorted = false, return_inverse = true})
    assert.same({1, 2, 3}, v:totable())
    assert.same({3, 1, 2, 1}, inv:totable())
  end)

  it('NaN: each NaN a value of its own, sorted last, counted once', function()
    local v, inv, c = lunet.tensor{NAN, 1, NAN, 1, 0}:unique({return_inverse = true, return_counts = true})
    local t = v:totable()
    assert.equal(4, #t)
    assert.same({0, 1}, {t[1], t[2]})
    assert.is_true(t[3] ~= t[3] and t[4] ~= t[4])
    assert.same({3, 2, 4, 2, 1}, inv:totable())
    assert.same({1, 2, 1, 1}, c:totable())
  end)

  it('dim: whole slices, sorted lexicographically', function()
    local x = lunet.tensor({{1, 2}, {1, 2}, {0, 3}}, {dtype = 'int64'})
    local v, inv, c = x:unique({dim = 1, return_inverse = true, return_counts = true})
    assert.same({{0, 3}, {1, 2}}, v:totable())               -- torch dim=0
    assert.same({2, 2, 1}, inv:totable())
    assert.same({1, 2}, c:totable())
    v, inv = x:unique({dim = 2, return_inverse = true})      -- the two columns differ
    assert.same(x:totable(), v:totable())
    assert.same({1, 2}, inv:totable())
    -- many columns: the ranks of pairs of columns, rounds of pairs
    local w = lunet.tensor({{0, 0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 0, 0, 1}, {0, 0, 0, 0, 0, 1, 0},
      {1, 0, 0, 0, 0, 0, 0}}, {dtype = 'int64'})
    v, inv, c = w:unique({dim = 1, return_inverse = true, return_counts = true})
    assert.same({{0, 0, 0, 0, 0, 0, 1}, {0, 0, 0, 0, 0, 1, 0}, {1, 0, 0, 0, 0, 0, 0}}, v:totable())
    assert.same({2, 1, 2, 3}, inv:totable())
    assert.same({1, 2, 1}, c:totable())
  end)

  it('unique_consecutive collapses runs only', function()
    local x = lunet.tensor({1, 1, 2, 2, 3, 1, 1, 2}, {dtype = 'int64'})
    local v, inv, c = x:unique_consecutive({return_inverse = true, return_counts = true})
    assert.same({1, 2, 3, 1, 2}, v:totable())
    assert.same({1, 1, 2, 2, 3, 4, 4, 5}, inv:totable())
    assert.same({2, 2, 1, 2, 1}, c:totable())
    assert.same({1, 2, 3, 1, 2}, lunet.unique_consecutive(x):totable())
    local r = lunet.tensor{{1, 2}, {1, 2}, {0, 3}, {1, 2}}:unique_consecutive({dim = 1})
    assert.same({{1, 2}, {0, 3}, {1, 2}}, r:totable())
  end)

  it('give no gradient (PyTorch\'s is not implemented)', function()
    local x = lunet.tensor({2.0, 1.0, 2.0}, {requires_grad = true})
    assert.is_false(x:unique().requires_grad)
    assert.is_false(x:unique_consecutive().requires_grad)
  end)
end)

describe('bincount', function()
  local x = lunet.tensor({1, 2, 2, 3, 1}, {dtype = 'int64'})

  it('counts each value 0..max (int64), at least minlength bins', function()
    local c = x:bincount()                                   -- torch: [0, 2, 2, 1]
    assert.equal('int64', c.dtype)
    assert.same({0, 2, 2, 1}, c:totable())
    assert.same({0, 2, 2, 1, 0, 0}, x:bincount(nil, 6):totable())
    assert.same({0, 2, 2, 1, 0, 0}, x:bincount({minlength = 6}):totable())
    assert.same({0, 2, 2, 1}, x:bincount({minlength = 2}):totable())
    assert.same({0, 2, 2, 1}, lunet.bincount(x):totable())
    assert.same({0, 0, 0}, lunet.tensor({}, {dtype = 'int64'}):bincount({minlength = 3}):totable())
    assert.same({0}, lunet.tensor({}, {dtype = 'int64'}):bincount():size())
  end)

  it('with weights: their sums; float32 weights give float32, others float64 (as PyTorch)', function()
    local w = lunet.tensor{1, 2, 3, 4, 5}
    local s = x:bincount(w)
    assert.equal('float32', s.dtype)
    assert.same({0, 6, 5, 4}, s:totable())
    assert.same(s:totable(), x:bincount({weights = w}):totable())
    assert.same({0, 6, 5, 4, 0}, x:bincount(w, {minlength = 5}):totable())
    assert.same({0, 6, 5, 4, 0}, x:bincount(w, 5):totable())
    assert.equal('float64', x:bincount(w:double()).dtype)
    assert.equal('float64', x:bincount(w:long()).dtype)
    assert.equal('float64', x:bincount(w:gt(2)).dtype)
    assert.same({0, 1, 1, 1}, x:bincount(w:gt(2)):totable())
  end)

  it('a gradient flows to float weights: the output gradient at each weight\'s bin', function()
    local w = lunet.randn({5}, {dtype = 'float64', requires_grad = true})
    local ok, msg = gradcheck(function(a) return x:bincount(a, 6) end, {w})
    assert.is_true(ok, tostring(msg))
    local w32 = lunet.tensor({1, 1, 1, 1, 1}, {requires_grad = true})
    x:bincount(w32):mul(lunet.tensor{10, 20, 30, 40}):sum():backward()
    assert.same({20, 30, 30, 40, 20}, w32.grad:totable())
    assert.is_false(lunet.no_grad(function() return x:bincount(w32) end).requires_grad)
  end)
end)

describe('selections on a device without a kernel they use', function()
  it('name the method and the missing kernel (cuda: no scan, no sort yet)', function()
    if not lunet.cuda.is_available() then pending('no GPU: ' .. tostring(lunet.cuda.reason())) return end
    local x = lunet.tensor({1, 0, 2}, {device = 'cuda:0'})
    local e = err_of(function() return x:nonzero() end)
    assert.matches('nonzero: ', e, 1, true)
    assert.matches('no kernel', e, 1, true)
    e = err_of(function() return x:masked_select(x:gt(0)) end)
    assert.matches('masked_select: ', e, 1, true)
    e = err_of(function() return x:unique() end)
    assert.matches('unique: ', e, 1, true)
    assert.matches('no kernel', e, 1, true)
  end)
end)

describe('selections: errors', function()
  local x = lunet.tensor{{1, 0}, {2, 3}}
  local ints = lunet.tensor({1, 0, 2}, {dtype = 'int64'})

  it('name the function and the problem, at the caller\'s line', function()
    local e = err_of(function() return x:masked_select(lunet.tensor{1, 0}) end)
    assert.matches('masked_select: mask must be a bool %(or uint8%) tensor, got float32', e)
    assert.matches('tensor_select_spec.lua', e)
    e = err_of(function() return x:masked_select(lunet.tensor{true, false, true}) end)
    assert.matches("masked_select: the input's shape {2,2} and the mask's {3} cannot broadcast", e)
    assert.matches('tensor_select_spec.lua', e)
    e = err_of(function() return lunet.tensor({1, -2}, {dtype = 'int64'}):bincount() end)
    assert.matches('bincount: input must be non%-negative, got a value of %-2', e)
    assert.matches('tensor_select_spec.lua', e)
    e = err_of(function() return x:unique({sortd = true}) end)
    assert.matches("unique: unknown option 'sortd' %(did you mean 'sorted'%?%)", e)
    assert.matches('tensor_select_spec.lua', e)
  end)

  it('nonzero, argwhere', function()
    assert.matches('nonzero: input must be a tensor, got number', err_of(function() return lunet.nonzero(3) end))
    assert.matches('argwhere: .*tensor', err_of(function() return lunet.Tensor.argwhere({}) end))
    assert.matches("nonzero: unknown option 'astuple'", err_of(function() return x:nonzero({astuple = true}) end))
    assert.matches("nonzero: option 'as_tuple'", err_of(function() return x:nonzero({as_tuple = 1}) end))
    assert.matches('nonzero: options must be a table', err_of(function() return x:nonzero(true) end))
  end)

  it('masked_select', function()
    assert.matches('masked_select: mask must be a tensor, got nil', err_of(function() return x:masked_select() end))
    assert.matches('masked_select: mask must be a bool %(or uint8%) tensor, got int64',
      err_of(function() return x:masked_select(x:long()) end))
    assert.matches('masked_select: input must be a tensor', err_of(function() return lunet.masked_select(1, x:gt(0)) end))
    assert.matches("masked_select: the input's shape {3} and the mask's {2,2} cannot broadcast",
      err_of(function() return lunet.zeros(3):masked_select(x:gt(0)) end))
  end)

  it('unique, unique_consecutive', function()
    assert.matches("unique: unknown option 'return_index'", err_of(function() return x:unique({return_index = true}) end))
    assert.matches("unique_consecutive: unknown option 'sorted'",
      err_of(function() return x:unique_consecutive({sorted = true}) end))
    assert.matches("unique: option 'return_counts'", err_of(function() return x:unique({return_counts = 'yes'}) end))
    assert.matches('unique: options must be a table, got boolean', err_of(function() return x:unique(true) end))
    assert.matches('unique: expected one options table', err_of(function() return x:unique({}, {}) end))
    assert.matches('unique: dim 3 out of range for a 2%-d tensor', err_of(function() return x:unique({dim = 3}) end))
    assert.matches('unique: dim %-3 out of range', err_of(function() return x:unique({dim = -3}) end))
    assert.matches('unique: dim must be an integer, got 1.5', err_of(function() return x:unique({dim = 1.5}) end))
    assert.matches('unique: dim 1 out of range for a 0%-d tensor',
      err_of(function() return lunet.tensor(1):unique({dim = 1}) end))
    assert.matches('unique: dim 2 has size 0 and is not the one selected',
      err_of(function() return lunet.zeros(3, 0):unique({dim = 1}) end))
    assert.matches('unique_consecutive: input must be a tensor', err_of(function() return lunet.unique_consecutive('a') end))
  end)

  it('bincount', function()
    assert.matches('bincount: input must be 1%-d, got 2%-d', err_of(function() return x:long():bincount() end))
    assert.matches('bincount: input must be 1%-d, got 0%-d',
      err_of(function() return lunet.tensor(1, {dtype = 'int64'}):bincount() end))
    assert.matches('bincount: input must be an integer tensor %(int32, int64 or uint8%), got float32',
      err_of(function() return lunet.tensor{1, 2}:bincount() end))
    assert.matches('bincount: input must be an integer tensor .*got bool',
      err_of(function() return lunet.tensor{true, false}:bincount() end))
    assert.matches("bincount: weights must be 1%-d with the input's length 3, got shape {2}",
      err_of(function() return ints:bincount(lunet.tensor{1, 2}) end))
    assert.matches("bincount: weights must be 1%-d with the input's length 3, got shape {1,3}",
      err_of(function() return ints:bincount(lunet.tensor{{1, 2, 3}}) end))
    assert.matches('bincount: weights must be a tensor, got number', err_of(function() return ints:bincount(2) end))
    assert.matches('bincount: minlength must be a non%-negative integer, got %-1',
      err_of(function() return ints:bincount(nil, -1) end))
    assert.matches('bincount: minlength must be a non%-negative integer, got 1.5',
      err_of(function() return ints:bincount({minlength = 1.5}) end))
    assert.matches("bincount: unknown option 'min_length'", err_of(function() return ints:bincount({min_length = 2}) end))
    assert.matches('bincount: weights given twice',
      err_of(function() return ints:bincount(lunet.ones(3), {weights = lunet.ones(3)}) end))
    assert.matches('bincount: expected the options table last', err_of(function() return ints:bincount({}, 2) end))
    assert.matches('bincount: input must be a tensor', err_of(function() return lunet.bincount({1, 2}) end))
  end)
end)
