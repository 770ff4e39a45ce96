-- grid_sample's C kernels (c/cpu/grid.c) against the same sampling composed
-- from tensor ops (F._grid_sample_composed, differentiated by autograd):
-- random shapes, grids partly outside [-1, 1], every mode x padding_mode x
-- align_corners, 4-d and 5-d, non-contiguous input and grid, empty batch;
-- outputs and both gradients to 1e-12 in float64; finite differences of
-- both gradients; the kernel path's double backward (create_graph).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local F = lunet.nn.functional

local function leaf(t) return t:detach():clone():requires_grad_() end

-- out, dx, dgrid of f(x, grid) for the upstream gradient dout
local function run(f, x0, g0, o, dout, noncontig)
  local x, g = leaf(x0), leaf(g0)
  local xin, gin = x, g
  if noncontig then
    xin = x:transpose(1, 2):contiguous():transpose(1, 2)
    gin = g:transpose(2, 3):contiguous():transpose(2, 3)
  end
  local out = f(xin, gin, o)
  out:backward(dout)
  return out, x.grad, g.grad
end

local function near(a, b, tol)
  if a == nil or b == nil then   -- (no path to the grid: nearest)
    local t = a or b
    if t then assert.equal(0, t:abs():max():item()) end
    return
  end
  assert.tensor_near(a, b, tol)
end

