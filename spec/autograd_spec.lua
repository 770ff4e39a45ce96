-- Autograd: every differentiable op against central finite differences in
-- float64 (spec/gradcheck.lua), plus graph behaviour (accumulation, no_grad,
-- detach, retain_graph, broadcasting, leaves and non-leaves).
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'

local f64 = { dtype = 'float64' }
local function leaf(...)
  local t = lunet.randn(...)
  return t:to('float64'):requires_grad_()
end
local function pos(...)  -- positive values (log, sqrt, pow)
  return (lunet.rand(...):to('float64') + 0.5):requires_grad_()
end

local function check(f, inputs, opts)
  local ok, msg = gradcheck(f, inputs, opts)
  assert(ok, msg)
end

describe('autograd gradcheck (float64 finite differences)', function()
  lunet.manual_seed(1)

  it('unary ops', function()
    local x = leaf(3, 4)
    local p = pos(3, 4)
    for _, name in ipairs({ 'neg', 'exp', 'tanh', 'sigmoid', 'sin', 'cos', 'square', 'erf', 'abs', 'relu', 'expm1' }) do
      check(function(a) return a[name](a) end, { x })
    end
    for _, name in ipairs({ 'log', 'sqrt', 'rsqrt', 'reciprocal', 'log1p' }) do
      check(function(a) return a[name](a) end, { p })
    end
    check(function(a) return a:clamp(-0.5, 0.7) end, { x })
    check(function(a) return a:clamp(nil, 0.2) end, { x })
  end)

  it('binary ops with broadcasting and numbers on either side', function()
    local a, b, c = leaf(3, 4), leaf(4), leaf(3, 1)
    local p, q = pos(3, 4), pos(1, 4)
    check(function(a, b) return a + b end, { a, b })
    check(function(a, c) return a - c end, { a, c })
    check(function(a, b, c) return a * b * c end, { a, b, c })
    check(function(a, q) return a / q end, { a, q })
    check(function(p, q) return p:pow(q) end, { p, q })
    check(function(p) return p ^ 2.5 end, { p })
    check(function(q) return lunet.Tensor.pow(2, q) end, { q })
    check(function(a) return 3 - a * 2 + 1 end, { a })
    check(function(p) return 2 / p end, { p })
    check(function(a, b) return a:add(b, 0.3) end, { a, b })
    check(function(a, b) return a:sub(b, 2) end, { a, b })
    check(function(a, b) return a:maximum(b) end, { a, b })
    check(function(a, c) return a:minimum(c) end, { a, c })
  end)

  it('where', function()
    local a, b = leaf(3, 4), leaf(4)
    local cond = lunet.randn(3, 4):gt(0)
    check(function(a, b) return a:where(cond, b) end, { a, b })
    check(function(a, b) return lunet.where(cond, a, b) end, { a, b })
    check(function(a) return a:where(cond, 0.5) end, { a })          -- a Lua number beside
    check(function(b) return lunet.where(cond, -2, b) end, { b })
  end)

  it('prod, over all and over a dim, with zeros in the slices', function()
    check(function(a) return a:prod() end, { leaf(2, 3) })
    local z = lunet.tensor({ { 1.5, 0, -2 }, { 0.5, 0.7, 0 }, { 0, 0, 1.2 }, { -1, 2, 3 } }, { dtype = 'float64' })
    z:requires_grad_()
    check(function(x) return x:prod(2) end, { z })     -- slices with 0, 1 and 2 zeros
    check(function(x) return x:prod(1, true) end, { z })
    local one = lunet.tensor({ 1.5, 0, -2 }, { dtype = 'float64' }):requires_grad_()
    check(function(x) return x:prod() end, { one })
    one.grad = nil
    one:prod():backward()
    assert.same({ 0, -3, 0 }, one.grad:totable())    -- the product of the others
    assert.matches('prod: the gradient over several dims at once is not supported',
      select(2, pcall(function() return z:prod({ 1, 2 }) end)))
  end)

  it('matrix products', function()
    local a, b, v, w = leaf(3, 4), leaf(4, 5), leaf(4), leaf(3)
    check(function(a, b) return a:matmul(b) end, { a, b })
    check(function(a, v) return a:matmul(v) end, { a, v })
    check(function(w, a) return w:matmul(a) end, { w, a })
    check(function(v) return v:dot(v) end, { v })
    check(function(a, b) return a:mm(b) end, { a, b })
    local x, y = leaf(2, 3, 4), leaf(2, 4, 2)
    check(function(x, y) return x:bmm(y) end, { x, y })
    check(function(x, b) return x:matmul(b) end, { x, b })   -- broadcast batch
    check(function(x, y) return x:matmul(y) end, { x, y })
    local c = leaf(5)
    check(function(c, a, b) return c:addmm(a, b, { beta = 0.5, alpha = 2 }) end, { c, a, b })
    check(function(a) return a:t():matmul(a) end, { a })
  end)

  it('views and copies', function()
    local x = leaf(2, 3, 4)
    check(function(x) return x:view(6, 4) end, { x })
    check(function(x) return x:reshape(4, -1) end, { x })
    check(function(x) return x:transpose(1, 3):contiguous() end, { x })
    check(function(x) return x:permute(3, 1, 2) end, { x })
    check(function(x) return x:permute({ 2, 3, 1 }) * 2 end, { x })
    check(function(x) return x:narrow(3, 2, 2) end, { x })
    check(function(x) return x:select(2, 3) end, { x })
    check(function(x) return x[2] end, { x })
    check(function(x) return x:unsqueeze(2):squeeze(2) end, { x })
    check(function(x) return x:narrow(1, 1, 1):squeeze() end, { x })
    check(function(x) return x:narrow(2, 1, 1):expand(2, 5, 4) end, { x })
    check(function(x) return x:clone() * x end, { x })
    check(function(x) return x:flatten(2) end, { x })
    check(function(x) return x:t() end, { leaf(3, 2) })
  end)

  it('casts: the gradient returns to the input dtype', function()
    local x = leaf(3, 2)
    check(function(x) return x:to('float64') * x end, { x })
    x.grad = nil
    local y = x:to('float32')
    assert.equal('float32', y.dtype)
    y:sum():backward()
    assert.equal('float64', x.grad.dtype)
    assert.tensor_near(x.grad, lunet.ones(3, 2), 0)
  end)

  it('reductions', function()
    local x = leaf(3, 4)
    check(function(x) return x:sum() end, { x })
    check(function(x) return x:sum(2) end, { x })
    check(function(x) return x:sum(1, true) end, { x })
    check(function(x) return x:mean() end, { x })
    check(function(x) return x:mean(-1) end, { x })
    check(function(x) return x:mean(1, true) end, { x })
    check(function(x) return x:max() end, { x })
    check(function(x) return x:min(2) end, { x })
    check(function(x) return x:max(1, true) end, { x })
    check(function(x) return x:amax(2) end, { x })
    check(function(x) return x:var() end, { x })
    check(function(x) return x:var(2, { correction = 0, keepdim = true }) end, { x })
    check(function(x) return x:std(1) end, { x })
    check(function(x) return x:norm() end, { x })
    check(function(x) return x:norm(3, 2) end, { x })
    check(function(x) return x:norm(1, 1, true) end, { x })
    assert.tensor_near(x:var(2), lunet.no_grad(function() return x:var(2) end), 1e-12)
    assert.tensor_near(x:norm(3, 2), lunet.no_grad(function() return x:norm(3, 2) end), 1e-12)
  end)

  it('indexing and joining', function()
    local x, y = leaf(3, 4), leaf(2, 4)
    check(function(x) return x:index_select(2, { 1, 3, 3 }) end, { x })
    check(function(x) return x:index_select(1, lunet.tensor({ 3, 1 }, { dtype = 'int64' })) end, { x })
    check(function(x) return x:gather(2, lunet.tensor({ { 1, 2 }, { 4, 4 }, { 3, 1 } }, { dtype = 'int64' })) end, { x })
    check(function(x, y) return lunet.cat({ x, y }, 1) end, { x, y })
    check(function(x, y) return lunet.cat({ x:t(), y:t() }, 2) end, { x, y })
    check(function(x, y) return x:cat(y, 1) end, { x, y })
    check(function(x) return lunet.stack({ x[1], x[3], x[1] }, 2) end, { x })
    check(function(x)
      local p = x:split(3, 2)
      return p[1] * 2 + p[2]:sum(2, true)
    end, { x })
    check(function(x)
      local p = x:chunk(2, 1)
      local u = x:unbind(2)
      return lunet.cat({ p[2] * 3, p[1] }, 1) + u[4]:view(3, 1)
    end, { x })
    check(function(x) return x.T * 2 end, { x })
  end)

  it('composite expressions through a shared subgraph', function()
    local a, b = leaf(4, 3), leaf(3)
    check(function(a, b)
      local h = (a * b):tanh()
      return h * h:sigmoid() + h:exp() - h:sum(2, true)
    end, { a, b })
  end)
end)

