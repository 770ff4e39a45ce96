-- F.interpolate in all of PyTorch 1.13's modes ('nearest', 'nearest-exact',
-- 'area' on 3-, 4- and 5-d input; 'linear', 'bilinear', 'bicubic',
-- 'trilinear'), by size and scale_factor, both align_corners, antialias, and nn.Upsample,
-- nn.UpsamplingNearest2d, against spec/fixtures/interp_more.safetensors
-- (tools/gen_interp_more_fixtures.py): outputs and input gradients in float32
-- to 1e-5 and float64 to 1e-10; finite differences; the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local fx, cases = fixtures.load_fixture('interp_more')
local function get(case, k) return fx[case.name .. '.' .. k] end

-- how: nil (F.interpolate), 'upsample' (nn.Upsample), 'noncontig' (the input's
-- last two dims transposed in memory)
local function check_case(case, dtype, tol, how)
  local x = get(case, 'x'):detach():to(dtype)
  local nd = x:dim()
  if how == 'noncontig' then
    x = x:transpose(nd - 1, nd):contiguous():transpose(nd - 1, nd)
    assert.is_false(x:is_contiguous())
  end
  x.requires_grad = true
  local out = how == 'upsample' and nn.Upsample(case.opts)(x) or F.interpolate(x, case.opts)
  assert.equal(dtype, out.dtype)
  assert.same(get(case, 'out'):size(), out:size())
  assert.tensor_near(out, get(case, 'out'), tol)
  out:backward(get(case, 'dout'):to(dtype))
  assert.tensor_near(x.grad, get(case, 'dx'), tol)
end

describe('interpolate, all modes and dims, vs PyTorch fixtures', function()
  local n = 0
  for _, case in ipairs(cases) do
    if case.op == 'interpolate' then
      n = n + 1
      it(case.name .. ' float32', function() check_case(case, 'float32', 1e-5) end)
      it(case.name .. ' float64', function() check_case(case, 'float64', 1e-10) end)
      it(case.name .. ' non-contiguous, nn.Upsample', function()
        check_case(case, 'float64', 1e-10, 'noncontig')
        if not case.opts.antialias then check_case(case, 'float64', 1e-10, 'upsample') end   -- (no antialias in nn.Upsample)
      end)
    end
  end
  it('has every mode x dims x geometry', function() assert.is_true(n >= 100) end)
end)

describe('interpolate gradients against finite differences (float64)', function()
  lunet.manual_seed(3)
  local function check(opts, ...)
    local x = lunet.randn(...):to('float64'):requires_grad_()
    local ok, msg = gradcheck(function(t) return F.interpolate(t, opts) end, { x })
    assert(ok, msg)
  end
  it('bicubic up and down, both align_corners', function()
    check({ scale_factor = { 1.6, 0.7 }, mode = 'bicubic' }, 1, 2, 4, 5)
    check({ size = { 5, 3 }, mode = 'bicubic', align_corners = true }, 1, 1, 3, 4)
  end)
  it('antialias bilinear and bicubic, down and up', function()
    check({ size = { 2, 3 }, mode = 'bilinear', antialias = true }, 1, 2, 5, 7)
    check({ scale_factor = { 0.4, 1.5 }, mode = 'bicubic', antialias = true, align_corners = true }, 1, 1, 6, 3)
  end)
  it('linear, trilinear, area and nearest-exact', function()
    check({ scale_factor = 1.5, mode = 'linear' }, 2, 2, 4)
    check({ size = { 2, 3, 5 }, mode = 'trilinear', align_corners = true }, 1, 1, 3, 2, 4)
    check({ size = { 2, 3 }, mode = 'area' }, 1, 2, 5, 4)
    check({ scale_factor = 1.7, mode = 'nearest-exact' }, 1, 1, 2, 3, 3)
  end)
end)

