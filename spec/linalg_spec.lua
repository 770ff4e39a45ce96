-- lunet.linalg against PyTorch 1.13: results and float64 gradients from
-- spec/fixtures/linalg.safetensors (tools/gen_linalg_fixtures.py), outputs
-- whose signs LAPACK leaves free compared squared (their squares'
-- gradients too); then finite-difference gradchecks, views, empty inputs,
-- the Tensor methods, and the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local linalg = lunet.linalg

local fx, cases = fixtures.load_fixture('linalg')
local INF = math.huge

local function arg_of(v)
  if v == 'inf' then return INF elseif v == '-inf' then return -INF end
  return v
end

-- the case's outputs (a list) for its inputs
local function call(case, ins)
  local op = case.op
  if op == 'multi_dot' then return { linalg.multi_dot(ins) } end
  if op == 'lstsq_residuals' then return { (select(2, linalg.lstsq(ins[1], ins[2]))) } end
  local all = {}
  for i = 1, #ins do all[i] = ins[i] end
  for _, a in ipairs(case.args) do all[#all + 1] = arg_of(a) end
  local outs = { linalg[op](unpack(all, 1, #all)) }
  if op == 'qr' and case.args[1] and case.args[1].mode == 'r' then table.remove(outs, 1) end
  if op == 'lstsq' then outs = { outs[1] } end
  return outs
end

local function is_in(list, j)
  for _, v in ipairs(list) do if v == j then return true end end
  return false
end

local function tol(t) return t.dtype == 'float32' and 1e-4 or 1e-9 end

describe('linalg against PyTorch 1.13', function()
  for _, case in ipairs(cases) do
    it(case.name, function()
      local ins = {}
      local grad = #case.diff > 0
      for k = 1, case.n do
        local x = fx[case.name .. '.i' .. k]:clone()
        if grad then x.requires_grad = true end
        ins[k] = x
      end
      local outs = call(case, ins)
      assert.equal(case.outs, #outs)
      local loss
      for j = 1, case.outs do
        local want, got = fx[case.name .. '.o' .. j], outs[j]
        local what = ('%s output %d'):format(case.name, j)
        assert.equal(want.dtype, got.dtype, what)
        assert.same(want:size(), got:size(), what)
        local sq = is_in(case.sq, j)
        local w, gv = want, got:detach()
        if sq then w, gv = want * want, gv * gv end
        if w:numel() > 0 and w:is_floating_point() then
          local m = fixtures.maxdiff(gv, w)
          assert.is_true(m <= tol(want) * math.max(1, w:abs():max():item()), what .. ': off by ' .. m)
        elseif w:numel() > 0 then
          assert.is_true(gv:equal(w), what)
        end
        if is_in(case.diff, j) then
          local d = fx[case.name .. '.d' .. j]
          local term = ((sq and got * got or got) * d):sum()
          loss = loss and loss + term or term
        end
      end
      if loss and not loss.requires_grad then   -- (matrix_power(A, 0): torch's gradient is zeros)
        for k = 1, case.n do assert.equal(0, fx[case.name .. '.g' .. k]:abs():max():item()) end
      elseif loss then
        loss:backward()
        for k = 1, case.n do
          local want = fx[case.name .. '.g' .. k]
          local got = ins[k].grad or want * 0
          local m = fixtures.maxdiff(got, want)
          assert.is_true(m <= 1e-7 * math.max(1, want:abs():max():item()),
            ('%s gradient %d: off by %g'):format(case.name, k, m))
        end
      end
    end)
  end
end)

local function rand(...) local s = { ... }; return lunet.randn(s, { dtype = 'float64' }) end
local function rq(...) return rand(...):requires_grad_() end
local function check(f, ins, opts)
  local ok, msg = gradcheck(f, ins, opts)
  assert.is_true(ok, msg)
end

describe('linalg gradchecks (finite differences)', function()
  lunet.manual_seed(7)
  it('det, slogdet, inv, solve', function()
    check(linalg.det, { rq(2, 3, 3) })
    check(function(a) return select(2, linalg.slogdet(a)) end, { rq(3, 3) })
    check(linalg.inv, { rq(3, 3) })
    check(linalg.solve, { rq(2, 3, 3), rq(3, 2) })
    check(linalg.solve, { rq(3, 3), rq(3) })
  end)
  it('det of a singular matrix', function()
    local a = lunet.tensor({ { 1, 2, 3 }, { 2, 4, 6 }, { 1, 0, 1 } }, { dtype = 'float64' }):requires_grad_()
    check(linalg.det, { a })
  end)
  it('cholesky, qr, eigh', function()
    local function spd(x) return x:matmul(x:t()) + lunet.eye(3, { dtype = 'float64' }) * 3 end
    check(function(x) return linalg.cholesky(spd(x)) end, { rq(3, 3) })
    check(function(x) return linalg.cholesky(spd(x), { upper = true }) end, { rq(3, 3) })
    check(function(x) local q, r = linalg.qr(x); return q * q + (r * r):sum() end, { rq(4, 3) })
    check(function(x) local q, r = linalg.qr(x); return q * q + (r * r):sum() end, { rq(2, 4) })
    check(function(x) local w, v = linalg.eigh(x + x:t()); return v * v + w:sum() end, { rq(4, 4) })
  end)
  it('svd, svdvals, pinv, norms', function()
    check(linalg.svdvals, { rq(4, 3) })
    check(function(x) local u, s, vh = linalg.svd(x, { full_matrices = false }); return u * u + (vh * vh):sum() + s:sum() end,
      { rq(3, 5) })
    check(function(x) local u, s, vh = linalg.svd(x); return (u * u):sum() + vh * vh + s:sum() end, { rq(5, 3) })
    check(linalg.pinv, { rq(4, 3) })
    check(function(x) return linalg.vector_norm(x, 3, 2) end, { rq(3, 4) })
    check(function(x) return linalg.matrix_norm(x, 'nuc') end, { rq(3, 4) })
    check(function(x) return linalg.matrix_norm(x, -1) end, { rq(3, 4) })
    check(function(x) return linalg.matrix_power(x, -3) end, { rq(3, 3) })
  end)
end)

describe('linalg details', function()
  it('takes views and batches', function()
    local a = rand(4, 3, 3)
    local v = a:transpose(2, 3)
    assert.is_false(v:is_contiguous())
    assert.is_true(fixtures.maxdiff(linalg.det(v), linalg.det(a)) < 1e-12)
    local inv = linalg.inv(v)
    assert.is_true(fixtures.maxdiff(inv:matmul(v), lunet.eye(3, { dtype = 'float64' }):expand(4, 3, 3)) < 1e-10)
    local s = rand(3, 3)
    s = s + s:t()
    local w, V = linalg.eigh(s:narrow(1, 1, 3))
    assert.is_true(fixtures.maxdiff((V * w:unsqueeze(1)):matmul(V:t()), s) < 1e-10)
  end)
  it('handles empty inputs', function()
    assert.equal(1, linalg.det(rand(0, 0)):item())
    assert.same({ 0, 3, 3 }, linalg.inv(rand(0, 3, 3)):size())
    local u, s, vh = linalg.svd(rand(0, 3))
    assert.same({ 0, 0 }, u:size())
    assert.same({ 0 }, s:size())
    assert.same({ 3, 3 }, vh:size())
    assert.equal(0, linalg.vector_norm(rand(0)):item())
  end)
  it('the 2-norm of zeros has a zero gradient', function()
    local x = lunet.zeros(3, { dtype = 'float64' }):requires_grad_()
    linalg.vector_norm(x):backward()
    assert.equal(0, x.grad:abs():sum():item())
  end)
  it('has the Tensor methods torch has', function()
    local a = rand(3, 3)
    assert.is_true(math.abs(a:det():item() - linalg.det(a):item()) < 1e-12)
    assert.is_true(math.abs(lunet.det(a):item() - linalg.det(a):item()) < 1e-12)
    assert.is_true(fixtures.maxdiff(a:inverse(), linalg.inv(a)) < 1e-12)
    assert.is_true(fixtures.maxdiff(a:matrix_power(3), a:matmul(a):matmul(a)) < 1e-12)
    assert.is_true(fixtures.maxdiff(a:pinverse(), linalg.inv(a)) < 1e-9)
    local s, la = a:slogdet()
    if s:item() > 0 then assert.is_true(math.abs(a:logdet():item() - la:item()) < 1e-12)
    else assert.is_true(a:logdet():item() ~= a:logdet():item()) end
  end)
end)

describe('linalg errors', function()
  local err = fixtures.err_of
  it('names the function and the problem', function()
    assert.matches('linalg.det: A must be a tensor', err(linalg.det, 3))
    assert.matches('linalg.inv: A must be float32 or float64, got int64', err(linalg.inv, lunet.zeros(2, 2, { dtype = 'int64' })))
    assert.matches('linalg.det: A must be a batch of square matrices', err(linalg.det, rand(2, 3)))
    assert.matches('linalg.det: A must have at least 2 dimensions', err(linalg.det, rand(3)))
    assert.matches('linalg.inv: the input is singular', err(linalg.inv, lunet.zeros(2, 2, { dtype = 'float64' })))
    assert.matches('batch element 1', err(linalg.inv, lunet.stack({ lunet.eye(2), lunet.zeros(2, 2) })))
    assert.matches('linalg.solve: the input is singular', err(linalg.solve, lunet.zeros(2, 2), lunet.ones(2)))
    assert.matches('linalg.solve: A is 3 by 3 but B has 2 rows', err(linalg.solve, rand(3, 3), rand(2, 2)))
    assert.matches('do not broadcast', err(linalg.solve, rand(2, 3, 3), rand(4, 3, 1)))
    assert.matches('same dtype', err(linalg.solve, rand(3, 3), lunet.ones(3)))
    local npd = lunet.tensor({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, -1 } })
    assert.matches('linalg.cholesky: the input is not positive%-definite %(the leading minor of order 3%)',
      err(linalg.cholesky, npd))
    assert.matches("linalg.cholesky: unknown option 'uper'", err(linalg.cholesky, npd, { uper = true }))
    assert.matches('linalg.qr: mode', err(linalg.qr, rand(3, 3), { mode = 'full' }))
    assert.matches("linalg.eigh: unknown option", err(linalg.eigh, rand(3, 3), { uplo = 'L' }))
    assert.matches('linalg.svd: unknown option', err(linalg.svd, rand(3, 3), { some = true }))
    assert.matches('linalg.matrix_norm: ord must be', err(linalg.matrix_norm, rand(3, 3), 3))
    assert.matches('linalg.vector_norm: dim 3 out of range', err(linalg.vector_norm, rand(3, 3), 2, 3))
    assert.matches('linalg.vector_norm: input must be a floating%-point tensor', err(linalg.vector_norm, lunet.ones(2, { dtype = 'int64' })))
    assert.matches('linalg.matrix_power: n must be an integer', err(linalg.matrix_power, rand(2, 2), 0.5))
    assert.matches('linalg.multi_dot: expected at least 2 tensors', err(linalg.multi_dot, { rand(2, 2) }))
    assert.matches('linalg.multi_dot: tensors 1 and 2 cannot be multiplied', err(linalg.multi_dot, { rand(2, 3), rand(2, 2) }))
    assert.matches("linalg.qr: the derivative of linalg.qr depends on Q", err(function()
      local _, r = linalg.qr(rand(3, 3):requires_grad_(), { mode = 'r' })
      r:sum():backward()
    end))
    assert.matches("not differentiable when mode = 'complete'", err(function()
      local q = linalg.qr(rand(4, 3):requires_grad_(), { mode = 'complete' })
      q:sum():backward()
    end))
  end)
end)
