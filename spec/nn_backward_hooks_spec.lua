-- Full backward hooks and backward pre-hooks on modules, as torch's
-- register_full_backward_hook / register_full_backward_pre_hook: the
-- gradients they see (against autograd of the same graph without hooks),
-- what their replacements change upstream, order, removal, a module called
-- twice in one graph, several inputs, and errors.
local lunet = require 'lunet'
local nn = lunet.nn

local function f64(...) return lunet.randn({ ... }, { dtype = 'float64' }) end
local function leaf(...) return lunet.randn({ ... }, { dtype = 'float64', requires_grad = true }) end

-- a module of two inputs: a * b + a
local Mul = nn.Module:extend('Mul')
function Mul:forward(a, b) return a * b + a end

local err_of = require('support.fixtures').err_of

describe('nn backward hooks', function()
  it('Linear: grad_input and grad_output as autograd computes them without hooks', function()
    lunet.manual_seed(1)
    local lin = nn.Linear(3, 2):double()
    local x, v = leaf(4, 3), f64(4, 2)
    lin(x):mul(v):sum():backward()
    local dx, dw = x.grad:clone(), lin.weight.grad:clone()
    x.grad, lin.weight.grad, lin.bias.grad = nil, nil, nil
    local seen, pre = {}, {}
    lin:register_full_backward_hook(function(m, gi, go) seen[#seen + 1] = { m, gi[1], go[1] } end)
    lin:register_full_backward_pre_hook(function(m, go) pre[#pre + 1] = { m, go[1], #seen } end)
    lin(x):mul(v):sum():backward()
    assert.equal(1, #seen)
    assert.equal(1, #pre)
    assert.equal(lin, seen[1][1])
    assert.equal(lin, pre[1][1])
    assert.equal(0, pre[1][3])   -- (the pre-hook ran first)
    assert.tensor_near(seen[1][2], dx, 1e-12)
    assert.tensor_near(seen[1][3], v, 0)
    assert.tensor_near(pre[1][2], v, 0)
    -- hooks that return nil change nothing
    assert.tensor_near(x.grad, dx, 1e-12)
    assert.tensor_near(lin.weight.grad, dw, 1e-12)
  end)

  it('Conv2d: grad_input nil for an input that needs no grad; the hook still runs', function()
    lunet.manual_seed(2)
    local conv = nn.Conv2d(2, 3, 3, { padding = 1 }):double()
    local x, v = f64(2, 2, 5, 5), f64(2, 3, 5, 5)
    local seen = {}
    conv:register_full_backward_hook(function(_, gi, go) seen[#seen + 1] = { gi, go } end)
    conv(x):mul(v):sum():backward()
    assert.equal(1, #seen)
    assert.is_nil(seen[1][1][1])
    assert.tensor_near(seen[1][2][1], v, 0)
    -- an input that requires grad: the gradient autograd gives it
    local xl = x:clone():requires_grad_()
    conv(xl):mul(v):sum():backward()
    assert.equal(2, #seen)
    assert.tensor_near(seen[2][1][1], xl.grad, 1e-12)
    -- and the one finite differences give (gradcheck through the hooked module)
    local gradcheck = require 'gradcheck'
    assert.is_true(gradcheck(function(a) return conv(a) end, { leaf(1, 2, 4, 4) }))
    -- a hook of such a module may not return gradients
    conv:register_full_backward_hook(function(_, _, go) return { go[1] } end)
    assert.matches('must return nil', err_of(function() conv(x):sum():backward() end), 1, true)
  end)

  it('Sequential: its own hook sees the whole; replacements change the gradients upstream', function()
    lunet.manual_seed(3)
    local a, b = nn.Linear(3, 4):double(), nn.Linear(4, 2):double()
    local seq = nn.Sequential { a, nn.Tanh(), b }
    local x, v = leaf(5, 3), f64(5, 2)
    seq(x):mul(v):sum():backward()
    local dx, da, db = x.grad:clone(), a.weight.grad:clone(), b.weight.grad:clone()
    local function reset() x.grad = nil; seq:zero_grad() end
    reset()
    local order, seen = {}, {}
    seq:register_full_backward_hook(function(_, gi, go) order[#order + 1] = 'seq'; seen.gi, seen.go = gi[1], go[1] end)
    a:register_full_backward_hook(function() order[#order + 1] = 'a' end)
    local h = b:register_full_backward_hook(function(_, gi) order[#order + 1] = 'b'; return { gi[1] * 2 } end)
    seq(x):mul(v):sum():backward()
    assert.same({ 'b', 'a', 'seq' }, order)
    assert.tensor_near(seen.gi, dx * 2, 1e-12)   -- (b doubled it)
    assert.tensor_near(seen.go, v, 0)
    assert.tensor_near(b.weight.grad, db, 1e-12)   -- (b's own gradients are not grad_input)
    assert.tensor_near(a.weight.grad, da * 2, 1e-12)
    assert.tensor_near(x.grad, dx * 2, 1e-12)
    h:remove()
    reset()
    -- a pre-hook's replacement of grad_output reaches b's parameters and all upstream
    b:register_full_backward_pre_hook(function(_, go) return { go[1] * 3 } end)
    seq(x):mul(v):sum():backward()
    assert.tensor_near(b.weight.grad, db * 3, 1e-12)
    assert.tensor_near(a.weight.grad, da * 3, 1e-12)
    assert.tensor_near(x.grad, dx * 3, 1e-12)
    assert.tensor_near(seen.gi, dx * 3, 1e-12)
  end)

  it('runs in the order registered, prepend first; remove() stops a hook', function()
    local lin = nn.Linear(2, 2)
    local order = {}
    local h1 = lin:register_full_backward_hook(function() order[#order + 1] = 1 end)
    lin:register_full_backward_hook(function() order[#order + 1] = 2 end)
    lin:register_full_backward_hook(function() order[#order + 1] = 3 end, { prepend = true })
    local p1 = lin:register_full_backward_pre_hook(function() order[#order + 1] = 'p1' end)
    lin:register_full_backward_pre_hook(function() order[#order + 1] = 'p0' end, { prepend = true })
    lin(lunet.randn(3, 2, { requires_grad = true })):sum():backward()
    assert.same({ 'p0', 'p1', 3, 1, 2 }, order)
    h1:remove(); h1:remove(); p1:remove()
    order = {}
    lin(lunet.randn(3, 2, { requires_grad = true })):sum():backward()
    assert.same({ 'p0', 3, 2 }, order)
    assert.is_false(require('lunet.nn.hooks').plain(lin))   -- (a hooked module is never fused)
    local m = nn.Linear(2, 2)
    local h = m:register_full_backward_pre_hook(function() end)
    h:remove()
    assert.is_true(require('lunet.nn.hooks').plain(m))
    -- no hook under no_grad: the output is the module's own
    order = {}
    lunet.no_grad(function() lin(lunet.randn(3, 2)) end)
    assert.same({}, order)
  end)

  it('a module called twice in one graph: its hooks run once per call', function()
    lunet.manual_seed(4)
    local lin = nn.Linear(3, 3):double()
    local x, v = leaf(2, 3), f64(2, 3)
    local h = lin(x)
    h:retain_grad()
    lin(h):mul(v):sum():backward()
    local dh, dx = h.grad:clone(), x.grad:clone()
    x.grad = nil
    local seen = {}
    lin:register_full_backward_hook(function(_, gi, go) seen[#seen + 1] = { gi[1], go[1] } end)
    lin(lin(x)):mul(v):sum():backward()
    assert.equal(2, #seen)
    -- (backward meets the second call first)
    assert.tensor_near(seen[1][2], v, 0)
    assert.tensor_near(seen[1][1], dh, 1e-12)
    assert.tensor_near(seen[2][2], dh, 1e-12)
    assert.tensor_near(seen[2][1], dx, 1e-12)
  end)

  it('several inputs: one hook call sees all their gradients, nil where none', function()
    local m = Mul()
    local a, b, v = leaf(2, 3), leaf(2, 3), f64(2, 3)
    m(a, b):mul(v):sum():backward()
    local da, db = a.grad:clone(), b.grad:clone()
    a.grad, b.grad = nil, nil
    local seen = {}
    m:register_full_backward_hook(function(_, gi, go)
      seen[#seen + 1] = { gi[1], gi[2], go[1] }
      return { nil, gi[2] and gi[2] * 0 }
    end)
    m(a, b):mul(v):sum():backward()
    assert.equal(1, #seen)
    assert.tensor_near(seen[1][1], da, 1e-12)
    assert.tensor_near(seen[1][2], db, 1e-12)
    assert.is_nil(a.grad)   -- (replaced by nil: no gradient)
    assert.tensor_near(b.grad, lunet.zeros(2, 3, { dtype = 'float64' }), 0)
    local c = f64(2, 3)
    m(a, c):sum():backward()
    assert.equal(2, #seen)
    assert.is_nil(seen[2][2])
    assert.tensor_near(seen[2][1], c + 1, 1e-12)
  end)

  it('errors: a hook that is not callable, unknown options, a replacement of the wrong shape', function()
    local lin = nn.Linear(3, 2)
    assert.matches('register_full_backward_hook: expected a function, got number',
      err_of(lin.register_full_backward_hook, lin, 5), 1, true)
    assert.matches('register_full_backward_pre_hook: expected a function, got nil',
      err_of(lin.register_full_backward_pre_hook, lin), 1, true)
    assert.matches('prepnd', err_of(lin.register_full_backward_hook, lin, function() end, { prepnd = true }), 1, true)
    local h = lin:register_full_backward_hook(function(_, gi) return { gi[1]:sum() } end)
    local x = lunet.randn({ 4, 3 }, { requires_grad = true })
    assert.matches('register_full_backward_hook: the hook returned a ', err_of(function() lin(x):sum():backward() end), 1, true)
    h:remove()
    lin:register_full_backward_pre_hook(function(_, go) return { go[1], go[1] } end)
    assert.matches('register_full_backward_pre_hook: the hook returned 2 grad_output, expected 1',
      err_of(function() lin(x):sum():backward() end), 1, true)
  end)
  describe('in parallel wrappers', function()
    setup(function() lunet.set_cpu_devices(4) end)
    teardown(function()
      for _ = 1, 4 do collectgarbage() end
      pcall(lunet.synchronize)
      lunet.set_cpu_devices(1)
    end)

    it('DataParallel\'s replicas run them per replica, a Pipeline\'s atoms per chunk (registered after wrapping)', function()
      local m = nn.Sequential { nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2) }
      local dp = lunet.parallel.DataParallel(m, { devices = { 'cpu:0', 'cpu:1' } })
      local rows, pre = {}, 0
      m[3]:register_full_backward_hook(function(_, gi, go)
        rows[#rows + 1] = go[1]:size(1)
        assert.same(gi[1]:size(), { go[1]:size(1), 4 })
      end)
      m[3]:register_full_backward_pre_hook(function(_, go) pre = pre + go[1]:size(1) end)
      local crit, x, y = nn.MSELoss(), lunet.randn({ 6, 3 }), lunet.randn({ 6, 2 })
      crit(dp(x), y):backward()
      lunet.synchronize()
      assert.same({ 3, 3 }, rows)
      assert.equal(6, pre)

      local p = nn.Sequential { nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2) }
      local pipe = lunet.parallel.Pipeline(p, { devices = { 'cpu:0', 'cpu:1' }, chunks = 2, balance = { 2, 1 } })
      local seen = {}
      p[3]:register_full_backward_hook(function(_, _, go) seen[#seen + 1] = go[1]:size(1) end)
      pipe:forward_loss(crit, x, y):backward()
      assert.same({ 3, 3 }, seen)
    end)
  end)
end)
