-- F.interpolate(mode = 'bilinear'), nn.Upsample and nn.UpsamplingBilinear2d
-- against PyTorch 1.13 (spec/fixtures/nn_interp.safetensors, written by
-- tools/gen_nn_interp_fixtures.py): outputs and input gradients in float32
-- to 1e-5 and float64 to 1e-9, through the modules too; finite differences;
-- the errors; tostring of the modules.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local fx, cases = fixtures.load_fixture('nn_interp')

local function get(case, k) return fx[case.name .. '.' .. k] end

local function fopts(o)
  return { size = o.size, scale_factor = o.scale_factor, mode = 'bilinear', align_corners = o.align_corners,
    recompute_scale_factor = o.recompute_scale_factor }
end

-- mode nil: F.interpolate; 'upsample': nn.Upsample; 'ub': nn.UpsamplingBilinear2d
-- (align_corners cases only); 'noncontig': the input transposed in memory
local function check_case(case, dtype, tol, mode)
  local x = get(case, 'x'):detach():to(dtype)
  if mode == 'noncontig' then
    x = x:transpose(3, 4):contiguous():transpose(3, 4)
    if x:size(3) > 1 and x:size(4) > 1 then assert.is_false(x:is_contiguous()) end
  end
  x.requires_grad = true
  local out
  if mode == 'upsample' then out = nn.Upsample(fopts(case.opts))(x)
  elseif mode == 'ub' then
    out = nn.UpsamplingBilinear2d({ size = case.opts.size, scale_factor = case.opts.scale_factor })(x)
  else out = F.interpolate(x, fopts(case.opts)) end
  assert.equal(dtype, out.dtype)
  assert.same(get(case, 'out'):size(), out:size())
  assert.tensor_near(out, get(case, 'out'), tol)
  out:backward(get(case, 'dout'):to(dtype))
  assert.is_not_nil(x.grad, case.name .. ': no gradient')
  assert.tensor_near(x.grad, get(case, 'dx'), tol)
end

