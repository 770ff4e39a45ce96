-- The activations nn.Hardtanh, SELU, CELU, LogSigmoid, Softsign, Tanhshrink,
-- Threshold, GLU, Softmin, Hardshrink, Softshrink against PyTorch 1.13
-- (spec/fixtures/nn_more_acts.safetensors, written by
-- tools/gen_nn_more_acts_fixtures.py): outputs and input gradients, float32
-- to 1e-5 and float64 to 1e-9, at and around the kinks and at large
-- magnitudes, through nn.functional and through the modules, in place where
-- PyTorch has it; then finite differences away from the kinks, the in-place
-- forms, and the options and inputs they refuse.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local fx, cases = fixtures.load_fixture('nn_more_acts')

local function get(case, k) return fx[case.name .. '.' .. k] end

local modules = {
  hardtanh = 'Hardtanh', selu = 'SELU', celu = 'CELU', logsigmoid = 'LogSigmoid', softsign = 'Softsign',
  tanhshrink = 'Tanhshrink', threshold = 'Threshold', glu = 'GLU', softmin = 'Softmin', hardshrink = 'Hardshrink',
  softshrink = 'Softshrink',
}
local NO_ARGS = { logsigmoid = true, softsign = true, tanhshrink = true }

-- the case through nn.functional (its options as a table) or its module
local function run(case, x, how)
  local o, op = case.opts, case.op
  if how == 'module' then
    if NO_ARGS[op] then return nn[modules[op]]()(x) end
    return nn[modules[op]](o)(x)
  end
  if NO_ARGS[op] then return F[op](x) end
  return F[op](x, o)
end

local function check_case(case, dtype, tol, how)
  local x = get(case, 'x'):detach():to(dtype)
  if how == 'noncontig' and x:dim() >= 2 then
    local d = x:dim()
    x = x:transpose(d - 1, d):contiguous():transpose(d - 1, d)
    assert.is_false(x:is_contiguous())
  end
  x.requires_grad = true
  local input = x
  -- in place, as the fixture: on x * 1, which it overwrites and returns
  if case.opts.inplace then input = x * 1 end
  local out = run(case, input, how)
  if case.opts.inplace then assert.is_true(rawequal(out, input)) end
  assert.tensor_near(out, get(case, 'out'), tol)
  out:backward(get(case, 'dout'):to(dtype))
  assert.is_not_nil(x.grad, case.name .. ': no gradient')
  assert.tensor_near(x.grad, get(case, 'dx'), tol)
end

describe('more activations vs PyTorch 1.13 fixtures', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 34) end)
  for _, case in ipairs(cases) do
    -- (nn.Hardtanh, as PyTorch's, wants max_val > min_val; F.hardtanh takes them equal)
    local o = case.opts
    local module_ok = not (case.op == 'hardtanh' and o.min_val ~= nil and o.min_val == o.max_val)
    it(case.name .. ' float32', function() check_case(case, 'float32', 1e-5) end)
    it(case.name .. ' float64', function() check_case(case, 'float64', 1e-9) end)
    it(case.name .. ' non-contiguous', function() check_case(case, 'float32', 1e-5, 'noncontig') end)
    if module_ok then
      it(case.name .. ' as nn.' .. modules[case.op], function() check_case(case, 'float64', 1e-9, 'module') end)
    end
  end
end)