describe('interpolate and nn.Upsample: modules and errors', function()
  local err = fixtures.err_of
  it('nn.UpsamplingNearest2d is nn.Upsample with mode nearest on 4-d input', function()
    local x = lunet.randn(1, 2, 3, 4)
    local m = nn.UpsamplingNearest2d{ scale_factor = { 2, 1.5 } }
    assert.tensor_near(m(x), F.interpolate(x, { scale_factor = { 2, 1.5 } }), 0)
    assert.equal('nn.UpsamplingNearest2d(scale_factor {2, 1.5}, nearest)\n0 parameters', tostring(m))
    assert.matches('nn.UpsamplingNearest2d: input must be 4-d', err(m, lunet.randn(1, 2, 3)), 1, true)
    assert.matches("unknown option 'mode'", err(nn.UpsamplingNearest2d, { size = 2, mode = 'bilinear' }), 1, true)
    assert.equal('nn.Upsample(size {2, 3, 4}, trilinear, align_corners)',
      nn.Upsample{ size = { 2, 3, 4 }, mode = 'trilinear', align_corners = true }:repr())
  end)
  it('names the wrong dims for a mode, unknown modes, size and scale_factor together, antialias', function()
    local x3, x4 = lunet.zeros(1, 1, 4), lunet.zeros(1, 1, 2, 2)
    assert.matches("interpolate: mode 'bicubic' needs 4-d input, got 3-d",
      err(F.interpolate, x3, { scale_factor = 2, mode = 'bicubic' }), 1, true)
    assert.matches("interpolate: mode 'linear' needs 3-d input, got 4-d",
      err(F.interpolate, x4, { scale_factor = 2, mode = 'linear' }), 1, true)
    assert.matches("nn.Upsample: mode 'trilinear' needs 5-d input, got 4-d",
      err(nn.Upsample{ scale_factor = 2, mode = 'trilinear' }, x4), 1, true)
    assert.matches('interpolate: input must be 3-d, 4-d or 5-d (N, C, ...), got 2-d',
      err(F.interpolate, lunet.zeros(2, 2), { scale_factor = 2 }), 1, true)
    assert.matches("mode must be 'nearest', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area' or 'nearest-exact', got 'cubic'",
      err(F.interpolate, x4, { scale_factor = 2, mode = 'cubic' }), 1, true)
    assert.matches('give either size or scale_factor', err(F.interpolate, x3, { size = 3, scale_factor = 2 }), 1, true)
    assert.matches("align_corners is for the modes linear, bilinear, bicubic and trilinear, not 'area'",
      err(F.interpolate, x4, { size = 1, mode = 'area', align_corners = true }), 1, true)
    assert.matches("interpolate: antialias is for the modes bilinear and bicubic, not 'nearest'",
      err(F.interpolate, x4, { size = 1, antialias = true }), 1, true)
    assert.matches('interpolate: size must be a number or 1 values for 3-d input, got 2 values',
      err(F.interpolate, x3, { size = { 2, 3 } }), 1, true)
    assert.matches('scale_factor must be a number or a table of 1 to 3 numbers, got 4 values',
      err(F.interpolate, x3, { scale_factor = { 1, 2, 3, 4 } }), 1, true)
    assert.matches("unknown option 'sizes'", err(F.interpolate, x3, { sizes = 2 }), 1, true)
    assert.matches("nn.Upsample: unknown option 'antialias'",
      err(nn.Upsample, { size = 2, mode = 'bilinear', antialias = true }), 1, true)
    assert.matches("mode 'area' needs a floating-point input, got int64",
      err(F.interpolate, lunet.zeros(1, 1, 4, { dtype = 'int64' }), { size = 2, mode = 'area' }), 1, true)
  end)
  it('handles empty batches and keeps integer input in nearest modes', function()
    local y = F.interpolate(lunet.zeros(0, 2, 3, 3), { size = { 4, 5 }, mode = 'bicubic' })
    assert.same({ 0, 2, 4, 5 }, y:size())
    local xi = lunet.tensor({ { { 1, 2, 3 } } }, { dtype = 'int64' })
    assert.same({ { { 1, 1, 2, 3, 3 } } }, F.interpolate(xi, { size = 5, mode = 'nearest-exact' }):totable())
  end)
end)
