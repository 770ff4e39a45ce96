-- scatter_reduce and index_reduce (lunet.tensor_scatter_reduce, the C kernel
-- ln_scatter_reduce_): values and float64 gradients against PyTorch 1.13 from
-- spec/fixtures/scatter_reduce.safetensors (tools/gen_scatter_reduce_fixtures.py),
-- NaN, int64, non-contiguous and empty inputs, finite differences, errors.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local fx = require 'support.fixtures'

local data, cases = fx.load_fixture('scatter_reduce')
local function get(c, k) return data[c.name .. '.' .. k] end

local function run(c, x, index, src)
  local o = c.opts
  return x[c.op](x, o.dim, index, src, o.reduce, { include_self = o.include_self })
end

-- largest difference, NaN only where want has NaN
local function diff(got, want)
  local gn, wn = got:isnan(), want:isnan()
  assert.is_true(gn:eq(wn):all():item(), 'NaN positions differ')
  return fx.maxdiff(got:masked_fill(gn, 0), want:masked_fill(wn, 0))
end

describe('scatter_reduce / index_reduce against torch 1.13', function()
  it('values and float64 gradients', function()
    local n = 0
    for _, c in ipairs(cases) do
      local x, src, index = get(c, 'x'), get(c, 'src'), get(c, 'index')
      if x:is_floating_point() then x, src = x:double():requires_grad_(), src:double():requires_grad_() end
      local out = run(c, x, index, src)
      local want = get(c, 'out')
      assert.equal(want.dtype, out.dtype, c.name)
      local tol = 1e-12 * math.max(1, want:abs():nan_to_num(0):max():item())
      assert.is_true(diff(out, want) <= tol, c.name .. ': ' .. diff(out, want))
      if get(c, 'dx') then
        (out * get(c, 'dout'):double()):sum():backward()
        assert.is_true(fx.maxdiff(x.grad, get(c, 'dx')) <= 1e-10, c.name .. ' dx ' .. fx.maxdiff(x.grad, get(c, 'dx')))
        assert.is_true(fx.maxdiff(src.grad, get(c, 'dsrc')) <= 1e-10, c.name .. ' dsrc ' .. fx.maxdiff(src.grad, get(c, 'dsrc')))
      end
      n = n + 1
    end
    assert.is_true(n >= 70)
  end)

  it('float32 stays float32; non-contiguous inputs give the same values', function()
    for _, c in ipairs(cases) do
      local x, src, index = get(c, 'x'), get(c, 'src'), get(c, 'index')
      local want = get(c, 'out')
      if x:is_floating_point() and not c.name:match('nan') then
        local out = run(c, x, index, src)
        assert.equal('float32', out.dtype, c.name)
        assert.is_true(fx.rel(out, want:float()) < 1e-5, c.name)
      end
      if c.op == 'scatter_reduce' and x:dim() == 2 then
        -- transposed copies, read back through transposed views
        local xt, st, it = x:t():contiguous():t(), src:t():contiguous():t(), index:t():contiguous():t()
        assert.is_false(xt:is_contiguous())
        local out = run(c, xt, it, st)
        assert.is_true(diff(out, x:is_floating_point() and want:float() or want) <= 1e-5, c.name)
      end
    end
  end)

  it('NaN wins in amax and amin, from src and from self', function()
    local x = lunet.tensor({ 1, 0 / 0, 3 }, { dtype = 'float64' })
    local s = lunet.tensor({ 5, 1, 0 / 0 }, { dtype = 'float64' })
    local i = lunet.tensor({ 1, 2, 3 }, { dtype = 'int64' })
    for _, r in ipairs({ 'amax', 'amin' }) do
      local o = x:scatter_reduce(1, i, s, r)
      assert.equal(r == 'amax' and 5 or 1, o[{ 1 }])
      assert.is_true(o[{ 2 }] ~= o[{ 2 }] and o[{ 3 }] ~= o[{ 3 }])
    end
  end)

  it('passes gradcheck for every reduce, with and without include_self', function()
    local idx = lunet.tensor({ { 1, 3 }, { 2, 3 }, { 1, 1 } }, { dtype = 'int64' })
    for _, r in ipairs({ 'sum', 'prod', 'mean', 'amax', 'amin' }) do
      for _, incl in ipairs({ true, false }) do
        local f = function(x, s) return x:scatter_reduce(1, idx, s, r, { include_self = incl }) end
        assert.is_true(gradcheck(f, { lunet.randn(3, 3):double():requires_grad_(), lunet.randn(3, 2):double():requires_grad_() }), r)
      end
    end
    local g = function(x, s) return x:index_reduce(2, { 2, 1, 2 }, s, 'prod') end
    assert.is_true(gradcheck(g, { lunet.randn(2, 3):double():requires_grad_(), lunet.randn(2, 3):double():requires_grad_() }))
  end)

  it('index smaller than src: the rest of src gets no gradient', function()
    local x = lunet.randn(2, 3):double():requires_grad_()
    local s = lunet.randn(3, 3):double():requires_grad_()
    local i = lunet.tensor({ { 1, 2 }, { 2, 2 } }, { dtype = 'int64' })
    x:scatter_reduce(1, i, s, 'prod'):sum():backward()
    assert.same({ 3, 3 }, s.grad:size())
    assert.equal(0, s.grad:narrow(1, 3, 1):abs():sum():item())
    assert.equal(0, s.grad:narrow(2, 3, 1):abs():sum():item())
  end)

  it('empty index and 0-d tensors', function()
    local x = lunet.randn(3, 2)
    local e = x:scatter_reduce(1, lunet.empty({ 0, 2 }, { dtype = 'int64' }), lunet.empty({ 0, 2 }), 'amax')
    assert.equal(0, fx.maxdiff(e, x))
    local z = lunet.tensor(2.0)
    local o = z:scatter_reduce(1, lunet.tensor(1, { dtype = 'int64' }), lunet.tensor(5.0), 'prod')
    assert.equal(0, o:dim())
    assert.equal(10, o:item())
    local ir = z:index_reduce(1, lunet.tensor({ 1 }, { dtype = 'int64' }), lunet.tensor({ 3.0 }), 'amin', { include_self = false })
    assert.equal(3, ir:item())
  end)

  it('integer mean rounds down, as torch', function()
    local x = lunet.tensor({ 0, 0 }, { dtype = 'int64' })
    local o = x:scatter_reduce(1, lunet.tensor({ 1, 1, 2 }, { dtype = 'int64' }), lunet.tensor({ -3, 0, 7 }, { dtype = 'int64' }), 'mean',
      { include_self = false })
    assert.same({ -2, 7 }, { o[{ 1 }], o[{ 2 }] })
  end)

  it('refuses bad arguments with named errors', function()
    local x, i = lunet.randn(3), lunet.tensor({ 1, 2 }, { dtype = 'int64' })
    assert.matches("scatter_reduce: unknown reduce 'max'", fx.err_of(function() x:scatter_reduce(1, i, x, 'max') end))
    assert.matches("scatter_reduce: reduce must be", fx.err_of(function() x:scatter_reduce(1, i, x) end))
    assert.matches("scatter_reduce: unknown option 'include'", fx.err_of(function() x:scatter_reduce(1, i, x, 'sum', { include = 1 }) end))
    assert.matches('scatter_reduce: index 4 is out of range', fx.err_of(function() x:scatter_reduce(1, lunet.tensor({ 4 }, { dtype = 'int64' }), x, 'prod') end))
    assert.matches('scatter_reduce: index must be an int64', fx.err_of(function() x:scatter_reduce(1, x, x, 'prod') end))
    assert.matches('scatter_reduce: src must have', fx.err_of(function() x:scatter_reduce(1, i, x:double(), 'prod') end))
    assert.matches('scatter_reduce: dim 2 out of range', fx.err_of(function() x:scatter_reduce(2, i, x, 'prod') end))
    assert.matches("index_reduce: unknown reduce 'sum'", fx.err_of(function() x:index_reduce(1, i, x:narrow(1, 1, 2), 'sum') end))
    assert.matches('index_reduce: source must have shape', fx.err_of(function() x:index_reduce(1, i, x, 'prod') end))
    assert.matches('index_reduce: index 5 is out of range', fx.err_of(function() x:index_reduce(1, lunet.tensor({ 5, 1 }, { dtype = 'int64' }), x:narrow(1, 1, 2), 'amax') end))
    assert.matches('scatter_reduce: src must be a tensor', fx.err_of(function() x:scatter_reduce(1, i, 3, 'sum') end))
  end)
end)
