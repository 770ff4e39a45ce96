-- einsum, tensordot, diagonal, diag, trace, movedim, repeat_interleave,
-- meshgrid, cross, cdist (lunet.tensor_einsum, lunet.tensor_layout) and
-- index_add, index_copy, index_fill, scatter, take_along_dim, take
-- (lunet.tensor_scatter) against PyTorch 1.13: float32 values and float64
-- gradients from spec/fixtures/tensor_more_ops.safetensors (written by
-- tools/gen_tensor_more_ops_fixtures.py); then gradchecks, in-place forms,
-- views, empty and 0-d inputs, and the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local err_of = fixtures.err_of

-- largest |a - b|, shapes equal (0 for empty tensors)
local function maxdiff(a, b)
  assert.same(b:size(), a:size())
  if b:numel() == 0 then return 0 end
  return fixtures.maxdiff(a, b)
end

local fx, cases = fixtures.load_fixture('tensor_more_ops')

local function long(t) return lunet.tensor(t, { dtype = 'int64' }) end

-- the case's op on inputs a, b (converted by conv) and index i
local function run(case, conv)
  local o, name = case.opts, case.name
  local a, b, i = fx[name .. '.a'], fx[name .. '.b'], fx[name .. '.i']
  a, b = conv(a), b and conv(b)
  local x = o.view == 't' and a:t() or a
  local op = case.op
  if op == 'einsum' then
    local list = { x }
    if b then list[2] = b end
    local c = fx[name .. '.c']
    if c then list[3] = conv(c) end
    return lunet.einsum(o.eq, unpack(list)), { a, b, list[3] }, list
  end
  local r
  if op == 'tensordot' then r = lunet.tensordot(x, b, o.dims)
  elseif op == 'diagonal' then r = x:diagonal(unpack(o.args))
  elseif op == 'diag' then r = lunet.diag(x, o.k)
  elseif op == 'trace' then r = x:trace()
  elseif op == 'movedim' then r = x:movedim(o.src, o.dst)
  elseif op == 'repeat_interleave' then r = x:repeat_interleave(i or o.r, o.dim)
  elseif op == 'meshgrid' then r = lunet.stack(lunet.meshgrid(x, b, { indexing = o.indexing }))
  elseif op == 'cross' then r = o.dim == -1 and lunet.linalg.cross(x, b) or lunet.cross(x, b, o.dim)
  elseif op == 'cdist' then r = lunet.cdist(x, b, o.p == 'inf' and math.huge or o.p)
  elseif op == 'index_add' then r = x:index_add(o.dim, i, b, o.alpha and { alpha = o.alpha })
  elseif op == 'index_copy' then r = x:index_copy(o.dim, i, b)
  elseif op == 'index_fill' then r = x:index_fill(o.dim, i, o.value)
  elseif op == 'scatter' then r = x:scatter(o.dim, i, o.value or b, o.reduce and { reduce = o.reduce })
  elseif op == 'take_along_dim' then r = x:take_along_dim(i, o.dim)
  elseif op == 'take' then r = x:take(i)
  else error('no such op ' .. op) end
  return r, { a, b }
end

describe('more tensor ops against PyTorch 1.13 (fixtures)', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 50) end)
  for _, case in ipairs(cases) do
    it(case.name .. ': float32 values, float64 values and gradients', function()
      local want = fx[case.name .. '.out']
      local r = run(case, function(t) return t end)
      assert.equal('float32', r.dtype)
      assert.same(want:size(), r:size())
      if want:numel() > 0 then assert.is_true(fixtures.rel(r:double(), want) < 1e-5, case.name) end
      local ins = {}
      local r64, leaves = run(case, function(t)
        local d = t:double(); d.requires_grad = true; ins[#ins + 1] = d; return d
      end)
      assert.is_true(maxdiff(r64, want) < 1e-10)
      r64:backward(fx[case.name .. '.dout']:double())
      for k, key in ipairs({ 'a', 'b' }) do
        local dg = fx[case.name .. '.d' .. key]
        if dg and leaves[k] then assert.is_true(maxdiff(leaves[k].grad, dg) < 1e-10, case.name .. ' d' .. key) end
      end
    end)
  end
end)

