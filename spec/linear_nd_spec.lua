-- F.linear / nn.Linear on input of more than 2 dims (leading dims folded into
-- the rows of one GEMM, as torch's) against PyTorch 1.13: outputs in float32,
-- float64 gradients of input, weight and bias from spec/fixtures/
-- linear_nd.safetensors (tools/gen_linear_nd_fixtures.py), a permuted
-- (non-contiguous) input as ConvNeXt's, empty leading dims, float64 finite
-- differences, and the feature-count error.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local fx = require 'support.fixtures'
local nn = lunet.nn
local F = nn.functional

local T, cases = fx.load_fixture('linear_nd')

local function inputs(c, dtype)
  local function get(k)
    local t = T[c.name .. '.' .. k]
    return t and t:detach():to(dtype):requires_grad_()   -- (a new leaf each time)
  end
  return get('x'), get('w'), c.opts.bias and get('b') or nil
end

local function run(c, x, w, b)
  if c.opts.permute then x = x:permute(1, 3, 4, 2) end
  return F.linear(x, w, b)
end

describe('F.linear on n-d input', function()
  for _, c in ipairs(cases) do
    it(c.name .. ': output (float32) and gradients (float64) as torch', function()
      local x, w, b = inputs(c, 'float32')
      local y = run(c, x, w, b)
      local want = T[c.name .. '.out']
      assert.same(want:size(), y:size())
      assert.is_true(fx.rel(y, want) < 1e-5)
      x, w, b = inputs(c, 'float64')
      run(c, x, w, b):backward(T[c.name .. '.dout']:double())
      assert.is_true(fx.rel(x.grad, T[c.name .. '.dx']) < 1e-10)
      assert.is_true(fx.rel(w.grad, T[c.name .. '.dw']) < 1e-10)
      if b then assert.is_true(fx.rel(b.grad, T[c.name .. '.db']) < 1e-10) end
    end)
  end

  it('nn.Linear on a permuted 4-d input: the same as on its contiguous copy', function()
    local m = nn.Linear(5, 3)
    local x = lunet.randn(2, 5, 4, 3):permute(1, 3, 4, 2)
    assert.is_false(x:is_contiguous())
    local y = m(x)
    assert.same({ 2, 4, 3, 3 }, y:size())
    assert.is_true(fx.maxdiff(y, m(x:contiguous())) == 0)
  end)

  it('empty leading dims: an empty output, zero weight and bias gradients', function()
    local w = lunet.randn(4, 5):requires_grad_()
    local b = lunet.randn(4):requires_grad_()
    local x = lunet.randn(0, 3, 5):requires_grad_()
    local y = F.linear(x, w, b)
    assert.same({ 0, 3, 4 }, y:size())
    y:sum():backward()
    assert.same({ 0, 3, 5 }, x.grad:size())
    assert.equals(0, w.grad:abs():sum():item())
    assert.equals(0, b.grad:abs():sum():item())
  end)

  it('float64 finite differences through a permuted input', function()
    local function d(...) return lunet.randn(...):double():requires_grad_() end
    local x, w, b = d(2, 3, 2, 2), d(4, 3), d(4)
    assert.is_true(gradcheck(function(x_, w_, b_) return F.linear(x_:permute(1, 3, 4, 2), w_, b_) end, { x, w, b }))
  end)

  it('a feature count that does not match is a named error', function()
    local e = fx.err_of(F.linear, lunet.randn(2, 3, 6), lunet.randn(4, 5))
    assert.matches('linear: input has 6 features, weight expects 5', e, 1, true)
  end)
end)
