-- torch 1.13's remaining Tensor members (lunet.tensor_gaps, tensor_random,
-- tensor_gaps_math): values and float64 gradients against PyTorch from
-- spec/fixtures/tensor_gaps.safetensors (tools/gen_tensor_gaps_fixtures.py),
-- finite differences, the random fills' statistics under a fixed seed, fields,
-- resizing, the linalg aliases' conventions, errors.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local fx = require 'support.fixtures'
local F = lunet.nn.functional

local data, cases = fx.load_fixture('tensor_gaps')
local function get(c, k) return data[c.name .. '.' .. k] end
local function d(...) return lunet.randn(...):double() end

-- the case's op on float64 inputs (in: name -> tensor)
local function run(c, i)
  local o, op = c.opts, c.op
  if op == 'kron' then return i.a:kron(i.b)
  elseif op == 'cov' then return i.x:cov({ correction = o.correction, fweights = i.fw, aweights = i.aw })
  elseif op == 'corrcoef' then return lunet.corrcoef(i.x)
  elseif op == 'diag_embed' then return i.x:diag_embed(o.offset, o.dim1, o.dim2)
  elseif op == 'diagflat' then return i.x:diagflat(o.offset)
  elseif op == 'diagonal_scatter' then return i.x:diagonal_scatter(i.src, o.offset)
  elseif op == 'select_scatter' then return i.x:select_scatter(i.src, o.dim, o.index)
  elseif op == 'slice_scatter' then return i.x:slice_scatter(i.src, o.dim, o.first, o.last, o.step)
  elseif op == 'as_strided_scatter' then return i.x:as_strided_scatter(i.src, o.size, o.stride, o.offset)
  elseif op == 'scatter_reduce' then return i.x:scatter_reduce(o.dim, i.index, i.src, o.reduce, { include_self = o.include_self })
  elseif op == 'index_reduce' then return i.x:index_reduce(o.dim, i.index, i.src, o.reduce, { include_self = o.include_self })
  elseif op == 'i0' then return i.x:i0()
  elseif op == 'mvlgamma' then return i.x:mvlgamma(o.p)
  elseif op == 'ldexp' then return i.x:ldexp(i.e)
  elseif op == 'matrix_exp' then return i.x:matrix_exp()
  elseif op == 'cholesky_inverse' then return i.u:cholesky_inverse({ upper = o.upper })
  elseif op == 'cholesky_solve' then return i.b:cholesky_solve(i.u)
  elseif op == 'triangular_solve' then return (i.b:triangular_solve(i.A, o)) end
end