describe('gradcheck (float64 finite differences)', function()
  local function check(f, inputs)
    local ok, msg = gradcheck(f, inputs)
    assert.is_true(ok, tostring(msg))
  end
  local function r64(...) return lunet.randn({ ... }, { dtype = 'float64', requires_grad = true }) end
  it('einsum, tensordot, cross, cdist', function()
    check(function(a, b) return lunet.einsum('bij,bjk->bik', a, b) end, { r64(2, 2, 3), r64(2, 3, 2) })
    check(function(a) return lunet.einsum('iij->j', a) end, { r64(3, 3, 2) })
    check(function(a, b) return lunet.tensordot(a, b, 1) end, { r64(2, 3), r64(3, 2) })
    check(function(a, b) return lunet.cross(a, b, 2) end, { r64(2, 3), r64(2, 3) })
    check(function(a, b) return lunet.cdist(a, b, 1.5) end, { r64(3, 2), r64(2, 2) })
  end)
  it('diagonal, diag, repeat_interleave, the index ops', function()
    check(function(a) return a:diagonal(-1, 2, 1) end, { r64(3, 4) })
    check(function(a) return lunet.diag(a, 1) end, { r64(3) })
    check(function(a) return a:repeat_interleave(long{ 1, 0, 2 }, 1) end, { r64(3, 2) })
    check(function(a, b) return a:index_copy(1, long{ 2 }, b) end, { r64(3, 2), r64(1, 2) })
    check(function(a, b) return a:scatter(1, long{ { 3, 1 } }, b) end, { r64(3, 2), r64(1, 2) })
    check(function(a, b) return a:scatter_add(2, long{ { 1, 1 } }, b) end, { r64(1, 2), r64(1, 2) })
    check(function(a) return a:take_along_dim(long{ { 2 }, { 1 } }, 2) end, { r64(2, 3) })
  end)
end)