describe('autograd graph', function()
  it('records grad_fn only when an input requires grad', function()
    local a = lunet.randn(2, 2)
    local b = (a * 2):exp()
    assert.is_false(b.requires_grad)
    assert.is_nil(b.grad_fn)
    a.requires_grad = true
    local c = (a * 2):exp()
    assert.is_true(c.requires_grad)
    assert.equal('exp', c.grad_fn.name)
    assert.is_false(c:is_leaf())
    assert.is_true(a:is_leaf())
  end)

  it('accumulates into .grad across calls and through several paths', function()
    local x = lunet.tensor({ 1, 2, 3 }, { dtype = 'float64', requires_grad = true })
    local y = (x * x + x * 3):sum()   -- dy/dx = 2x + 3
    y:backward()
    assert.tensor_near(x.grad, { 5, 7, 9 }, 1e-12)
    ;(x * 2):sum():backward()
    assert.tensor_near(x.grad, { 7, 9, 11 }, 1e-12)
  end)

  it('reduces broadcast gradients to the input shape', function()
    local a = lunet.ones({ 2, 3 }, { requires_grad = true })
    local b = lunet.ones({ 3 }, { requires_grad = true })
    local s = lunet.ones({ 1 }, { requires_grad = true })
    ;((a + b) * s):sum():backward()
    assert.same({ 3 }, b.grad:size())
    assert.tensor_near(b.grad, { 2, 2, 2 })
    assert.same({ 1 }, s.grad:size())
    assert.tensor_near(s.grad, { 12 })
  end)

  it('reduces an empty broadcast gradient to zeros of the input shape (torch: zeros)', function()
    local b = lunet.randn({ 2 }, { requires_grad = true })
    local c = lunet.randn({ 3, 1 }, { requires_grad = true })
    ;(lunet.randn(0, 2) + b):sum():backward()
    assert.same({ 2 }, b.grad:size())
    assert.tensor_near(b.grad, { 0, 0 })
    ;(lunet.randn(3, 0) * c):sum():backward()
    assert.same({ 3, 1 }, c.grad:size())
    assert.tensor_near(c.grad, { { 0 }, { 0 }, { 0 } })
  end)

  it('no_grad turns recording off and restores it, even after an error', function()
    local a = lunet.randn({ 2 }, { requires_grad = true })
    local r = lunet.no_grad(function() return a * 2 end)
    assert.is_false(r.requires_grad)
    assert.is_true(lunet.is_grad_enabled())
    assert.has_error(function() lunet.no_grad(function() error('boom') end) end)
    assert.is_true(lunet.is_grad_enabled())
    local r2 = lunet.no_grad(function() return lunet.enable_grad(function() return a * 2 end) end)
    assert.is_true(r2.requires_grad)
  end)

  it('detach cuts the graph and shares storage', function()
    local a = lunet.tensor({ 1, 2 }, { requires_grad = true })
    local d = (a * 2):detach()
    assert.is_false(d.requires_grad)
    assert.is_nil(d.grad_fn)
    local e = a:detach()
    assert.is_true(e:is_same_storage(a))
    local y = (a * d):sum()
    y:backward()
    assert.tensor_near(a.grad, { 2, 4 })
  end)

  it('frees the graph after backward unless retain_graph', function()
    local a = lunet.tensor({ 1, 2 }, { dtype = 'float64', requires_grad = true })
    local y = (a:exp() * a):sum()
    y:backward({ retain_graph = true })
    y:backward()
    local ok, err = pcall(function() y:backward() end)
    assert.is_false(ok)
    assert.matches('backward through the graph a second time', err, 1, true)
    local e1, e2 = math.exp(1) * 2, math.exp(2) * 3
    assert.tensor_near(a.grad, { 2 * e1, 2 * e2 }, 1e-12)
  end)

  it('backward needs a grad for non-scalar outputs, of the right shape', function()
    local a = lunet.randn({ 3 }, { requires_grad = true })
    local y = a * 2
    local ok, err = pcall(function() y:backward() end)
    assert.is_false(ok)
    assert.matches('only for a single%-element output', err)
    ok, err = pcall(function() y:backward(lunet.ones(4)) end)
    assert.is_false(ok)
    assert.matches('grad has shape {4}, output has {3}', err, 1, true)
    ok, err = pcall(function() lunet.ones(2):sum():backward() end)
    assert.matches('does not require grad', err, 1, true)
    y:backward(lunet.tensor({ 1, 2, 3 }))
    assert.tensor_near(a.grad, { 2, 4, 6 })
  end)

  -- (a zero-bubble pipeline's B and W: lunet.parallel.Pipeline, schedule 'zb')
  it('autograd.backward with defer: the input gradient now, the listed weights\' gradients at run(), the same', function()
    local nn = lunet.nn
    local function model()
      lunet.manual_seed(4)
      return nn.Sequential { nn.Conv2d(2, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.BasicBlock(4, 4, 1),
        nn.Flatten(), nn.Linear(4 * 5 * 5, 3) }:to('float64')
    end
    local a, b = model(), model()
    lunet.manual_seed(5)
    local x = lunet.randn({ 3, 2, 5, 5 }, f64)
    local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
    local g = lunet.randn({ 3, 3 }, f64)
    a(xa):backward(g)
    local seen = 0
    local params = b:parameters()
    params[1]:register_post_accumulate_grad_hook(function() seen = seen + 1 end)
    local d = lunet.autograd.backward({ b(xb) }, { g }, { defer = params })
    -- the input's gradient is there, the weights' not yet
    assert.tensor_near(xb.grad, xa.grad:totable(), 1e-12)
    for i, p in ipairs(params) do assert.is_nil(p.grad, 'parameter ' .. i) end
    assert.equal(0, seen)
    assert.matches('autograd.Deferred: %d+ nodes', tostring(d))
    d:run()
    assert.equal(1, seen)
    for i, p in ipairs(a:parameters()) do assert.tensor_near(params[i].grad, p.grad:totable(), 1e-12) end
    local ok, err = pcall(d.run, d)
    assert.is_false(ok)
    assert.matches('autograd.Deferred: run() twice', err, 1, true)
    -- a second deferred backward adds into .grad as a plain one does
    a(xa):backward(g)
    lunet.autograd.backward({ b(xb) }, { g }, { defer = params }):run()
    for i, p in ipairs(a:parameters()) do assert.tensor_near(params[i].grad, p.grad:totable(), 1e-12) end
    ok, err = pcall(lunet.autograd.backward, { b(xb) }, { g }, { defer = { 3 } })
    assert.matches('autograd.backward: defer[1] is a number, not a tensor', err, 1, true)
    ok, err = pcall(function() b(xb):sum():backward({ defer = params }) end)
    assert.matches("backward: unknown option 'defer'", err, 1, true)
  end)

  it('autograd.backward: several roots in one pass, as the sum of their backwards', function()
    local a = lunet.randn({ 3 }, { dtype = 'float64', requires_grad = true })
    local b = lunet.randn({ 2 }, { dtype = 'float64', requires_grad = true })
    local shared = a:exp()                       -- a node both roots reach
    local r1 = (shared * 2):sum()
    local r2 = shared * b:sum()                  -- non-scalar root: needs its grad
    local g2 = lunet.tensor({ 1, -2, 0.5 }, { dtype = 'float64' })
    lunet.autograd.backward({ r1, r2, b }, { nil, g2, lunet.tensor({ 3, 4 }, { dtype = 'float64' }) })
    -- d/da: exp(a) * (2 + g2 * sum(b)); d/db: sum(g2 * exp(a)) + {3, 4} (b is a leaf root)
    local ea, sb = a:exp(), b:sum()
    local want_a = ea * (g2 * sb + 2)
    assert.tensor_near(a.grad, want_a:totable(), 1e-12)
    local s = (g2 * ea):sum():item()
    assert.tensor_near(b.grad, { s + 3, s + 4 }, 1e-12)
    -- the caller's gradients stay usable, the graph is freed once
    assert.tensor_near(g2, { 1, -2, 0.5 })
    local ok, err = pcall(lunet.autograd.backward, { r1 })
    assert.is_false(ok)
    assert.matches('second time', err, 1, true)
    -- the checks name the argument
    local y = a * 2
    ok, err = pcall(lunet.autograd.backward, { y })
    assert.matches('grads[1] can be implicitly created only for a single-element tensor', err, 1, true)
    ok, err = pcall(lunet.autograd.backward, { y }, { lunet.ones(4, { dtype = 'float64' }) })
    assert.matches('grads[1] must be a float64 tensor of shape {3} on cpu:0', err, 1, true)
    ok, err = pcall(lunet.autograd.backward, { y }, { lunet.ones(3) })   -- float32
    assert.matches('grads[1] must be a float64 tensor of shape {3} on cpu:0', err, 1, true)
    ok, err = pcall(lunet.autograd.backward, { y:sum(), 5 })
    assert.matches('tensors[2] is a number, not a tensor', err, 1, true)
    ok, err = pcall(lunet.autograd.backward, { lunet.ones(2):sum() })
    assert.matches('tensors[1] does not require grad', err, 1, true)
    ok, err = pcall(lunet.autograd.backward, {})
    assert.matches('non-empty list', err, 1, true)
  end)

  it('retain_grad keeps a non-leaf gradient; requires_grad_ and integer tensors', function()
    local a = lunet.tensor({ 1, 2 }, { requires_grad = true })
    local h = (a * 3):retain_grad()
    ;(h * h):sum():backward()
    assert.tensor_near(h.grad, { 6, 12 })
    assert.tensor_near(a.grad, { 18, 36 })
    assert.has_error(function() lunet.tensor({ 1, 2 }, { dtype = 'int64' }):requires_grad_() end)
    assert.has_error(function() h:requires_grad_(false) end)
  end)

  it('hooks: register_hook can rewrite a gradient; post-accumulate hooks see the new .grad', function()
    local a = lunet.tensor({ 1, 2 }, { requires_grad = true })
    local seen = {}
    local h1 = a:register_hook(function(g) return g * 10 end)
    a:register_post_accumulate_grad_hook(function(t) seen[#seen + 1] = t.grad:totable() end)
    local mid = a * 3
    mid:register_hook(function(g) return g + 1 end)
    mid:sum():backward()
    assert.tensor_near(a.grad, { 60, 60 })
    assert.same({ { 60, 60 } }, seen)
    h1.remove()
    ;(a * 1):sum():backward()
    assert.tensor_near(a.grad, { 61, 61 })
    -- the method form removes too
    local h2 = a:register_hook(function(g) return g * 0 end)
    h2:remove()
    ;(a * 1):sum():backward()
    assert.tensor_near(a.grad, { 62, 62 })
    assert.has_error(function() lunet.ones(2):register_hook(function() end) end)
  end)

  it('refuses in-place changes of leaves that require grad while recording', function()
    local w = lunet.ones({ 2 }, { requires_grad = true })
    local ok, err = pcall(function() w:mul_(2) end)
    assert.is_false(ok)
    assert.matches('mul_: a leaf tensor that requires grad (or a view of one) cannot be changed in place', err, 1, true)
    assert.has_error(function() w[1] = 5 end)
    assert.has_error(function() w:narrow(1, 1, 1):fill_(0) end)
    lunet.no_grad(function() w:mul_(2) end)
    assert.tensor_near(w, { 2, 2 })
    -- a leaf never shares its .grad with another leaf or with the output grad
    local a, b = lunet.ones({ 2 }, { requires_grad = true }), lunet.ones({ 2 }, { requires_grad = true })
    local go = lunet.ones(2)
    ;(a + b):view(2):backward(go)
    assert.is_false(a.grad:is_same_storage(b.grad))
    assert.is_false(a.grad:is_same_storage(go))
    local c = lunet.ones({ 2, 2 }, { requires_grad = true })
    ;(c:t() * 2):sum():backward()
    assert.is_true(c.grad:is_contiguous())
    -- gradients accumulate in place into the leaf's own .grad
    ;(w * 1):sum():backward()
    local g = w.grad
    ;(w * 2):sum():backward()
    assert.equal(g, w.grad)
    assert.tensor_near(g, { 3, 3 })
  end)

  it('records in-place ops on non-leaf tensors and on tensors that receive a grad-requiring argument', function()
    local x = leaf(3, 4)
    local y = leaf(4)
    check(function(x, y)
      local h = x * 1
      h:mul_(y):add_(2):tanh_():clamp_(-0.5, 0.5)
      local acc = lunet.zeros({ 3, 4 }, f64)
      acc:add_(h):sub_(x, 0.5)
      local c = lunet.zeros({ 3, 4 }, f64)
      c:copy_(y)
      return acc * c
    end, { x, y })
    local h = x * 1
    h:fill_(3)
    assert.is_false(h.requires_grad)
    assert.is_true(lunet.tensor({ 1, 2 }, { requires_grad = true }):double():abs():mul_(2):add_(1).requires_grad)
  end)

  it('refuses a backward whose saved tensor was changed in place since (the gradient would use the new values)', function()
    local function w3() return lunet.tensor({ 1, 2, 3 }, { requires_grad = true }) end
    local function refused(what, run)
      local ok, err = pcall(run)
      assert.is_false(ok, what)
      assert.matches('backward: a tensor that %a+ saved for its gradient %(.-%) was changed in place after it was saved', err, 1,
        false, what)
    end
    -- y * y saved y; y changed: PyTorch's "modified by an inplace operation" (lunet gave 2 (w + 1) for 2 w)
    local w = w3()
    local y = w * 1
    local z = (y * y):sum()
    y:add_(1)
    refused('a saved input', function() z:backward() end)
    assert.is_nil(w.grad)   -- (checked before any node ran: nothing summed)
    -- a saved output (exp keeps its result), through a view, by t[i] = v, under no_grad, by an optimizer's step
    w = w3(); local e = w:exp(); e:mul_(2)
    refused('a saved output', function() e:sum():backward() end)
    w = w3(); y = w * 1; z = (y * y):sum(); y:view(3):narrow(1, 1, 1):fill_(0)
    refused('a view of it', function() z:backward() end)
    w = w3(); local x = lunet.tensor({ 1, 1, 1 }); z = (w * x):sum(); x[1] = 7
    refused('t[i] = v', function() z:backward() end)
    w = w3(); x = lunet.tensor({ 1, 1, 1 }); z = (w * x):sum(); lunet.no_grad(function() x:fill_(5) end)
    refused('no_grad', function() z:backward() end)
    local m = lunet.nn.Linear(3, 2)
    local opt = lunet.optim.SGD(m:parameters(), { lr = 0.1 })
    local loss = m(lunet.ones(4, 3)):sum()
    loss:backward({ retain_graph = true })
    opt:step()
    refused('an optimizer step', function() loss:backward() end)
    -- not refused: an op that saved nothing (add), a change after the backward, a clone changed
    w = w3(); y = w + 1; y:mul_(2); y:sum():backward()
    assert.same({ 2, 2, 2 }, w.grad:totable())
    w = w3(); y = w * 1; z = (y * y):sum(); z:backward(); y:add_(1)
    assert.same({ 2, 4, 6 }, w.grad:totable())
    w = w3(); y = w * 1; z = (y * y):sum(); y:clone():add_(1); z:backward()
    assert.same({ 2, 4, 6 }, w.grad:totable())
  end)

  it('in-place writes through views rewrite the base\'s history (PyTorch\'s CopySlices), and stale views are made again', function()
    local function w3() return lunet.tensor({ 1, 2, 3 }, { requires_grad = true }) end
    -- (each gave the gradient of the values before the write, silently)
    local w = w3(); local y = w * 1; y:view(3):mul_(2); y:sum():backward()
    assert.same({ 2, 2, 2 }, w.grad:totable())
    w = w3(); y = w * 1; y:narrow(1, 1, 1):mul_(10); y:sum():backward()
    assert.same({ 10, 1, 1 }, w.grad:totable())
    w = w3(); y = w * 1; local v = y:narrow(1, 1, 2); y:mul_(10); v:sum():backward()   -- v made again from y
    assert.same({ 10, 10, 0 }, w.grad:totable())
    w = w3(); y = w * 1; y[2] = 0; y:sum():backward()
    assert.same({ 1, 0, 1 }, w.grad:totable())
    w = w3(); y = w * 1; local a = lunet.tensor({ 5 }, { requires_grad = true })
    y:narrow(1, 2, 1):copy_(a * 3); y:sum():backward()
    assert.same({ 1, 0, 1 }, w.grad:totable())
    assert.same({ 3 }, a.grad:totable())
    -- against finite differences: an op with a gradient-requiring argument, a transposed view, a view of a view,
    -- t[i] = tensor, a stale view used after its base was written, split's parts
    local x, b = leaf(3, 4), leaf(3, 2)
    check(function(x, b) local h = x * 1; h:narrow(2, 2, 2):mul_(b); return h:sin() end, { x, b })
    check(function(x) local h = x * 2; h:t():add_(1); h[2] = 0; return h * h end, { x })
    check(function(x) local h = x * 2; h:view(12):narrow(1, 3, 5):mul_(x:view(12):narrow(1, 1, 5)); return h end, { x })
    check(function(x, b) local h = x * 1; h[3] = b:view(6):narrow(1, 1, 4); return h:tanh() end, { x, b })
    check(function(x) local h = x * 1; local vv = h:select(2, 1); h:mul_(x); return vv * 3 end, { x })
    check(function(x) local h = x + 0; local _, p2 = unpack(h:split(2, 2)); p2:mul_(x:narrow(2, 1, 2)); return h end, { x })
    -- refused still: a view of a leaf, a tensor written under no_grad through a view, part of a tensor that does not require grad
    w = w3()
    local ok, err = pcall(function() w:view(3):narrow(1, 1, 1):mul_(2) end)
    assert.is_false(ok)
    assert.matches('mul_: a leaf tensor that requires grad (or a view of one) cannot be changed in place', err, 1, true)
    -- a write under no_grad is no part of the history, as in PyTorch (the base and its views go on as before)
    w = w3(); y = w * 1; local v2 = y:narrow(1, 2, 2); lunet.no_grad(function() y:narrow(1, 1, 1):fill_(7) end)
    y:sum():backward({ retain_graph = true })
    assert.same({ 1, 1, 1 }, w.grad:totable())
    w.grad = nil; v2:sum():backward()
    assert.same({ 0, 1, 1 }, w.grad:totable())
    local lo = w:clone(); lunet.no_grad(function() lo:mul_(0) end)
    assert.same({ 1, 2, 3 }, (w - lo):totable())
    -- (a view made under no_grad keeps no base: a write into it that requires grad would miss the tensor)
    local z = lunet.no_grad(function() return lunet.zeros(4, 3):narrow(1, 1, 2) end)
    ok, err = pcall(function() z[2] = lunet.tensor({ 5, 6, 7 }, { requires_grad = true }) end)
    assert.is_false(ok)
    assert.matches('copy_: writing a tensor that requires grad into part of a tensor that does not', err, 1, true)
    -- views made while recording of tensors that do not require grad: a write that does reaches the tensor
    check(function(xs)
      local out = lunet.zeros({ 3, 4 }, f64)
      out:narrow(2, 2, 2):copy_(xs:narrow(2, 1, 2) * 3)
      out:t():narrow(1, 1, 1):copy_(xs:narrow(2, 4, 1):t())
      local whole = lunet.zeros({ 4, 3 }, f64)
      whole:t():copy_(xs:exp())
      return out:sin() + whole:t()
    end, { leaf(3, 4) })
    -- out[i] = f(x[i]) into a tensor that did not require grad: it does now, and the rows' gradients reach x
    local xs, Wm = leaf(3, 4), leaf(4, 2)
    check(function(xs, Wm)
      local out = lunet.zeros({ 3, 2 }, f64)
      for i = 1, 3 do out[i] = xs[i]:view(1, 4):matmul(Wm):view(2) end
      return out * out
    end, { xs, Wm })
    -- and Torch7's out[{i, {a, b}}] = v
    check(function(xs)
      local out = lunet.zeros({ 3, 4 }, f64)
      out[{ 2, { 2, 3 } }] = xs[2]:narrow(1, 2, 2) * 5
      out[{ 3 }] = xs[1]:exp()
      return out:sin()
    end, { xs })
    -- a whole tensor receiving a gradient, and the written tensor itself, as before
    w = w3(); z = lunet.zeros(3); z:copy_(w * 4); z:sum():backward()
    assert.same({ 4, 4, 4 }, w.grad:totable())
  end)

  it('frees a deep graph that never ran backward within a few GC cycles', function()
    for _ = 1, 3 do collectgarbage() end
    local base = lunet.memory_allocated('cpu:0')
    do
      local h = lunet.randn({ 1000 }, { requires_grad = true })
      for _ = 1, 60 do h = (h * 1.01):tanh() end   -- 120 saved 4 KB tensors
    end
    lunet.synchronize()   -- (with LUNET_CPU_DEVICES, queued work holds its tensors' storages until it has run)
    for _ = 1, 3 do collectgarbage() end
    assert.is_true(lunet.memory_allocated('cpu:0') - base < 50000)
  end)

  it('names the op whose backward failed', function()
    local a = lunet.ones({ 2 }, { requires_grad = true })
    local y = (a * 2):exp()
    y:register_hook(function(g) error('hook broke') end)
    local ok, err = pcall(function() y:sum():backward() end)
    assert.is_false(ok)
    assert.matches('backward of exp: hook broke', err, 1, true)
  end)

  it('keeps recording when lunet is loaded a second time (busted reloads modules per spec file)', function()
    local saved = {}
    for k, v in pairs(package.loaded) do
      if k == 'lunet' or k:match('^lunet%.') then saved[k] = v; package.loaded[k] = nil end
    end
    local ok, err = pcall(function()
      local l2 = require 'lunet'
      assert.are_not.equal(lunet, l2)
      local a = l2.tensor({ 1, 2 }, { requires_grad = true })
      local y = l2.cat({ a * 2, l2.where(a:gt(1), a, a * 0) }, 1):sum()
      y:backward()
      assert.tensor_near(a.grad, { 2, 3 })
      assert.is_false(l2.no_grad(function() return (a * 2).requires_grad end))
    end)
    for k in pairs(package.loaded) do if k == 'lunet' or k:match('^lunet%.') then package.loaded[k] = nil end end
    for k, v in pairs(saved) do package.loaded[k] = v end
    assert(ok, err)
  end)

  it('costs ~nothing when no input requires grad', function()
    local a, b = lunet.randn(4), lunet.randn(4)
    local t0 = os.clock()
    for _ = 1, 20000 do local _ = a + b end
    local plain = os.clock() - t0
    assert.is_true(plain < 2)  -- sanity: the wrapper is one check and a tail call
    local c = a + b
    assert.is_nil(c.grad_fn)
  end)
end)

-- the bodies run in coroutines: a finished coroutine's stack goes with it,
-- so no stale stack slot keeps a cpu:1 tensor alive at teardown
local function in_coroutine(f) return function() coroutine.wrap(f)() end end

describe('autograd across virtual CPU devices', function()
  setup(function()
    collectgarbage(); collectgarbage()
    lunet.synchronize()
    lunet.set_cpu_devices(2)
  end)
  teardown(function()
    -- compiled traces can hold the last objects they saw (jit.flush drops
    -- them); finalizers free the autograd records, whose gradients go a
    -- cycle later
    jit.flush()
    for _ = 1, 10 do
      collectgarbage()
      lunet.synchronize()
      if lunet.memory_allocated('cpu:1') == 0 then break end
    end
    lunet.set_cpu_devices(1)
  end)

  it('a graph that crosses devices sends each gradient back to its leaf device', in_coroutine(function()
    local x = lunet.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = 'float64', requires_grad = true })
    local w = lunet.tensor({ 0.5, -1 }, { dtype = 'float64', device = 'cpu:1', requires_grad = true })
    local y = (x:to('cpu:1') * w):exp():sum()
    y:backward()
    assert.equal('cpu:0', x.grad.device)
    assert.equal('cpu:1', w.grad.device)
    local e = function(v) return math.exp(v) end
    -- plain values only go to luassert (it may keep its arguments)
    local xg, wg = x.grad:totable(), w.grad:totable()
    local want_x = { { 0.5 * e(0.5), -e(-2) }, { 0.5 * e(1.5), -e(-4) } }
    local want_w = { e(0.5) + 3 * e(1.5), 2 * e(-2) + 4 * e(-4) }
    for i = 1, 2 do
      for j = 1, 2 do assert.near(want_x[i][j], xg[i][j], 1e-12) end
      assert.near(want_w[i], wg[i], 1e-12)
    end
  end))

  it('Module:to(device) moves parameters in place and trains there', in_coroutine(function()
    local nn = lunet.nn
    local m = nn.Sequential { nn.Conv2d(2, 3, 3, { padding = 1 }), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Linear(12, 2) }
    local w = m['0'].weight
    local before = w:totable()
    m:to('cpu:1')
    assert.is_true(w == m['0'].weight)
    assert.equal('cpu:1', w.device)
    assert.equal('cpu:1', m['1'].running_mean.device)
    assert.same(before, w:totable())
    local x = lunet.randn({ 4, 2, 2, 2 }, { device = 'cpu:1' })
    local loss = nn.CrossEntropyLoss()(m(x), lunet.tensor({ 1, 2, 2, 1 }, { dtype = 'int64', device = 'cpu:1' }))
    loss:backward()
    for _, p in ipairs(m:parameters()) do assert.equal('cpu:1', p.grad.device) end
  end))
end)