describe('bilinear interpolate vs PyTorch fixtures', function()
  it('has the fixture cases: both align_corners, up and down, output and input size 1', function()
    assert.is_true(#cases >= 20)
    local seen = {}
    for _, c in ipairs(cases) do seen[c.name] = true end
    for _, n in ipairs({ 'up2_f', 'up2_t', 'down_size_f', 'sf_nonint_t', 'out1_f', 'in1_t', 'recompute_f' }) do
      assert.is_true(seen[n], n)
    end
  end)
  for _, case in ipairs(cases) do
    it(case.name .. ' float32', function() check_case(case, 'float32', 1e-5) end)
    it(case.name .. ' float64', function() check_case(case, 'float64', 1e-9) end)
    it(case.name .. ' non-contiguous input', function() check_case(case, 'float64', 1e-9, 'noncontig') end)
    it(case.name .. ' as nn.Upsample', function() check_case(case, 'float64', 1e-9, 'upsample') end)
    if case.opts.align_corners and not case.opts.recompute_scale_factor then
      it(case.name .. ' as nn.UpsamplingBilinear2d', function() check_case(case, 'float64', 1e-9, 'ub') end)
    end
  end

  it('keeps the corners with align_corners = true, and blends to the edges without', function()
    local x = lunet.tensor({ { 1, 2 }, { 3, 4 } }):view(1, 1, 2, 2)
    local y = F.interpolate(x, { size = 3, mode = 'bilinear', align_corners = true })
    assert.tensor_near(y:view(3, 3), { { 1, 1.5, 2 }, { 2, 2.5, 3 }, { 3, 3.5, 4 } }, 1e-6)
    y = F.interpolate(x, { scale_factor = 2, mode = 'bilinear' })
    assert.tensor_near(y:view(4, 4):select(1, 1), { 1, 1.25, 1.75, 2 }, 1e-6)
  end)

  it('returns a new tensor when the size does not change; nearest is unchanged by the new options', function()
    local x = lunet.randn(1, 2, 3, 4)
    local y = F.interpolate(x, { size = { 3, 4 }, mode = 'bilinear' })
    assert.tensor_near(y, x, 0)
    y:fill_(0)
    assert.is_true(x:abs():sum():item() > 0)
    local n = F.interpolate(x, { scale_factor = 2 })
    assert.same({ 1, 2, 6, 8 }, n:size())
    assert.tensor_near(n, nn.Upsample{ scale_factor = 2, mode = 'nearest' }(x), 0)
  end)
end)

describe('bilinear interpolate gradients against finite differences (float64)', function()
  local function leaf(...) return lunet.randn(...):to('float64'):requires_grad_() end
  local function check(opts, x)
    local ok, msg = gradcheck(function(t) return F.interpolate(t, opts) end, { x })
    assert(ok, msg)
  end
  lunet.manual_seed(5)

  it('upsampling by non-integer factors, align_corners false', function()
    check({ scale_factor = { 1.7, 2.3 }, mode = 'bilinear' }, leaf(2, 2, 3, 4))
  end)
  it('downsampling to a size, align_corners true; output size 1', function()
    check({ size = { 2, 3 }, mode = 'bilinear', align_corners = true }, leaf(1, 3, 5, 7))
    check({ size = { 1, 2 }, mode = 'bilinear', align_corners = true }, leaf(1, 2, 3, 4))
  end)
end)

describe('interpolate and the upsampling modules: errors', function()
  local x = lunet.zeros(1, 1, 2, 2)
  local function err(f, ...)
    local ok, e = pcall(f, ...)
    assert.is_false(ok)
    return tostring(e)
  end

  it('names the function and the problem, at the caller\'s line', function()
    local e = err(function() return F.interpolate(x, { scale_factor = 2, mode = 'cubic' }) end)
    assert.matches("interpolate: mode must be 'nearest', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area' or 'nearest-exact', got 'cubic'", e, 1, true)
    assert.matches('nn_interp_spec.lua', e, 1, true)
    e = err(function() local m = nn.Upsample{ scale_factor = 2, align_corners = false }; return m end)
    assert.matches("nn.Upsample: align_corners is for the modes linear, bilinear, bicubic and trilinear, not 'nearest'", e, 1, true)
    assert.matches('nn_interp_spec.lua', e, 1, true)
    e = err(function() return nn.Upsample{ scale_factor = 2, mode = 'bilinear' }(lunet.zeros(2, 2, 2)) end)
    assert.matches("nn.Upsample: mode 'bilinear' needs 4-d input, got 3-d", e, 1, true)
    assert.matches('nn_interp_spec.lua', e, 1, true)
  end)

  it('size and scale_factor: one of them, valid; recompute_scale_factor only with scale_factor', function()
    local both = { size = 3, scale_factor = 2, mode = 'bilinear' }
    assert.matches('give either size or scale_factor', err(F.interpolate, x, both))
    assert.matches('give either size or scale_factor', err(F.interpolate, x, { mode = 'bilinear' }))
    assert.matches('give either size or scale_factor', err(nn.UpsamplingBilinear2d, {}))
    assert.matches('give either size or scale_factor', err(nn.UpsamplingBilinear2d, { size = 3, scale_factor = 2 }))
    assert.matches('recompute_scale_factor is for scale_factor, not an explicit size',
      err(F.interpolate, x, { size = 3, mode = 'bilinear', recompute_scale_factor = true }))
    assert.matches('size must be integers >= 1', err(F.interpolate, x, { size = 0, mode = 'bilinear' }))
    assert.matches('scale_factor 0.1 gives an empty output',
      err(F.interpolate, x, { scale_factor = 0.1, mode = 'bilinear' }))
  end)

  it('align_corners with nearest (even false), other modes, wrong types, non-4-d and integer input', function()
    assert.matches("interpolate: align_corners is for the modes linear, bilinear, bicubic and trilinear, not 'nearest'",
      err(F.interpolate, x, { scale_factor = 2, align_corners = false }))
    assert.matches("mode 'linear' needs 3-d input, got 4-d",
      err(F.interpolate, x, { scale_factor = 2, mode = 'linear' }), 1, true)
    assert.matches('align_corners', err(F.interpolate, x, { scale_factor = 2, mode = 'bilinear', align_corners = 1 }))
    assert.matches("unknown option 'mode'", err(nn.UpsamplingBilinear2d, { scale_factor = 2, mode = 'nearest' }))
    assert.matches('nn.UpsamplingBilinear2d: expected {size = {H, W}} or {scale_factor = s}',
      err(nn.UpsamplingBilinear2d, 2), 1, true)
    assert.matches("interpolate: mode 'bilinear' needs 4-d input, got 3-d",
      err(F.interpolate, lunet.zeros(1, 2, 2), { scale_factor = 2, mode = 'bilinear' }), 1, true)
    assert.matches("mode 'bilinear' needs a floating-point input, got int64",
      err(F.interpolate, lunet.zeros(1, 1, 2, 2, { dtype = 'int64' }), { scale_factor = 2, mode = 'bilinear' }), 1, true)
  end)
end)

describe('nn.Upsample and nn.UpsamplingBilinear2d', function()
  it('print their geometry, mode and align_corners', function()
    assert.equal('nn.Upsample(scale_factor 2, nearest)', nn.Upsample{ scale_factor = 2 }:repr())
    assert.equal('nn.Upsample(size {3, 4}, bilinear)', nn.Upsample{ size = { 3, 4 }, mode = 'bilinear' }:repr())
    assert.equal('nn.Upsample(scale_factor {1.5, 2}, bilinear, align_corners)',
      nn.Upsample{ scale_factor = { 1.5, 2 }, mode = 'bilinear', align_corners = true }:repr())
    assert.equal('nn.UpsamplingBilinear2d(scale_factor 2, bilinear, align_corners)\n0 parameters',
      tostring(nn.UpsamplingBilinear2d{ scale_factor = 2 }))
    local m = nn.UpsamplingBilinear2d{ size = { 5, 6 } }
    assert.equal('bilinear', m.mode)
    assert.is_true(m.align_corners)
  end)

  it('runs inside nn.Sequential and passes gradients to the layers before it', function()
    lunet.manual_seed(2)
    local net = nn.Sequential(nn.Conv2d(1, 2, 3, { padding = 1 }), nn.UpsamplingBilinear2d{ scale_factor = 2 })
    local y = net(lunet.randn(2, 1, 3, 3))
    assert.same({ 2, 2, 6, 6 }, y:size())
    y:sum():backward()
    assert.is_not_nil(net:get(1).weight.grad)
  end)
end)