describe('worked examples', function()
  it('einsum: implicit output, list of operands, empty and 0-d', function()
    local a, b = lunet.randn(2, 3), lunet.randn(3, 4)
    assert.is_true(maxdiff(lunet.einsum('ij,jk', { a, b }), a:matmul(b)) < 1e-5)
    assert.same({ 0, 4 }, lunet.einsum('ij,jk->ik', lunet.zeros(0, 3), b):size())
    assert.equal(6, lunet.einsum(',->', lunet.tensor(2), lunet.tensor(3)):item())
    assert.same({ 4, 2 }, lunet.einsum('ij->ji', lunet.randn(2, 4)):size())
  end)
  it('diagonal is a view; trace, diag of 2-d', function()
    local m = lunet.zeros(3, 3)
    m:diagonal():fill_(1)
    assert.same({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, m:totable())
    assert.equal(3, m:trace():item())
    assert.same({ 0 }, m:diagonal(5):size())
    assert.same({ 0, 0 }, lunet.diag(m, 1):totable())
    assert.equal('int64', long{ { 1, 2 }, { 3, 4 } }:trace().dtype)
  end)
  it('movedim, swapaxes, repeat_interleave, meshgrid', function()
    assert.same({ 4, 2, 3 }, lunet.randn(2, 3, 4):movedim(3, 1):size())
    assert.same({ 3, 2 }, lunet.randn(2, 3):swapaxes(1, 2):size())
    assert.same({ 3, 2 }, lunet.randn(2, 3):swapdims(2, 1):size())
    assert.same({ 1, 1, 2, 2 }, lunet.tensor{ 1, 2 }:repeat_interleave(2):totable())
    assert.same({ 2 }, lunet.tensor(7):repeat_interleave(2):size())
    assert.same({ 0 }, lunet.zeros(0):repeat_interleave(long{}):size())
    local g = lunet.meshgrid({ lunet.tensor{ 1, 2 }, lunet.tensor{ 3, 4, 5 } })
    assert.same({ { 1, 1, 1 }, { 2, 2, 2 } }, g[1]:totable())
  end)
  it('in-place index ops, recorded', function()
    local x = lunet.zeros(2, 3)
    x:index_add_(2, long{ 1, 1 }, lunet.ones(2, 2))
    assert.same({ { 2, 0, 0 }, { 2, 0, 0 } }, x:totable())
    x:index_fill_(1, { 2 }, 9)
    assert.same({ { 2, 0, 0 }, { 9, 9, 9 } }, x:totable())
    x:scatter_(2, long{ { 3 }, { 1 } }, 5)
    assert.same({ { 2, 0, 5 }, { 5, 9, 9 } }, x:totable())
    x:index_copy_(2, long{ 2 }, lunet.tensor{ { 1 }, { 1 } })
    assert.same({ { 2, 1, 5 }, { 5, 1, 9 } }, x:totable())
    local w = lunet.randn({ 2, 3 }, { requires_grad = true })
    local y = w * 1
    y:index_fill_(2, { 1 }, 0)
    y:sum():backward()
    assert.same({ { 0, 1, 1 }, { 0, 1, 1 } }, w.grad:totable())
  end)
  it('take and take_along_dim on non-contiguous input', function()
    local x = lunet.arange(6):view(2, 3):t()
    assert.same({ 0, 3, 1 }, x:take(long{ 1, 2, 3 }):totable())
    assert.same({ { 3 }, { 1 }, { 5 } }, x:take_along_dim(long{ { 2 }, { 1 }, { 2 } }, 2):totable())
  end)
end)

describe('errors', function()
  local x = lunet.randn(3, 4)
  it('einsum and tensordot', function()
    assert.matches('einsum: "ij,jk" has 2 operands but 1', err_of(lunet.einsum, 'ij,jk', x))
    assert.matches('einsum: operand 1 has 2 dims but the subscripts "ijk" name 3', err_of(lunet.einsum, 'ijk', x))
    assert.matches('einsum: subscript j has size 4 in one operand and 3', err_of(lunet.einsum, 'ij,jk', x, x))
    assert.matches('einsum: output subscript z appears in no operand', err_of(lunet.einsum, 'ij->z', x))
    assert.matches('einsum: invalid subscript "1"', err_of(lunet.einsum, 'i1', x))
    assert.matches('einsum: equation must be a string', err_of(lunet.einsum, x))
    assert.matches('tensordot: contracted dims differ in size', err_of(lunet.tensordot, x, x, 1))
    assert.matches('tensordot: dim 5 out of range', err_of(lunet.tensordot, x, x, { { 5 }, { 1 } }))
  end)
  it('dims out of range, shape mismatch, index out of range', function()
    assert.matches('diagonal: dim 3 out of range for a 2%-d tensor', err_of(x.diagonal, x, 0, 1, 3))
    assert.matches('diagonal: dim1 and dim2 must be different', err_of(x.diagonal, x, 0, 1, 1))
    assert.matches('diag: input must be 1%-d or 2%-d', err_of(lunet.diag, lunet.randn(2, 2, 2)))
    assert.matches('trace: input must be 2%-d', err_of(x.trace, lunet.randn(3)))
    assert.matches('movedim: dim 4 out of range', err_of(x.movedim, x, 4, 1))
    assert.matches('repeat_interleave: repeats must have 3 elements', err_of(x.repeat_interleave, x, long{ 1, 2 }, 1))
    assert.matches('repeat_interleave: repeats must be non%-negative', err_of(x.repeat_interleave, x, long{ 1, -1, 1 }, 1))
    assert.matches('meshgrid: indexing must be', err_of(lunet.meshgrid, x, { indexing = 'yx' }))
    assert.matches("meshgrid: unknown option", err_of(lunet.meshgrid, lunet.ones(2), { index = 'ij' }))
    assert.matches('cross: dim 2 must have size 3', err_of(lunet.cross, x, x, 2))
    assert.matches('cdist: x1 and x2 must have the same number of columns', err_of(lunet.cdist, x, lunet.randn(2, 3)))
    assert.matches('index_add: index 5 is out of range', err_of(x.index_add, x, 1, long{ 5 }, lunet.ones(1, 4)))
    assert.matches('index_add: source must have shape {1,4}', err_of(x.index_add, x, 1, long{ 1 }, lunet.ones(2, 4)))
    assert.matches("index_add: unknown option 'beta'", err_of(x.index_add, x, 1, long{ 1 }, lunet.ones(1, 4), { beta = 1 }))
    assert.matches('index_copy: dim 3 out of range', err_of(x.index_copy, x, 3, long{ 1 }, x))
    assert.matches('index_fill: index must be an int64', err_of(x.index_fill, x, 1, lunet.ones(1), 0))
    assert.matches("scatter: reduce = 'multiply' is not supported",
      err_of(x.scatter, x, 1, long{ { 1 } }, x, { reduce = 'multiply' }))
    assert.matches('scatter: index 9 is out of range', err_of(x.scatter, x, 1, long{ { 9 } }, 1))
    assert.matches('take: index 13 is out of range', err_of(x.take, x, long{ 13 }))
    -- a position named twice: a sum for index_add and scatter_add, one fill for a number, else an error
    assert.matches('index_copy: index names the same position more than once',
      err_of(x.index_copy, x, 1, long{ 2, 2 }, lunet.ones(2, 4)))
    assert.matches('scatter: index names the same position more than once',
      err_of(x.scatter, x, 1, long{ { 1 }, { 1 } }, lunet.ones(2, 1)))
    assert.equal(2, lunet.zeros(3, 4):index_add(1, long{ 2, 2 }, lunet.ones(2, 4)):select(1, 2):min():item())
    assert.equal(5, x:scatter(1, long{ { 1 }, { 1 } }, 5):select(1, 1):select(1, 1):item())
    assert.matches('take_along_dim: indices must have as many dims', err_of(x.take_along_dim, x, long{ 1 }, 1))
  end)
end)