describe('more activations: the rest', function()
  local function errs(pat, f, ...)
    local ok, e = pcall(f, ...)
    assert.is_false(ok)
    assert.matches(pat, tostring(e), 1, true)
  end

  -- float64 values at least 0.2 from every kink the options below have
  local function away()
    local x = lunet.tensor({ { -3.7, -2.6, -1.7, -1.2, -0.75, -0.3 }, { 0.2, 0.8, 1.25, 1.8, 2.6, 3.4 } },
      { dtype = 'float64' })
    x.requires_grad = true
    return x
  end

  it('gradients match finite differences away from the kinks', function()
    local fns = {
      function(x) return F.hardtanh(x) end, function(x) return F.hardtanh(x, -2, 3) end,
      function(x) return F.selu(x) end, function(x) return F.celu(x, 0.7) end,
      function(x) return F.logsigmoid(x * 10) end, function(x) return F.softsign(x) end,
      function(x) return F.tanhshrink(x) end, function(x) return F.threshold(x, 0.5, -2) end,
      function(x) return F.glu(x, 2) end, function(x) return F.glu(x, 1) end,
      function(x) return F.softmin(x, 1) end, function(x) return F.softmin(x * 3) end,
      function(x) return F.hardshrink(x) end, function(x) return F.softshrink(x, 1) end,
      -- in place on a tensor with a history
      function(x) return F.hardtanh(x * 1, -2, 3, true) end, function(x) return F.selu_(x * 1) end,
      function(x) return F.celu(x * 1, { alpha = 2, inplace = true }) end,
      function(x) return F.threshold_(x * 1, 0.5, -2) end,
    }
    for i, f in ipairs(fns) do
      local ok, msg = gradcheck(f, { away() })
      assert(ok, ('function %d: %s'):format(i, tostring(msg)))
    end
  end)

  it('in place: the input overwritten with the out-of-place result, and returned', function()
    local forms = {
      { function(x) return F.hardtanh(x, -0.5, 0.5) end, function(x) return F.hardtanh(x, -0.5, 0.5, true) end },
      { function(x) return F.hardtanh(x) end, function(x) return F.hardtanh_(x) end },
      { function(x) return F.selu(x) end, function(x) return F.selu(x, { inplace = true }) end },
      { function(x) return F.celu(x, 1.5) end, function(x) return F.celu_(x, 1.5) end },
      { function(x) return F.threshold(x, 0.1, 20) end, function(x) return F.threshold(x, 0.1, 20, true) end },
      { function(x) return nn.Hardtanh(-1, 2)(x) end, function(x) return nn.Hardtanh(-1, 2, true)(x) end },
      { function(x) return nn.SELU()(x) end, function(x) return nn.SELU(true)(x) end },
      { function(x) return nn.CELU(0.5)(x) end, function(x) return nn.CELU{ alpha = 0.5, inplace = true }(x) end },
      { function(x) return nn.Threshold(0, -1)(x) end, function(x) return nn.Threshold(0, -1, true)(x) end },
    }
    for _, dtype in ipairs({ 'float32', 'float64' }) do
      for i, p in ipairs(forms) do
        local x = lunet.randn(3, 5, { dtype = dtype }) * 2
        local want = p[1](x)
        local y = x:clone()
        local r = p[2](y)
        assert.is_true(rawequal(r, y), 'form ' .. i)
        assert.tensor_near(y, want, 0)
        -- a transposed view: written through to its base
        local base = x:clone()
        p[2](base:t())
        assert.tensor_near(base, want, 0)
      end
    end
  end)

  it('in place under autograd: a leaf that requires grad is refused, unless under no_grad', function()
    local x = lunet.randn(2, 3, { dtype = 'float64' })
    x.requires_grad = true
    errs('hardtanh: a leaf tensor that requires grad cannot be changed in place', F.hardtanh, x, -1, 1, true)
    errs('selu_: a leaf tensor', F.selu_, x)
    errs('a leaf tensor', nn.CELU(1, true), x)
    errs('threshold_: a leaf tensor', F.threshold_, x, 0, 0)
    local before = x:detach():clone()
    lunet.no_grad(function() F.threshold_(x, 0, 0) end)
    assert.tensor_near(x:detach(), before:clamp(0), 0)
    -- on a non-leaf the history moves to it: the gradient is the out-of-place one
    local a = lunet.tensor({ -2, -0.25, 0.25, 3 }, { dtype = 'float64' })
    a.requires_grad = true
    local y = a * 2
    F.hardtanh_(y)
    assert.is_not_nil(y.grad_fn)
    y:sum():backward()
    assert.tensor_near(a.grad, { 0, 2, 2, 0 }, 0)
  end)

  it('stays finite at large magnitudes', function()
    local x = lunet.tensor({ -1000, -80, 80, 1000 }, { dtype = 'float64' })
    x.requires_grad = true
    local y = F.logsigmoid(x)
    assert.tensor_near(y, { -1000, -80, -1.8048513878454153e-35, 0 }, 1e-12)
    y:sum():backward()
    assert.tensor_near(x.grad, { 1, 1, 1.8048513878454153e-35, 0 }, 1e-12)
    local f = lunet.tensor({ -1000, -80, 80, 1000 })
    assert.tensor_near(F.logsigmoid(f), { -1000, -80, 0, 0 }, 1e-6)
    assert.tensor_near(F.selu(f), { -1.7580993408473766, -1.7580993408473766, 84.05607899, 1050.7009873554805 }, 1e-6)
    assert.tensor_near(F.softmin(f), { 1, 0, 0, 0 }, 0)
    assert.tensor_near(F.softsign(lunet.tensor({ 1e30, -1e30 })), { 1, -1 }, 1e-7)
  end)

  it('a NaN stays NaN', function()
    local x = lunet.tensor({ 0 / 0, 1 })
    -- (PyTorch 1.13's softshrink gives 0 for NaN; later versions, and lunet, NaN)
    for _, f in ipairs({ F.hardtanh, F.selu, F.celu, F.logsigmoid, F.softsign, F.tanhshrink, F.hardshrink,
      F.softshrink, function(t) return F.threshold(t, 0, 5) end, function(t) return F.hardtanh(t, -2, 3, true) end }) do
      local v = f(x:clone()):totable()[1]
      assert.is_true(v ~= v)
    end
  end)

  it('GLU halves dim (1-based, default -1); an odd size or a 0-d input is refused', function()
    local x = lunet.randn(2, 4, 6)
    assert.same({ 2, 4, 3 }, nn.GLU()(x):size())
    assert.same({ 2, 2, 6 }, nn.GLU(2)(x):size())
    assert.same({ 1, 4, 6 }, F.glu(x, { dim = 1 }):size())
    assert.tensor_near(F.glu(x, 2), x:narrow(2, 1, 2) * x:narrow(2, 3, 2):sigmoid(), 1e-7)
    errs('glu: dim 2 has odd size 5', nn.GLU(2), lunet.randn(3, 5))
    errs('glu: dim 2 has odd size 5', F.glu, lunet.randn(3, 5))
    errs('glu: dim 3 out of range for a 2-d tensor', F.glu, lunet.randn(3, 4), 3)
    errs('glu: a 0-d input', F.glu, lunet.tensor(1.5))
    errs("option 'dim' must be a number", nn.GLU, true)
    errs("unknown option 'dimm' (did you mean 'dim'?)", F.glu, x, { dimm = 1 })
  end)

  it('Softmin is softmax of the negation along dim', function()
    local x = lunet.randn(3, 4)
    assert.tensor_near(nn.Softmin(1)(x), F.softmax(-x, 1), 1e-7)
    assert.tensor_near(nn.Softmin()(x), F.softmax(-x, 2), 1e-7)
    errs('softmin: dim 3 out of range', F.softmin, x, 3)
  end)

  it('takes its options by position or in a table, refuses bad ones, and prints as the neighbours', function()
    local ht = nn.Hardtanh(-2, 3)
    assert.equals(-2, ht.min_val); assert.equals(3, ht.max_val); assert.is_false(ht.inplace)
    assert.equals(0.25, nn.Hardshrink{ lambd = 0.25 }.lambd)
    assert.equals(2, nn.Softshrink(2).lambd)
    assert.equals(0.5, nn.CELU{ alpha = 0.5 }.alpha)
    assert.equals('nn.Hardtanh(min_val -1, max_val 1)\n0 parameters', tostring(nn.Hardtanh()))
    assert.equals('nn.Hardtanh(min_val 0, max_val 6, inplace)\n0 parameters', tostring(nn.Hardtanh(0, 6, true)))
    assert.equals('nn.SELU\n0 parameters', tostring(nn.SELU()))
    assert.equals('nn.SELU(inplace)\n0 parameters', tostring(nn.SELU(true)))
    assert.equals('nn.CELU(alpha 1)\n0 parameters', tostring(nn.CELU()))
    assert.equals('nn.CELU(alpha 0.5, inplace)\n0 parameters', tostring(nn.CELU(0.5, true)))
    assert.equals('nn.Threshold(threshold 0.1, value 20)\n0 parameters', tostring(nn.Threshold(0.1, 20)))
    assert.equals('nn.GLU(dim -1)\n0 parameters', tostring(nn.GLU()))
    assert.equals('nn.Softmin(dim 2)\n0 parameters', tostring(nn.Softmin(2)))
    assert.equals('nn.Hardshrink(lambd 0.5)\n0 parameters', tostring(nn.Hardshrink()))
    assert.equals('nn.Softshrink(lambd 0.5)\n0 parameters', tostring(nn.Softshrink()))
    for _, n in ipairs({ 'LogSigmoid', 'Softsign', 'Tanhshrink' }) do
      assert.equals('nn.' .. n .. '\n0 parameters', tostring(nn[n]()))
      errs('nn.' .. n .. ': takes no arguments', nn[n], { inplace = true })
    end
    -- bad types, unknown keys
    errs("nn.Hardtanh: option 'min_val' must be a number, got string", nn.Hardtanh, 'a')
    errs("nn.Hardtanh: unknown option 'min' (did you mean 'min_val'?)", nn.Hardtanh, { min = 0 })
    errs("nn.SELU: option 'inplace' must be a boolean, got number", nn.SELU, 1)
    errs("nn.CELU: option 'alpha' must be a number, got boolean", nn.CELU, true)
    errs("nn.Threshold: unknown option 'val'", nn.Threshold, { threshold = 0, val = 1 })
    errs("nn.Softshrink: unknown option 'lamda'", nn.Softshrink, { lamda = 1 })
    errs("nn.Hardshrink: option 'lambd' must be a number, got string", nn.Hardshrink, '0.5')
    errs("nn.Softmin: option 'dim' must be a number", nn.Softmin, 'x')
    errs("hardtanh: unknown option 'inplce'", F.hardtanh, lunet.randn(2), { inplce = true })
    errs("softshrink: option 'lambd' must be a number, got string", F.softshrink, lunet.randn(2), 'a')
    errs("celu: option 'inplace' must be a boolean", F.celu, lunet.randn(2), 1, 'yes')
    errs('hardshrink: too many arguments', F.hardshrink, lunet.randn(2), 0.5, 1)
    -- bad values
    errs('nn.Hardtanh: max_val (-1) must be greater than min_val (1)', nn.Hardtanh, 1, -1)
    errs('hardtanh: min_val (2) must be <= max_val (1)', F.hardtanh, lunet.randn(2), 2)
    errs('nn.CELU: alpha cannot be 0', nn.CELU, 0)
    errs('celu: alpha cannot be 0', F.celu, lunet.randn(2), 0)
    errs('nn.Softshrink: lambd must be >= 0, got -1', nn.Softshrink, -1)
    errs('softshrink: lambd must be >= 0, got -0.5', F.softshrink, lunet.randn(2), -0.5)
    errs('nn.Threshold: threshold and value must be numbers, got number and nil', nn.Threshold, 0.5)
    errs('threshold: threshold and value must be numbers, got nil and nil', F.threshold, lunet.randn(2))
    -- bad inputs
    local ints = lunet.tensor({ 1, 2 }, { dtype = 'int64' })
    for op in pairs(modules) do
      errs(op .. ': input must be a floating-point tensor, got int64', F[op], ints, op == 'threshold' and 0 or nil,
        op == 'threshold' and 0 or nil)
      errs(op .. ': input must be a tensor, got number', F[op], 3, op == 'threshold' and 0 or nil,
        op == 'threshold' and 0 or nil)
    end
  end)

  it('inputs that need no gradient give outputs that have none; a Sequential trains through them', function()
    local x = lunet.randn(8, 4)
    assert.is_false(F.hardtanh(x).requires_grad)
    assert.is_false(F.glu(x).requires_grad)
    lunet.manual_seed(3)
    local model = nn.Sequential(nn.Linear(4, 8), nn.SELU(), nn.Linear(8, 8), nn.CELU(0.5), nn.Linear(8, 8),
      nn.Softsign(), nn.Linear(8, 8), nn.Tanhshrink(), nn.Linear(8, 8), nn.Hardtanh(-2, 2), nn.Linear(8, 8),
      nn.Softshrink(0.1), nn.Linear(8, 8), nn.Hardshrink(0.01), nn.Linear(8, 8), nn.Threshold(-1, -1),
      nn.Linear(8, 8), nn.GLU(), nn.Linear(4, 2), nn.LogSigmoid(), nn.Softmin())
    local y = (x:sum(2, true):gt(0)):to('float32')
    local opt = lunet.optim.SGD(model:parameters(), { lr = 0.2 })
    local first, last
    for _ = 1, 40 do
      opt:zero_grad()
      local d = model(x):narrow(2, 1, 1) - y
      local loss = (d * d):mean()
      loss:backward()
      opt:step()
      first = first or loss:item()
      last = loss:item()
    end
    assert.is_true(last < first)
  end)
end)