describe('tensor gaps against torch 1.13', function()
  it('values and float64 gradients', function()
    local n = 0
    for _, c in ipairs(cases) do
      local ins, keys = {}, {}
      for k, v in pairs(data) do
        local key = k:match('^' .. c.name:gsub('%p', '%%%0') .. '%.(.+)$')
        if key and key ~= 'out' and key ~= 'dout' and not key:match('^d') and key ~= 'exponent' and key ~= 'indices'
          and key ~= 'edges' then
          ins[key] = v:is_floating_point() and v:double():requires_grad_() or v
          keys[#keys + 1] = key
        end
      end
      local out = run(c, ins)
      if out then
        n = n + 1
        local want = get(c, 'out')
        local tol = 1e-10 * math.max(1, want:abs():max():item())
        assert.is_true(fx.maxdiff(out, want) <= tol, c.name .. ': ' .. fx.maxdiff(out, want))
        if get(c, 'dout') and out.requires_grad then
          (out * get(c, 'dout'):double()):sum():backward()
          for _, k in ipairs(keys) do
            if get(c, 'd' .. k) then
              assert.is_true(fx.maxdiff(ins[k].grad, get(c, 'd' .. k)) <= tol, c.name .. ' d' .. k)
            end
          end
        end
      end
    end
    assert.is_true(n >= 30)
  end)
  it('float32 results stay float32 and near', function()
    for _, c in ipairs(cases) do
      if c.op == 'kron' or c.op == 'cov' or c.op == 'i0' or c.op == 'diag_embed' or c.op == 'scatter_reduce' then
        local ins = {}
        for _, k in ipairs({ 'a', 'b', 'x', 'fw', 'aw', 'src', 'index' }) do ins[k] = get(c, k) end
        local out = run(c, ins)
        assert.equal('float32', out.dtype, c.name)
        assert.is_true(fx.rel(out, get(c, 'out'):float()) < 1e-5, c.name)
      end
    end
  end)
  it('frexp, nextafter, histogram, mode', function()
    for _, c in ipairs(cases) do
      if c.op == 'frexp' then
        local m, e = get(c, 'x'):frexp()
        assert.equal('int32', e.dtype)
        assert.same(get(c, 'exponent'):totable(), e:totable())
        local fin = m:isfinite()
        assert.equal(0, fx.maxdiff(m:where(fin, 0), get(c, 'out'):where(fin, 0)))
        assert.same(get(c, 'out'):isinf():totable(), m:isinf():totable())
        local m64, e64 = get(c, 'x'):double():frexp()
        assert.same(get(c, 'exponent'):totable(), e64:totable())
        assert.equal('float64', m64.dtype)
      elseif c.op == 'nextafter' then
        local r = get(c, 'x'):nextafter(get(c, 'y'))
        local want = get(c, 'out')
        assert.same(want:isnan():totable(), r:isnan():totable())
        assert.equal(0, fx.maxdiff(r:where(want:isnan():logical_not(), 0), want:where(want:isnan():logical_not(), 0)))
      elseif c.op == 'histogram' then
        local o = c.opts
        local h, e
        if get(c, 'bins') then h, e = get(c, 'x'):histogram(get(c, 'bins'), { weight = get(c, 'weight') })
        else h, e = get(c, 'x'):histogram(o.bins, { range = o.range, density = o.density }) end
        assert.is_true(fx.maxdiff(h, get(c, 'out')) < 1e-5, c.name)
        assert.is_true(fx.maxdiff(e, get(c, 'edges')) < 1e-6, c.name)
      elseif c.op == 'mode' then
        local v, i = get(c, 'x'):mode(c.opts.dim, c.opts.keepdim)
        assert.same(get(c, 'out'):totable(), v:totable())
        assert.same(get(c, 'indices'):totable(), i:totable())
      end
    end
    local h, e = lunet.tensor({ 2, 2 }):histogram(2)
    assert.same({ 0, 2 }, h:totable()); assert.same({ 1.5, 2, 2.5 }, e:totable())
    local v, i = lunet.tensor({ 2, 2, 1, 1, 1, 2 }):mode()
    assert.equal(1, v:item()); assert.equal(5, i:item())
  end)
  it('gradchecks', function()
    local A = d(3, 3) * 0.7
    assert.is_true(gradcheck(function(x) return x:matrix_exp() end, { A:requires_grad_() }))
    assert.is_true(gradcheck(function(x) return x:i0() end, { (d(6) * 8):requires_grad_() }))
    assert.is_true(gradcheck(function(x, y) return x:kron(y) end, { d(2, 2):requires_grad_(), d(3):requires_grad_() }))
    assert.is_true(gradcheck(function(x) return x:corrcoef() end, { d(2, 5):requires_grad_() }))
    assert.is_true(gradcheck(function(x, s) return x:as_strided_scatter(s, { 2, 2 }, { 3, 1 }, 1) end,
      { d(6):requires_grad_(), d(2, 2):requires_grad_() }))
    assert.is_true(gradcheck(function(x, s) return x:diagonal_scatter(s, -1, 2, 1) end,
      { d(3, 4):requires_grad_(), d(3):requires_grad_() }))
    assert.is_true(gradcheck(function(x) return x:diag_embed(-1, 3, 1) end, { d(2, 3):requires_grad_() }))
    assert.is_true(gradcheck(function(x, s) return x:slice_scatter(s, 1, 1, 3, 2) end,
      { d(3, 2):requires_grad_(), d(2, 2):requires_grad_() }))
  end)
end)

describe('tensor gap fields and methods', function()
  it('T, is_cpu, is_cuda, get_device, data, retains_grad', function()
    local x = lunet.randn(2, 3, 4)
    assert.same({ 4, 3, 2 }, x.T:size())
    assert.same({ 3, 2 }, lunet.randn(2, 3).T:size())
    assert.same({ 5 }, lunet.randn(5).T:size())
    assert.is_true(x.is_cpu); assert.is_false(x.is_cuda); assert.equal(-1, x:get_device())
    local w = lunet.randn(3):requires_grad_()
    local dd = w.data
    assert.is_false(dd.requires_grad); assert.is_true(dd:is_same_storage(w))
    local y = w * 2
    assert.is_false(y.retains_grad)
    y:retain_grad()
    assert.is_true(y.retains_grad); assert.is_false(w.retains_grad)
  end)
  it('new, resize_, resize_as_, repeat', function()
    local x = lunet.randn(2, 2):double()
    assert.same({ 3, 1 }, x:new(3, 1):size()); assert.equal('float64', x:new(3, 1).dtype)
    assert.same({ 0 }, x:new():size())
    assert.same({ 5, 6 }, x:new({ 5, 6 }):totable())
    local y = lunet.arange(1, 7):double()
    assert.equal(y, y:resize_(2, 2))
    assert.same({ { 1, 2 }, { 3, 4 } }, y:totable())
    y:resize_({ 2, 3 })
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, y:totable())   -- (the storage kept its elements)
    y:resize_(3, 3)
    assert.same({ 1, 2, 3 }, y[1]:totable())
    y:resize_as_(lunet.zeros(4))
    assert.same({ 1, 2, 3, 4 }, y:totable())
    assert.matches('resize_: cannot resize a tensor that requires grad', fx.err_of(function() lunet.zeros(2):requires_grad_():resize_(3) end))
    assert.matches('resize_: cannot resize a view', fx.err_of(function() lunet.zeros(2, 3):t():resize_(3) end))
    assert.matches('resize_: sizes must be integers', fx.err_of(function() lunet.zeros(2):resize_(-1) end))
    local z = lunet.tensor({ { 1, 2 } })
    assert.same({ { 1, 2, 1, 2 }, { 1, 2, 1, 2 } }, z['repeat'](z, 2, 2):totable())
    assert.same({ 2, 1, 4 }, z:repeat_tensor(2, 1, 2):size())
    assert.matches('repeat: 1 repetitions given for a 2%-d tensor', fx.err_of(function() return z['repeat'](z, 2) end))
  end)
  it('in-place forms and aliases', function()
    local c = d(2, 2); local a, b = d(2, 3), d(3, 2)
    local want = c:addmm(a, b)
    assert.equal(c, c:addmm_(a, b)); assert.is_true(fx.maxdiff(c, want) < 1e-12)
    local p = lunet.tensor({ 1.5, 2.5 }):double()
    assert.is_true(fx.maxdiff(p:clone():polygamma_(1), p:polygamma(1)) < 1e-12)
    assert.is_true(fx.maxdiff(p:clone():float_power_(2), p * p) < 1e-12)
    assert.matches('float_power_: the result is float64', fx.err_of(function() lunet.ones(2):float_power_(2) end))
    local x = lunet.tensor({ -1, 0.3, 2 })
    assert.same(F.hardshrink(x, 0.5):totable(), x:hardshrink(0.5):totable())
    assert.same(F.prelu(x, lunet.tensor({ 0.1 })):totable(), x:prelu(lunet.tensor({ 0.1 })):totable())
    assert.equal(3, #lunet.randn(6):unsafe_split(2)); assert.equal(2, #lunet.randn(6):unsafe_chunk(2))
    local m = lunet.tensor({ 1, 2 }):double()
    assert.is_true(fx.maxdiff(m:clone():i0_(), m:i0()) == 0)
  end)
  it('linalg aliases keep torch conventions', function()
    local A = d(4, 3)
    local U, S, V = A:svd()
    assert.same({ 4, 3 }, U:size()); assert.same({ 3, 3 }, V:size())
    assert.is_true(fx.maxdiff(U:matmul(lunet.diag(S)):matmul(V:t()), A) < 1e-12)
    local U2, _, V2 = A:svd({ some = false })
    assert.same({ 4, 4 }, U2:size()); assert.same({ 3, 3 }, V2:size())
    local U3, S3, V3 = A:svd({ compute_uv = false })
    assert.equal(0, U3:abs():max():item()); assert.same({ 3, 3 }, V3:size()); assert.is_true(fx.maxdiff(S3, S) < 1e-12)
    local Q, R = A:qr()
    assert.same({ 4, 3 }, Q:size()); assert.is_true(fx.maxdiff(Q:matmul(R), A) < 1e-12)
    assert.same({ 4, 4 }, (A:qr({ some = false })):size())
    local M = A:t():matmul(A) + lunet.eye(3):double()
    local Lc, Uc = M:cholesky(), M:cholesky({ upper = true })
    assert.is_true(fx.maxdiff(Lc:matmul(Lc:t()), M) < 1e-12); assert.is_true(fx.maxdiff(Uc:t():matmul(Uc), M) < 1e-12)
    local B = d(3, 2)
    local X, Acopy = B:triangular_solve(Uc)
    assert.is_true(fx.maxdiff(Uc:matmul(X), B) < 1e-12); assert.is_false(Acopy:is_same_storage(Uc))
    assert.is_true(fx.maxdiff(lunet.zeros(2, 2):double():matrix_exp(), lunet.eye(2):double()) == 0)
    assert.matches('matrix_exp: needs square matrices', fx.err_of(function() d(2, 3):matrix_exp() end))
    assert.matches("cholesky: unknown option 'uper'", fx.err_of(function() M:cholesky({ uper = true }) end))
  end)
end)

describe('tensor gap math: edges and errors', function()
  it('empty, 0-d and non-contiguous inputs', function()
    assert.same({ 0, 0 }, lunet.zeros(0):diag_embed():size())
    assert.same({ 6, 4 }, lunet.randn(2, 3):t():kron(lunet.randn(2, 2)):size())
    local x = d(3, 4)
    assert.is_true(fx.maxdiff(x:t():kron(x), x:t():contiguous():kron(x)) == 0)
    assert.equal(0, lunet.tensor(3.0):mode():item() - 3)
    local s = d(3)
    local ds = x:diagonal_scatter(s, -1, 2, 1)
    assert.equal(0, fx.maxdiff(ds:diagonal(-1, 2, 1), s))
    assert.equal(0, fx.maxdiff(ds:diagonal_scatter(x:diagonal(-1, 2, 1), -1, 2, 1), x))   -- (the rest is x's)
    local h = lunet.zeros(0):histogram(3)
    assert.same({ 0, 0, 0 }, h:totable())
    assert.same({}, lunet.tensor({ 1, 2, 4 }):cov():size())
    local m, e = lunet.zeros(0):frexp()
    assert.equal(0, m:numel()); assert.equal(0, e:numel())
  end)
  it('errors name the function', function()
    local x = lunet.randn(3, 4)
    local idx = lunet.ones(3, 4, { dtype = 'int64' })
    -- (amax and index_reduce's prod: lunet.tensor_scatter_reduce's kernel; spec/tensor_scatter_reduce_spec.lua)
    local am = x:scatter_reduce(1, idx, x, 'amax')
    assert.equal(0, fx.maxdiff(am[1], x:amax(1)))
    assert.equal(0, fx.maxdiff(am:narrow(1, 2, 2), x:narrow(1, 2, 2)))
    assert.matches("scatter_reduce: unknown reduce 'max'", fx.err_of(function() x:scatter_reduce(1, idx, x, 'max') end))
    assert.matches("scatter_reduce: unknown option 'include'", fx.err_of(function() x:scatter_reduce(1, idx, x, 'sum', { include = 1 }) end))
    local src = lunet.randn(4, 4)
    local pr = x:index_reduce(1, idx[1], src, 'prod')
    assert.is_true(fx.maxdiff(pr[1], x[1] * src:prod(1)) < 1e-5)
    assert.matches('index_reduce: source must have shape', fx.err_of(function() x:index_reduce(1, idx[1], x, 'prod') end))
    assert.matches('cov: input must have at most 2 dims', fx.err_of(function() lunet.randn(2, 2, 2):cov() end))
    assert.matches('cov: fweights must be 1%-d with 4 elements', fx.err_of(function() x:cov({ fweights = lunet.ones(3, { dtype = 'int64' }) }) end))
    assert.matches("cov: unknown option 'weights'", fx.err_of(function() x:cov({ weights = 1 }) end))
    assert.matches('diag_embed: dim1 and dim2 cannot be the same', fx.err_of(function() x:diag_embed(0, 1, 1) end))
    assert.matches('select_scatter: src must have the shape', fx.err_of(function() x:select_scatter(lunet.ones(3), 1, 1) end))
    assert.matches('slice_scatter: src must have the shape', fx.err_of(function() x:slice_scatter(lunet.ones(3, 3), 2) end))
    assert.matches('diagonal_scatter: src must have the shape', fx.err_of(function() x:diagonal_scatter(lunet.ones(4)) end))
    assert.matches('mvlgamma: all elements must be greater than', fx.err_of(function() lunet.tensor({ 0.9 }):mvlgamma(3) end))
    assert.matches('mvlgamma: p must be an integer >= 1', fx.err_of(function() x:mvlgamma(0) end))
    assert.matches('frexp: needs a float tensor', fx.err_of(function() lunet.ones(2, { dtype = 'int64' }):frexp() end))
    assert.matches('nextafter: needs two float32 or two float64', fx.err_of(function() x:nextafter(x:double()) end))
    assert.matches('histogram: bins must be an integer >= 1', fx.err_of(function() x:histogram(0) end))
    assert.matches("histogram: unknown option 'ranges'", fx.err_of(function() x:histogram(3, { ranges = { 0, 1 } }) end))
    assert.matches('histogram: range must be', fx.err_of(function() x:histogram(3, { range = { 1, 0 } }) end))
    assert.matches('mode: cannot take the mode of an empty dim', fx.err_of(function() lunet.zeros(2, 0):mode(2) end))
    assert.matches('mode: dim 3 out of range', fx.err_of(function() x:mode(3) end))
    assert.matches('kron: other must be a tensor', fx.err_of(function() x:kron(2) end))
  end)
end)

describe('random fills', function()
  local N = 20000
  local function stats(t) local f = t:double(); return f:mean():item(), f:var():item(), f:min():item(), f:max():item() end
  it('match their distributions (fixed seed)', function()
    lunet.manual_seed(7)
    local m, v, lo = stats(lunet.empty(N):exponential_(2))
    assert.is_true(math.abs(m - 0.5) < 0.02 and math.abs(v - 0.25) < 0.03 and lo >= 0)
    local c = lunet.empty(N):cauchy_(1, 2)
    assert.is_true(math.abs(c:median():item() - 1) < 0.1)
    assert.is_true(math.abs(c:lt(3):double():mean():item() - 0.75) < 0.02)   -- (median + sigma: the 3/4 quantile)
    local ln = lunet.empty(N):double():log_normal_(0.5, 0.25):log()
    assert.is_true(math.abs(ln:mean():item() - 0.5) < 0.01 and math.abs(ln:std():item() - 0.25) < 0.01)
    local g = lunet.empty(N):geometric_(0.25)
    m, v, lo = stats(g)
    assert.is_true(math.abs(m - 4) < 0.1 and math.abs(v - 12) < 1 and lo == 1)
    assert.equal(0, (g - g:floor()):abs():max():item())
    local r = lunet.empty(N, { dtype = 'int32' }):random_(-2, 3)
    m, v, lo = stats(r)
    local _, _, _, hi = stats(r)
    assert.is_true(lo == -2 and hi == 2 and math.abs(m) < 0.05)
    _, _, lo, hi = stats(lunet.empty(N):random_(4))
    assert.is_true(lo == 0 and hi == 3)
    _, _, lo, hi = stats(lunet.empty(N, { dtype = 'uint8' }):random_())
    assert.is_true(lo == 0 and hi == 255)
    local p = lunet.rand(N)
    local b = p:bernoulli()
    assert.equal('float32', b.dtype)
    assert.is_true(math.abs(b:mean():item() - 0.5) < 0.02)
    assert.equal(0, lunet.zeros(100):bernoulli():sum():item()); assert.equal(100, lunet.ones(100):bernoulli():sum():item())
    assert.is_true(math.abs(lunet.empty(N):bernoulli(0.2):mean():item() - 0.2) < 0.01)
    assert.same({ 0, 1, 1 }, lunet.empty(3):bernoulli_(lunet.tensor({ 0, 1, 1 })):totable())
  end)
  it('multinomial', function()
    lunet.manual_seed(3)
    local probs = lunet.tensor({ 0.1, 0, 0.6, 0.3 })
    local s = lunet.multinomial(probs, N, { replacement = true })
    assert.equal('int64', s.dtype); assert.same({ N }, s:size())
    local counts = lunet.bincount(s, { minlength = 5 }):double() / N
    assert.equal(0, counts[1]:item() + counts[3]:item())   -- (no 0, and never the 0-probability 2)
    assert.is_true(math.abs(counts[4]:item() - 0.6) < 0.02 and math.abs(counts[5]:item() - 0.3) < 0.02)
    local w = probs:multinomial(3)
    local seen = {}
    for _, v in ipairs(w:totable()) do assert.is_nil(seen[v]); seen[v] = true; assert.is_true(v ~= 2) end
    -- without replacement the first draw follows probs
    local firsts = lunet.zeros(4)
    for _ = 1, 400 do local k = lunet.multinomial(probs, 1):item(); firsts[k] = firsts[k]:item() + 1 end
    assert.is_true(math.abs(firsts[3]:item() / 400 - 0.6) < 0.1)
    local rows = lunet.multinomial(lunet.tensor({ { 1, 0 }, { 0, 1 } }), 4, { replacement = true })
    assert.same({ { 1, 1, 1, 1 }, { 2, 2, 2, 2 } }, rows:totable())
    assert.matches('multinomial: cannot sample 5 samples without replacement', fx.err_of(function() probs:multinomial(5) end))
    assert.matches('multinomial: cannot sample num_samples <= 0', fx.err_of(function() probs:multinomial(0) end))
    assert.matches('multinomial: probs contains inf, NaN or an element < 0', fx.err_of(function() lunet.tensor({ -1, 2 }):multinomial(1) end))
    assert.matches('multinomial: invalid distribution', fx.err_of(function() lunet.zeros(2):multinomial(1) end))
    assert.matches("multinomial: unknown option 'replace'", fx.err_of(function() probs:multinomial(1, { replace = true }) end))
    assert.matches('multinomial: probs must be 1%-d or 2%-d', fx.err_of(function() lunet.ones(2, 2, 2):multinomial(1) end))
  end)
  it('argument errors', function()
    local x = lunet.empty(3)
    assert.matches('exponential_: lambd must be > 0', fx.err_of(function() x:exponential_(0) end))
    assert.matches('cauchy_: sigma must be > 0', fx.err_of(function() x:cauchy_(0, -1) end))
    assert.matches('log_normal_: std must be > 0', fx.err_of(function() x:log_normal_(0, 0) end))
    assert.matches('geometric_: p must be in %(0, 1%)', fx.err_of(function() x:geometric_(1) end))
    assert.matches('geometric_: p is required', fx.err_of(function() x:geometric_() end))
    assert.matches('random_: expects from < to', fx.err_of(function() x:random_(3, 3) end))
    assert.matches('random_: to must be an integer', fx.err_of(function() x:random_(2.5) end))
    assert.matches('exponential_: needs a float tensor', fx.err_of(function() lunet.zeros(2, { dtype = 'int64' }):exponential_() end))
    assert.matches('bernoulli: probabilities must lie in', fx.err_of(function() lunet.tensor({ 2 }):bernoulli() end))
    assert.matches('bernoulli: p must be in', fx.err_of(function() x:bernoulli_(1.5) end))
    assert.matches('exponential_: a leaf tensor that requires grad', fx.err_of(function() lunet.zeros(2):requires_grad_():exponential_() end))
  end)
end)
