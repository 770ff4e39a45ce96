-- F.grid_sample (every mode x padding_mode x align_corners, 4-d and 5-d input,
-- grids partly outside [-1, 1]) and F.affine_grid (4-d and 5-d sizes) against
-- PyTorch 1.13 (spec/fixtures/interp_more.safetensors, written by
-- tools/gen_interp_more_fixtures.py): outputs, gradients for input and grid
-- (theta) in float32 to 1e-5 and float64 to 1e-10; finite differences; errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local F = lunet.nn.functional

local fx, cases = fixtures.load_fixture('interp_more')
local function get(case, k) return fx[case.name .. '.' .. k] end
local function leaf(t, dtype) return t:detach():to(dtype):clone():requires_grad_() end

-- a missing gradient (no path to it, as grid in mode 'nearest') counts as zeros
local function near_grad(g, want, tol)
  if g == nil then assert.equal(0, want:abs():max():item()) else assert.tensor_near(g, want, tol) end
end

local function check_case(case, dtype, tol, noncontig)
  local o = case.opts
  if case.op == 'affine_grid' then
    local theta = leaf(get(case, 'theta'), dtype)
    local out = F.affine_grid(theta, o.size, { align_corners = o.align_corners })
    assert.equal(dtype, out.dtype)
    assert.tensor_near(out, get(case, 'out'), tol)
    out:backward(get(case, 'dout'):to(dtype))
    assert.tensor_near(theta.grad, get(case, 'dtheta'), tol)
    return
  end
  local x, grid = leaf(get(case, 'x'), dtype), leaf(get(case, 'grid'), dtype)
  local xin, gin = x, grid
  if noncontig then   -- (the same values through transposed memory)
    xin = x:transpose(1, 2):contiguous():transpose(1, 2)
    gin = grid:transpose(2, 3):contiguous():transpose(2, 3)
  end
  local out = F.grid_sample(xin, gin, o)
  assert.equal(dtype, out.dtype)
  assert.same(get(case, 'out'):size(), out:size())
  assert.tensor_near(out, get(case, 'out'), tol)
  out:backward(get(case, 'dout'):to(dtype))
  near_grad(x.grad, get(case, 'dx'), tol)
  near_grad(grid.grad, get(case, 'dgrid'), tol)
end

describe('grid_sample and affine_grid vs PyTorch fixtures', function()
  local n = 0
  for _, case in ipairs(cases) do
    if case.op == 'grid_sample' or case.op == 'affine_grid' then
      n = n + 1
      it(case.name .. ' float32', function() check_case(case, 'float32', 1e-5) end)
      it(case.name .. ' float64', function() check_case(case, 'float64', 1e-10) end)
      if case.op == 'grid_sample' then
        it(case.name .. ' non-contiguous', function() check_case(case, 'float64', 1e-10, true) end)
      end
    end
  end
  it('has every mode x padding x align_corners, 4-d and 5-d', function() assert.is_true(n >= 36) end)
end)

describe('grid_sample and affine_grid gradients against finite differences (float64)', function()
  lunet.manual_seed(4)
  local function r(...) return lunet.randn(...):to('float64'):requires_grad_() end
  -- (grid values kept off the integer pixel positions where the gradient jumps)
  for _, mode in ipairs({ 'bilinear', 'bicubic' }) do
    for _, pad in ipairs({ 'zeros', 'border', 'reflection' }) do
      it(mode .. ' ' .. pad .. ', input and grid', function()
        local x = r(1, 2, 3, 4)
        local grid = (lunet.rand(1, 2, 3, 2):to('float64') * 2.6 - 1.3):requires_grad_()
        local ok, msg = gradcheck(function(a, g)
          return F.grid_sample(a, g, { mode = mode, padding_mode = pad, align_corners = pad == 'border' })
        end, { x, grid })
        assert(ok, msg)
      end)
    end
  end
  it('affine_grid 4-d and 5-d', function()
    local ok, msg = gradcheck(function(t) return F.affine_grid(t, { 2, 1, 3, 4 }) end, { r(2, 2, 3) })
    assert(ok, msg)
    ok, msg = gradcheck(function(t) return F.affine_grid(t, { 1, 1, 2, 3, 2 }, { align_corners = true }) end,
      { r(1, 3, 4) })
    assert(ok, msg)
  end)
end)

describe('grid_sample and affine_grid', function()
  local err = fixtures.err_of
  it('an identity affine grid samples the input back (align_corners both ways)', function()
    local x = lunet.randn(2, 3, 4, 5)
    local theta = lunet.tensor({ { 1, 0, 0 }, { 0, 1, 0 } }):view(1, 2, 3):expand(2, 2, 3)
    for _, ac in ipairs({ false, true }) do
      local g = F.affine_grid(theta, { 2, 3, 4, 5 }, { align_corners = ac })
      assert.tensor_near(F.grid_sample(x, g, { align_corners = ac }), x, 1e-5)
    end
  end)
  it('names the problem', function()
    local x, g = lunet.zeros(1, 1, 3, 3), lunet.zeros(1, 2, 2, 2)
    assert.matches("grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got 'area'",
      err(F.grid_sample, x, g, { mode = 'area' }), 1, true)
    assert.matches("grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got 'wrap'",
      err(F.grid_sample, x, g, { padding_mode = 'wrap' }), 1, true)
    assert.matches("grid_sample: mode 'bicubic' needs 4-d input",
      err(F.grid_sample, lunet.zeros(1, 1, 2, 2, 2), lunet.zeros(1, 1, 1, 1, 3), { mode = 'bicubic' }), 1, true)
    assert.matches('grid_sample: grid must be (N, Ho, Wo, 2) for 4-d input with N = 1, got {1, 2, 2, 3}',
      err(F.grid_sample, x, lunet.zeros(1, 2, 2, 3)), 1, true)
    assert.matches('grid_sample: input must be 4-d or 5-d, got 3-d', err(F.grid_sample, lunet.zeros(1, 3, 3), g), 1, true)
    assert.matches('same floating-point dtype, got float32 and float64',
      err(F.grid_sample, x, g:double()), 1, true)
    assert.matches("unknown option 'align'", err(F.grid_sample, x, g, { align = true }), 1, true)
    assert.matches('affine_grid: theta must be a floating-point (N, 2, 3) tensor with N = 2',
      err(F.affine_grid, lunet.zeros(1, 2, 3), { 2, 1, 3, 3 }), 1, true)
    assert.matches('affine_grid: size must be {N, C, H, W} or {N, C, D, H, W}, got 3 values',
      err(F.affine_grid, lunet.zeros(1, 2, 3), { 1, 3, 3 }), 1, true)
    assert.matches("unknown option 'align'", err(F.affine_grid, lunet.zeros(1, 2, 3), { 1, 1, 2, 2 }, { align = 1 }), 1, true)
  end)
  it('handles an empty batch and an empty output grid', function()
    assert.same({ 0, 2, 3, 4 }, F.grid_sample(lunet.zeros(0, 2, 3, 3), lunet.zeros(0, 3, 4, 2)):size())
    assert.same({ 1, 2, 0, 4 }, F.grid_sample(lunet.zeros(1, 2, 3, 3), lunet.zeros(1, 0, 4, 2)):size())
    assert.same({ 1, 0, 3, 2 }, F.affine_grid(lunet.zeros(1, 2, 3), { 1, 1, 0, 3 }):size())
  end)
end)