describe('grid_sample kernels vs the composition (float64)', function()
  lunet.manual_seed(11)
  local case = 0
  for _, sd in ipairs({ 2, 3 }) do
    for _, mode in ipairs({ 'bilinear', 'nearest', 'bicubic' }) do
      for _, pad in ipairs({ 'zeros', 'border', 'reflection' }) do
        for _, align in ipairs({ false, true }) do
          if not (mode == 'bicubic' and sd == 3) then
            case = case + 1
            local noncontig = case % 2 == 0
            it(('%d-d %s %s align_corners=%s%s'):format(sd + 2, mode, pad, tostring(align),
              noncontig and ' non-contiguous' or ''), function()
              local N, C = math.random(1, 3), math.random(1, 4)
              local xs, gs = { N, C }, { N }
              for i = 1, sd do xs[#xs + 1] = math.random(1, 6); gs[#gs + 1] = math.random(1, 5) end
              gs[#gs + 1] = sd
              local x = lunet.randn(unpack(xs)):double()
              local g = (lunet.rand(unpack(gs)):double() * 2.8 - 1.4)   -- (partly outside [-1, 1])
              local o = { mode = mode, padding_mode = pad, align_corners = align }
              local osz = { N, C }
              for i = 2, sd + 1 do osz[#osz + 1] = gs[i] end
              local dout = lunet.randn(unpack(osz)):double()
              local o1, dx1, dg1 = run(F.grid_sample, x, g, o, dout, noncontig)
              local o2, dx2, dg2 = run(F._grid_sample_composed, x, g, o, dout, noncontig)
              assert.same(o2:size(), o1:size())
              assert.tensor_near(o1, o2, 1e-12)
              near(dx1, dx2, 1e-12)
              near(dg1, dg2, 1e-10)
            end)
          end
        end
      end
    end
  end

  it('float32 agrees too', function()
    local x, g = lunet.randn(2, 3, 5, 7), lunet.rand(2, 4, 6, 2) * 2.4 - 1.2
    for _, mode in ipairs({ 'bilinear', 'nearest', 'bicubic' }) do
      local o = { mode = mode, padding_mode = 'reflection' }
      local dout = lunet.randn(2, 3, 4, 6)
      local o1, dx1, dg1 = run(F.grid_sample, x, g, o, dout)
      local o2, dx2, dg2 = run(F._grid_sample_composed, x, g, o, dout)
      assert.tensor_near(o1, o2, 1e-5)
      near(dx1, dx2, 1e-5)
      near(dg1, dg2, 1e-4)
    end
  end)

  it('a point outside reads zeros, never element 0 (an inf there gave NaN; torch 1.13 gives 0)', function()
    local x = lunet.ones(1, 1, 3, 3)
    x[1][1][1][1] = math.huge
    local g = lunet.tensor({ { { { 5, 5 }, { 0.9, 0.9 } } } })
    -- (torch 1.13: bilinear {0, 0.4225}, nearest {0, 1}, bicubic {0, 0.4450})
    for mode, want in pairs({ bilinear = 0.4225, nearest = 1, bicubic = 0.4450 }) do
      local y = F.grid_sample(x, g, { mode = mode, padding_mode = 'zeros', align_corners = false })
      assert.equal(0, y[1][1][1][1]:item(), mode)
      assert.is_true(math.abs(y[1][1][1][2]:item() - want) < 1e-4, mode)
      local xg, gg = x:clone():requires_grad_(), g:clone():requires_grad_()
      F.grid_sample(xg, gg, { mode = mode, padding_mode = 'zeros', align_corners = false }):sum():backward()
      assert.is_false(xg.grad:isnan():any():item(), mode)
      if mode ~= 'nearest' then assert.equal(0, gg.grad[1][1][1]:abs():sum():item(), mode) end
    end
  end)

  it('an empty batch, channels or grid: empty outputs and gradients', function()
    for _, s in ipairs({ { { 0, 2, 3, 3 }, { 0, 2, 2, 2 } }, { { 2, 0, 3, 3 }, { 2, 2, 2, 2 } },
      { { 2, 2, 3, 3 }, { 2, 0, 2, 2 } }, { { 1, 2, 2, 3, 3 }, { 1, 2, 0, 2, 3 } } }) do
      local x, g = lunet.randn(unpack(s[1])):requires_grad_(), lunet.randn(unpack(s[2])):requires_grad_()
      local out = F.grid_sample(x, g)
      out:sum():backward()
      assert.same(x:size(), x.grad:size())
      assert.equal(0, x.grad:numel() == 0 and 0 or x.grad:abs():max():item())
      assert.same(g:size(), g.grad:size())
    end
  end)
end)

describe('grid_sample kernels against finite differences (float64)', function()
  lunet.manual_seed(5)
  for _, c in ipairs({ { 2, 'bilinear', 'reflection', false }, { 2, 'bicubic', 'zeros', true },
    { 3, 'bilinear', 'zeros', false }, { 3, 'bilinear', 'border', true }, { 3, 'bilinear', 'reflection', true } }) do
    it(('%d-d %s %s, input and grid'):format(c[1] + 2, c[2], c[3]), function()
      local x = c[1] == 2 and lunet.randn(2, 2, 3, 4) or lunet.randn(1, 2, 2, 3, 3)
      local g = c[1] == 2 and lunet.rand(2, 2, 3, 2) or lunet.rand(1, 2, 2, 2, 3)
      x, g = x:double():requires_grad_(), (g:double() * 2.6 - 1.3):requires_grad_()
      local ok, msg = gradcheck(function(a, b)
        return F.grid_sample(a, b, { mode = c[2], padding_mode = c[3], align_corners = c[4] })
      end, { x, g })
      assert(ok, msg)
    end)
  end
  it('nearest: the input gradient (the grid has none)', function()
    local x = lunet.randn(1, 2, 3, 3, 3):double():requires_grad_()
    local g = lunet.rand(1, 2, 2, 2, 3):double() * 2.2 - 1.1
    local ok, msg = gradcheck(function(a) return F.grid_sample(a, g, { mode = 'nearest' }) end, { x })
    assert(ok, msg)
  end)
  it('double backward (create_graph) goes through the composition', function()
    local x = lunet.randn(1, 2, 3, 4):double():requires_grad_()
    local g = (lunet.rand(1, 2, 3, 2):double() * 2.4 - 1.2):requires_grad_()
    local function second(f)
      local xx, gg = leaf(x), leaf(g)
      local out = f(xx, gg, { mode = 'bicubic', padding_mode = 'border' })
      local d = lunet.autograd.grad(out:pow(2):sum(), { xx, gg }, { create_graph = true })
      ;(d[1]:pow(2):sum() + (d[2] * d[2]):sum()):backward()
      return xx.grad, gg.grad
    end
    local ax, ag = second(F.grid_sample)
    local bx, bg = second(F._grid_sample_composed)
    assert.tensor_near(ax, bx, 1e-10)
    assert.tensor_near(ag, bg, 1e-10)
  end)
end)

describe('grid_sample kernels: errors', function()
  it('the C front end names the problem', function()
    local C = lunet.C
    local x, g, out = lunet.zeros(1, 1, 3, 3), lunet.zeros(1, 2, 2, 2), lunet.zeros(1, 1, 2, 2)
    assert.is_true(C.ln_grid_sample_forward(out.p, x.p, g.p, 7, 0, 0) ~= 0)
    assert.matches('grid_sample: unknown mode 7', require('ffi').string(C.ln_last_error()), 1, true)
    assert.is_true(C.ln_grid_sample_forward(lunet.zeros(1, 1, 2, 3).p, x.p, g.p, 0, 0, 0) ~= 0)
    assert.matches('grid_sample: out has shape {1,1,2,3}, expected {1,1,2,2}', require('ffi').string(C.ln_last_error()), 1, true)
  end)
  it('F.grid_sample refuses an integer grid by name', function()
    assert.matches('same floating-point dtype', fx.err_of(F.grid_sample, lunet.zeros(1, 1, 2, 2), lunet.zeros(1, 1, 1, 2):long()), 1, true)
  end)
end)
