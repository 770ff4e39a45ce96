-- interpolate's and grid_sample's CPU kernels with fewer planes than threads
-- (c/cpu/interp.c splits each plane's rows among the threads then) and
-- grid_sample 'nearest''s vectorised taps (c/cpu/grid_body.h): the same bits
-- on 1 and 2 threads for N*C = 1 and 3, every mode, forward and backward
-- (dense, expanded and strided gradients); the row split against the
-- composed path; nearest's far-outside points against torch 1.13
-- (tools/gen_grid_nearest_fixtures.py).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local A = lunet.autograd
local F = lunet.nn.functional

-- the output and the input gradient for dout (any strides)
local function run(x, opts, dout_of)
  local xl = x:detach():requires_grad_()
  local y = F.interpolate(xl, opts)
  local g = A.grad(y, xl, { grad_outputs = dout_of(y) })[1]
  return y:detach(), g
end

local function composed(f)
  F._internal.interp_kernels(false)
  local ok, a, b = pcall(f)
  F._internal.interp_kernels(true)
  assert(ok, a)
  return a, b
end

-- each (planes, sizes) past the kernels' one-thread threshold
local MODES = {
  { { scale_factor = 2, mode = 'nearest' }, { 100, 90 } },
  { { size = { 150, 201 }, mode = 'nearest' }, { 100, 90 } },
  { { scale_factor = 2, mode = 'nearest-exact' }, { 100, 90 } },
  { { size = { 61, 250 }, mode = 'nearest-exact' }, { 100, 90 } },
  { { scale_factor = 2, mode = 'linear', align_corners = false }, { 20000 } },
  { { scale_factor = 2, mode = 'bilinear', align_corners = false }, { 80, 90 } },
  { { size = { 70, 130 }, mode = 'bilinear', align_corners = true }, { 80, 90 } },
  { { size = { 50, 70 }, mode = 'bicubic', align_corners = false }, { 40, 60 } },
  { { scale_factor = 2, mode = 'trilinear', align_corners = false }, { 12, 20, 24 } },
  { { size = { 5, 30, 17 }, mode = 'nearest' }, { 12, 20, 24 } },
}
local PLANES = { { 1, 1 }, { 1, 3 }, { 3, 1 } }

local function with_threads(n, f)
  local n0 = lunet.get_num_threads()
  lunet.set_num_threads(n)
  local r = { pcall(f) }
  lunet.set_num_threads(n0)
  assert(r[1], r[2])
  return unpack(r, 2)
end

-- every result of one mode on a given number of threads: y, then the input
-- gradient of a dense, an expanded and a transposed (strided) dout
local function results(o, shape, dtype)
  lunet.manual_seed(11)
  local x = lunet.randn(shape):to(dtype)
  local r = {}
  local y = run(x, o, function(y) return lunet.ones({}):to(dtype):expand(y:size()) end)
  lunet.manual_seed(12)
  local dense = lunet.randn(y:size()):to(dtype)
  local strided = lunet.randn(y:size()):to(dtype):transpose(1, 2):contiguous():transpose(1, 2)
  r[1], r[2] = run(x, o, function() return dense end)
  r[3] = select(2, run(x, o, function(yy) return lunet.ones({}):to(dtype):expand(yy:size()) end))
  r[4] = select(2, run(x, o, function() return strided end))
  return r, x, dense, strided
end

describe('interpolate kernels with fewer planes than threads', function()
  for _, m in ipairs(MODES) do
    local o, sizes = m[1], m[2]
    for _, nc in ipairs(PLANES) do
      local shape = { nc[1], nc[2], unpack(sizes) }
      local what = ('%s %s'):format(o.mode, table.concat(shape, 'x'))
      it(what .. ': the same bits on 1 and 2 threads, fwd and bwd (dense, expanded, strided)', function()
        for _, dt in ipairs({ 'float32', 'float64' }) do
          local a = with_threads(1, function() return (results(o, shape, dt)) end)
          local b = with_threads(2, function() return (results(o, shape, dt)) end)
          for i = 1, #a do assert.equal(0, fx.maxdiff(a[i], b[i]), dt .. ' result ' .. i) end
        end
      end)
    end
  end
  it('the row split agrees with the composed path (float64, 2 threads)', function()
    for _, m in ipairs(MODES) do
      local o, sizes = m[1], m[2]
      local shape = { 1, 1, unpack(sizes) }
      local r, x, dense = with_threads(2, function() return results(o, shape, 'float64') end)
      local y2, g2 = composed(function() return run(x, o, function() return dense end) end)
      assert.is_true(fx.maxdiff(r[1], y2) <= 1e-12, o.mode .. ' forward')
      assert.is_true(fx.maxdiff(r[2], g2) <= 1e-12, o.mode .. ' backward')
    end
  end)
end)

describe("grid_sample 'nearest' taps", function()
  it('far outside (beyond two spans, ties): torch 1.13 values, every padding, 2-d and 3-d', function()
    -- (3-d rounds ties away from zero, 2-d to even, as torch 1.13's kernels;
    -- an infinite, NaN or 1e30 coordinate, where torch reads what its casts
    -- give, reads 0 here, or a value, never outside the input)
    local t, cases = fx.load_fixture('grid_nearest_far')
    for _, c in ipairs(cases) do
      local x, g = t[c.name .. '.x'], t[c.name .. '.grid']
      local sd = g:size(-1)
      local ok = g:view(-1, sd):abs():lt(1e6):sum(2):eq(sd):view(1, 1, -1)   -- (NaN: not lt)
      for _, nt in ipairs({ 1, 2 }) do
        local y = with_threads(nt, function() return F.grid_sample(x, g, c.opts) end)
        local want = t[c.name .. '.out']
        local yv, wv = y:view(1, 2, -1), want:view(1, 2, -1)
        local m = ok:expand(yv:size())
        assert.equal(0, fx.maxdiff(yv:masked_select(m), wv:masked_select(m)), c.name .. ' threads ' .. nt)
        local rest = yv:masked_select(m:logical_not())
        assert.is_true(rest:numel() >= 2 and rest:ne(rest):sum():item() == 0, c.name)
      end
    end
  end)
  it('N*C = 1 and 3: the same bits on 1 and 2 threads, forward and backward, every padding, 2-d and 3-d', function()
    for _, sd in ipairs({ 2, 3 }) do
      for _, nc in ipairs(PLANES) do
        for _, pad in ipairs({ 'zeros', 'border', 'reflection' }) do
          local function go()
            lunet.manual_seed(3)
            local size = sd == 2 and { 70, 90 } or { 12, 30, 40 }
            local x = lunet.randn({ nc[1], nc[2], unpack(size) }):requires_grad_()
            local gs = sd == 2 and { nc[1], 80, 100, 2 } or { nc[1], 14, 30, 40, 3 }
            local g = (lunet.rand(gs) * 3 - 1.5):requires_grad_()
            local o = { mode = 'nearest', padding_mode = pad, align_corners = false }
            local y = F.grid_sample(x, g, o)
            lunet.manual_seed(4)
            local dx, dg = unpack(A.grad(y, { x, g }, { grad_outputs = lunet.randn(y:size()) }))
            return { y:detach(), dx, dg }
          end
          local a, b = with_threads(1, go), with_threads(2, go)
          for i = 1, 3 do assert.equal(0, fx.maxdiff(a[i], b[i]), ('%dd %s %d'):format(sd, pad, i)) end
        end
      end
    end
  end)
end)
