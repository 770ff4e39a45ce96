-- F.interpolate's faster CPU paths (c/cpu/interp.c): the backward reading a
-- strided or expanded grad_output as it is (sum's gradient, one plane run
-- and copied when every plane of it is the same), the backward as gathers,
-- linear doubling's loops without index tables; each against the dense or
-- composed path it replaces, and the same on 1 and 2 threads.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local A = lunet.autograd
local F = lunet.nn.functional

local function composed(f)
  F._internal.interp_kernels(false)
  local ok, a, b = pcall(f)
  F._internal.interp_kernels(true)
  assert(ok, a)
  return a, b
end

-- the output and the input gradient for dout (any strides)
local function run(x, opts, dout_of)
  local xl = x:detach():requires_grad_()
  local y = F.interpolate(xl, opts)
  local g = A.grad(y, xl, { grad_outputs = dout_of(y) })[1]
  return y:detach(), g
end

local MODES = {
  { { scale_factor = 2, mode = 'nearest' }, { 2, 3, 5, 7 } },
  { { size = { 4, 11 }, mode = 'nearest-exact' }, { 2, 3, 5, 7 } },
  { { scale_factor = 2, mode = 'linear', align_corners = false }, { 2, 3, 9 } },
  { { size = 7, mode = 'linear', align_corners = true }, { 2, 3, 5 } },
  { { scale_factor = 2, mode = 'bilinear', align_corners = false }, { 2, 3, 4, 6 } },
  { { size = { 5, 3 }, mode = 'bicubic', align_corners = false }, { 2, 3, 4, 6 } },
  { { scale_factor = 2, mode = 'trilinear', align_corners = false }, { 2, 2, 3, 2, 4 } },
}

describe('interpolate: the backward of a strided or expanded grad_output', function()
  local douts = {
    ['sum (a scalar expanded)'] = function(y) return lunet.ones({}, { dtype = y.dtype }):expand(y:size()) end,
    ['one plane expanded over N and C'] = function(y)
      local s = y:size()
      local p = { 1, 1 }
      for i = 3, #s do p[i] = s[i] end
      return lunet.randn(p):to(y.dtype):expand(s)
    end,
    ['expanded over C only'] = function(y)
      local s = y:size()
      local p = { s[1], 1 }
      for i = 3, #s do p[i] = s[i] end
      return lunet.randn(p):to(y.dtype):expand(s)
    end,
    ['a transposed copy'] = function(y)
      local n = y:dim()
      return lunet.randn(y:transpose(2, n):size()):to(y.dtype):transpose(2, n)
    end,
    ['a narrowed view'] = function(y)
      local s = y:size()
      local big = {}
      for i = 1, #s do big[i] = s[i] end
      big[#s] = s[#s] + 3
      return lunet.randn(big):to(y.dtype):narrow(#s, 2, s[#s])
    end,
  }
  for what, dout_of in pairs(douts) do
    it(what .. ': the same gradient as the dense copy, every mode, float32 and float64', function()
      for _, c in ipairs(MODES) do
        for _, dt in ipairs({ 'float32', 'float64' }) do
          local x = lunet.randn(c[2]):to(dt)
          local g0
          local _, g = run(x, c[1], function(y)
            local d = dout_of(y)
            assert.is_false(d:is_contiguous())
            g0 = select(2, run(x, c[1], function() return d:contiguous() end))
            return d
          end)
          assert.equal(0, fx.maxdiff(g, g0), what .. ' ' .. c[1].mode .. ' ' .. dt)
          assert.is_true(g:is_contiguous())
        end
      end
    end)
  end
  it("sum's backward: the gradient of ones, a dense .grad of its own", function()
    for _, c in ipairs(MODES) do
      local x = lunet.randn(c[2]):requires_grad_()
      F.interpolate(x, c[1]):sum():backward()
      local _, g0 = run(x, c[1], function(y) return lunet.ones(y:size()) end)
      assert.equal(0, fx.maxdiff(x.grad, g0), c[1].mode)
      assert.is_true(x.grad:is_contiguous())
      x.grad:add_(1)   -- (its own storage: writable)
    end
  end)
  it('an empty batch and a 1x1 plane', function()
    local e = lunet.randn(0, 3, 4, 5):requires_grad_()
    F.interpolate(e, { scale_factor = 2, mode = 'nearest' }):sum():backward()
    assert.same({ 0, 3, 4, 5 }, e.grad:size())
    local one = lunet.randn(2, 3, 1, 1):requires_grad_()
    F.interpolate(one, { size = { 3, 2 }, mode = 'nearest' }):sum():backward()
    assert.equal(0, fx.maxdiff(one.grad, lunet.full({ 2, 3, 1, 1 }, 6)))
  end)
end)

describe('interpolate: linear doubling without index tables', function()
  it('matches the composed path at every length, both align_corners (float64)', function()
    for n = 1, 12 do
      for _, al in ipairs({ false, true }) do
        local o = { scale_factor = 2, mode = 'linear', align_corners = al }
        local x = lunet.randn(2, 3, n):to('float64')
        local dout = lunet.randn(2, 3, 2 * n):to('float64')
        local y, g = run(x, o, function() return dout end)
        local y2, g2 = composed(function() return run(x, o, function() return dout end) end)
        local what = ('n %d align_corners %s'):format(n, tostring(al))
        assert.is_true(fx.maxdiff(y, y2) <= 1e-12, what .. ' output')
        assert.is_true(fx.maxdiff(g, g2) <= 1e-12, what .. ' gradient')
      end
    end
  end)
  it('bilinear doubling (the same pass along W) matches the composed path', function()
    local o = { scale_factor = 2, mode = 'bilinear', align_corners = false }
    local x = lunet.randn(2, 2, 5, 9):to('float64')
    local dout = lunet.randn(2, 2, 10, 18):to('float64')
    local y, g = run(x, o, function() return dout end)
    local y2, g2 = composed(function() return run(x, o, function() return dout end) end)
    assert.is_true(fx.maxdiff(y, y2) <= 1e-12 and fx.maxdiff(g, g2) <= 1e-12)
  end)
end)

describe('interpolate kernels: the same results on 1 and 2 threads', function()
  it('forward and backward, dense and expanded gradients, bit for bit', function()
    local n0 = lunet.get_num_threads()
    local shapes = { nearest = { 1, 2, 64, 64 }, linear = { 4, 8, 4096 }, bilinear = { 3, 4, 40, 40 } }
    local function all(threads)
      lunet.set_num_threads(threads)
      local r = {}
      for mode, shape in pairs(shapes) do
        lunet.manual_seed(7)
        local x = lunet.randn(shape)
        local o = { scale_factor = 2, mode = mode }
        if mode ~= 'nearest' then o.align_corners = false end
        local dense
        r[#r + 1], r[#r + 2] = run(x, o, function(y) dense = lunet.randn(y:size()); return dense end)
        r[#r + 1] = select(2, run(x, o, function(y) return lunet.ones({}):expand(y:size()) end))
      end
      return r
    end
    local ok, a = pcall(all, 1)
    local ok2, b = pcall(all, 2)
    lunet.set_num_threads(n0)
    assert(ok, a)
    assert(ok2, b)
    for i = 1, #a do assert.equal(0, fx.maxdiff(a[i], b[i]), 'result ' .. i) end
  end)
end)
