-- inplace = true for nn.ReLU, LeakyReLU, ELU, SiLU, Hardswish, Hardsigmoid,
-- ReLU6, Mish (and F.relu_, leaky_relu_, elu_), as PyTorch 1.13's: the input
-- is overwritten and returned, a leaf that requires grad is refused, the
-- gradients through the in-place op are the out-of-place ones; nn.Sequential
-- (and its fused paths) give the same values with inplace ReLUs and train;
-- nn.Dropout, Dropout2d, F.dropout, F.dropout2d with inplace = true: the same
-- mask (same seed) as out of place, written into the input.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local function err(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'no error')
  return tostring(e)
end

-- {name, module built inplace, the out-of-place module, the functional form (x, inplace)}
local acts = {
  { 'relu', nn.ReLU(true), nn.ReLU(), function(x, i) return F.relu(x, i) end },
  { 'leaky_relu', nn.LeakyReLU(0.2, true), nn.LeakyReLU(0.2), function(x, i) return F.leaky_relu(x, 0.2, i) end },
  { 'elu', nn.ELU{ alpha = 0.7, inplace = true }, nn.ELU(0.7), function(x, i) return F.elu(x, 0.7, i) end },
  { 'silu', nn.SiLU(true), nn.SiLU(), function(x, i) return F.silu(x, i) end },
  { 'hardswish', nn.Hardswish(true), nn.Hardswish(), function(x, i) return F.hardswish(x, i) end },
  { 'hardsigmoid', nn.Hardsigmoid{ inplace = true }, nn.Hardsigmoid(), function(x, i) return F.hardsigmoid(x, i) end },
  { 'relu6', nn.ReLU6(true), nn.ReLU6(), function(x, i) return F.relu6(x, i) end },
  { 'mish', nn.Mish(true), nn.Mish(), function(x, i) return F.mish(x, i) end },
}

-- values on both sides of every kink (relu6's 6, hardswish's -3 and 3)
local function input() return lunet.randn(3, 5):mul(4):double() end

describe('inplace activations', function()
  it('overwrite their input with the out-of-place values and return it (module, F, {inplace = true})', function()
    for _, a in ipairs(acts) do
      local x = input()
      local want = a[3](x:clone())
      local y = a[2](x)
      assert.is_true(rawequal(x, y), a[1])
      assert.tensor_near(x, want, 0)
      for _, flag in ipairs({ true, { inplace = true } }) do
        x = input()
        want = a[3](x:clone())
        assert.is_true(rawequal(x, a[4](x, flag)), a[1])
        assert.tensor_near(x, want, 0)
      end
    end
  end)
  it('leave the input alone when inplace is false or absent', function()
    for _, a in ipairs(acts) do
      for _, y in ipairs({ a[3], function(x) return a[4](x, false) end, function(x) return a[4](x) end }) do
        local x = input()
        local keep = x:clone()
        assert.is_false(rawequal(x, y(x)), a[1])
        assert.tensor_near(x, keep, 0)
      end
    end
  end)
  it('F.relu_, leaky_relu_, elu_ change their input in place', function()
    local x = lunet.tensor({ -2, -0.5, 0, 3 }, { dtype = 'float64' })
    assert.is_true(rawequal(x, F.relu_(x)))
    assert.same({ 0, 0, 0, 3 }, x:totable())
    x = lunet.tensor({ -2, 3 }, { dtype = 'float64' })
    F.leaky_relu_(x, 0.5)
    assert.same({ -1, 3 }, x:totable())
    x = lunet.tensor({ -1, 3 }, { dtype = 'float64' })
    F.elu_(x)
    assert.tensor_near(x, { math.exp(-1) - 1, 3 }, 1e-15)
  end)
  it('give the out-of-place gradients through the in-place op', function()
    for _, a in ipairs(acts) do
      local v, dout = input(), lunet.randn(3, 5):double()
      local l1 = v:clone():requires_grad_()
      local h = l1 * 1.5
      local y = a[2](h)
      assert.is_true(rawequal(h, y), a[1])
      ;(y * dout):sum():backward()
      local l2 = v:clone():requires_grad_()
      ;(a[3](l2 * 1.5) * dout):sum():backward()
      assert.tensor_near(l1.grad, l2.grad, 1e-12)
      assert.is_true(gradcheck(function(t) return a[4](t * 1, true) end, { lunet.randn(2, 3):double():requires_grad_() }),
        a[1])
    end
  end)
  it('refuse a leaf that requires grad (clear error), but take one under no_grad', function()
    for _, a in ipairs(acts) do
      local leaf = input():requires_grad_()
      assert.matches(a[1] .. ': a leaf tensor that requires grad cannot be changed in place', err(a[2], leaf))
      assert.matches(a[1] .. ': a leaf tensor', err(a[4], leaf, true))
      lunet.no_grad(function() assert.is_true(rawequal(leaf, a[2](leaf))) end)
    end
    assert.matches('relu_: a leaf tensor', err(F.relu_, lunet.randn(2, { requires_grad = true })))
    assert.matches('elu_: a leaf tensor', err(F.elu_, lunet.randn(2, { requires_grad = true })))
  end)
  it('refuse a view of a leaf that requires grad, naming themselves (not copy_); a view of a non-leaf works', function()
    local w = lunet.randn(3, 4):double():requires_grad_()
    local views = {
      function() return w:narrow(1, 1, 2) end,
      function() return w:narrow(1, 2, 2):narrow(2, 1, 3) end,   -- (a view of a view)
      function() return w:t() end,
    }
    for _, a in ipairs(acts) do
      for _, v in ipairs(views) do
        assert.matches(a[1] .. ': a view of a leaf tensor that requires grad cannot be changed in place', err(a[4], v(), true))
        assert.matches(a[1] .. ': a view of a leaf', err(a[2], v()))
      end
    end
    assert.matches('relu_: a view of a leaf tensor that requires grad cannot be changed in place %(inplace = true%)',
      err(F.relu_, w:narrow(1, 1, 2)))
    assert.matches('hardtanh_: a view of a leaf', err(F.hardtanh_, w:narrow(1, 1, 2)))
    assert.matches('leaky_relu_: a view of a leaf', err(F.leaky_relu_, w:narrow(1, 1, 2)))
    -- the leaf itself still gets the leaf message
    assert.matches('relu: a leaf tensor that requires grad', err(F.relu, w, true))
    -- a view of a non-leaf: written in place, the gradient reaches the leaf through it
    local keep = w:clone()
    local h = w * 1
    local y = F.relu(h:narrow(1, 1, 2), true)
    h:sum():backward()
    local want = lunet.ones(3, 4):double()
    want:narrow(1, 1, 2):copy_(keep:narrow(1, 1, 2):gt(0):double())
    assert.tensor_near(w.grad, want, 0)
    assert.tensor_near(y, F.relu(keep:narrow(1, 1, 2)), 0)
    assert.tensor_near(w, keep, 0)
  end)
  it('print inplace; refuse bad flags', function()
    assert.equal('nn.ReLU(inplace)\n0 parameters', tostring(nn.ReLU(true)))
    assert.equal('nn.ReLU\n0 parameters', tostring(nn.ReLU()))
    assert.equal('nn.LeakyReLU(slope 0.2, inplace)\n0 parameters', tostring(nn.LeakyReLU(0.2, true)))
    assert.equal('nn.ELU(alpha 1, inplace)\n0 parameters', tostring(nn.ELU{ inplace = true }))
    assert.equal('nn.SiLU(inplace)\n0 parameters', tostring(nn.SiLU(true)))
    local x = lunet.randn(3)
    assert.matches('relu: ', err(F.relu, x, 1))
    assert.matches("relu: unknown option 'in_place'", err(F.relu, x, { in_place = true }))
    assert.matches('leaky_relu: inplace must be a boolean, got string', err(F.leaky_relu, x, 0.1, 'x'))
    assert.matches('elu: alpha must be a number, got string', err(F.elu, x, 'x'))
    assert.matches("silu: unknown option 'inplac'", err(F.silu, x, { inplac = true }))
    assert.matches('nn.ReLU: ', err(nn.ReLU, 1))
    assert.tensor_near(F.leaky_relu(x, { negative_slope = 0.3 }), F.leaky_relu(x, 0.3), 0)
  end)
end)

describe('inplace ReLU in nn.Sequential', function()
  local function conv_net(inplace)
    lunet.manual_seed(7)
    return nn.Sequential(nn.Conv2d(2, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(inplace), nn.MaxPool2d(2),
      nn.Conv2d(4, 4, 3, { padding = 1 }), nn.ReLU(inplace), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 3),
      nn.ReLU(inplace))
  end
  it('gives the out-of-place values and gradients, in training and on the fused eval paths', function()
    local a, b = conv_net(true), conv_net(false)
    local x = lunet.randn(3, 2, 8, 8)
    local ya, yb = a(x), b(x)
    assert.tensor_near(ya, yb, 1e-6)
    ya:sum():backward(); yb:sum():backward()
    local pa, pb = a:parameters(), b:parameters()
    for i = 1, #pa do assert.tensor_near(pa[i].grad, pb[i].grad, 1e-5) end
    a:eval(); b:eval()
    assert.tensor_near(a(x), b(x), 1e-5)
    lunet.no_grad(function() assert.tensor_near(a(x), b(x), 1e-5) end)
  end)
  it('trains (an MLP with inplace ReLUs follows the out-of-place one step for step)', function()
    local function mlp(inplace)
      lunet.manual_seed(11)
      return nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace), nn.Linear(8, 8), nn.LeakyReLU(0.1, inplace),
        nn.Linear(8, 1))
    end
    local a, b = mlp(true), mlp(false)
    local oa = lunet.optim.SGD(a:parameters(), { lr = 0.05 })
    local ob = lunet.optim.SGD(b:parameters(), { lr = 0.05 })
    local x, t = lunet.randn(16, 4), lunet.randn(16, 1)
    local first, last
    for _ = 1, 20 do
      oa:zero_grad(); ob:zero_grad()
      local la, lb = F.mse_loss(a(x), t), F.mse_loss(b(x), t)
      la:backward(); lb:backward()
      oa:step(); ob:step()
      assert.near(la:item(), lb:item(), 1e-5)
      first = first or la:item()
      last = la:item()
    end
    assert.is_true(last < first, ('%g -> %g'):format(first, last))
  end)
  it('overwrites the input of a first inplace ReLU, as torch, also before a MaxPool2d (no swap)', function()
    local x = lunet.randn(1, 2, 4, 4)
    local y = nn.Sequential(nn.ReLU(true), nn.MaxPool2d(2))(x)
    assert.is_true(x:min():item() >= 0)
    assert.tensor_near(y, F.max_pool2d(x, 2), 0)
  end)
end)

describe('inplace dropout', function()
  -- {name, in-place form (x), out-of-place form (x), a module built inplace, an input}
  local drops = {
    { 'dropout', function(x) return F.dropout(x, 0.4, true, true) end, function(x) return F.dropout(x, 0.4) end,
      function() return nn.Dropout(0.4, true) end, function() return lunet.randn(6, 7):double() end },
    { 'dropout', function(x) return F.dropout(x, { p = 0.4, inplace = true }) end,
      function(x) return F.dropout(x, 0.4, true) end, function() return nn.Dropout{ p = 0.4, inplace = true } end,
      function() return lunet.randn(7, 6):double():t() end },   -- (not contiguous)
    { 'dropout2d', function(x) return F.dropout2d(x, 0.4, true, true) end,
      function(x) return F.dropout2d(x, 0.4) end, function() return nn.Dropout2d(0.4, true) end,
      function() return lunet.randn(3, 8, 2, 3):double() end },
    { 'dropout2d', function(x) return F.dropout2d(x, 0.4, { inplace = true }) end,
      function(x) return F.dropout2d(x, { p = 0.4 }) end, function() return nn.Dropout2d{ p = 0.4, inplace = true } end,
      function() return lunet.randn(3, 8, 2, 3):double() end },
  }

  it('draw the out-of-place mask from the same seed, write it into the input and return it (F and module)', function()
    for _, d in ipairs(drops) do
      local x = d[5]()
      local keep = x:clone()
      lunet.manual_seed(5)
      local want = d[3](x)
      assert.tensor_near(x, keep, 0)   -- (out of place: the input left alone)
      assert.is_true(want:eq(0):sum():item() > 0, d[1])
      for _, f in ipairs({ d[2], d[4]() }) do
        x = keep:clone()
        lunet.manual_seed(5)
        local y = f(x)
        assert.is_true(rawequal(x, y), d[1])
        assert.tensor_near(x, want, 0)
      end
    end
  end)
  it('give the out-of-place gradients through the in-place op', function()
    for _, d in ipairs(drops) do
      local v, dout = d[5](), d[5]():normal_()
      local l1 = v:clone():requires_grad_()
      local h = l1 * 1.5
      lunet.manual_seed(8)
      local y = d[2](h)
      assert.is_true(rawequal(h, y), d[1])
      ;(y * dout):sum():backward()
      local l2 = v:clone():requires_grad_()
      lunet.manual_seed(8)
      ;(d[3](l2 * 1.5) * dout):sum():backward()
      assert.tensor_near(l1.grad, l2.grad, 0)
      assert.is_true(l1.grad:eq(0):sum():item() > 0, d[1])
      assert.is_true(gradcheck(function(t)
        lunet.manual_seed(9)   -- (the same mask on every evaluation)
        return d[2](t * 1)
      end, { d[5]():contiguous():requires_grad_() }), d[1])
    end
  end)
  it('refuse a leaf that requires grad and a view of one (naming themselves), but take one under no_grad', function()
    for _, d in ipairs(drops) do
      local leaf = d[5]():requires_grad_()
      assert.matches(d[1] .. ': a leaf tensor that requires grad cannot be changed in place', err(d[2], leaf))
      assert.matches(d[1] .. ': a leaf tensor that requires grad', err(d[4](), leaf))
      assert.matches(d[1] .. ': a view of a leaf tensor that requires grad', err(d[2], leaf:narrow(1, 1, 2)))
      local keep = leaf:detach():clone()
      lunet.no_grad(function()
        lunet.manual_seed(5)
        assert.is_true(rawequal(leaf, d[2](leaf)))
      end)
      lunet.manual_seed(5)
      assert.tensor_near(leaf:detach(), d[3](keep), 0)
    end
  end)
  it('return the input unchanged in eval, not training or for p = 0 (a leaf too, as torch); zero it for p = 1', function()
    for _, d in ipairs(drops) do
      local leaf = d[5]():requires_grad_()
      local keep = leaf:detach():clone()
      local m = d[4]():eval()
      assert.is_true(rawequal(leaf, m(leaf)))
      assert.is_true(rawequal(leaf, F[d[1]](leaf, 0.4, false, true)))
      assert.is_true(rawequal(leaf, F[d[1]](leaf, 0, true, true)))
      assert.is_true(rawequal(leaf, F[d[1]](leaf, { p = 0.4, training = false, inplace = true })))
      assert.tensor_near(leaf:detach(), keep, 0)
      local x = d[5]()
      assert.is_true(rawequal(x, F[d[1]](x, 1, true, true)))
      assert.equal(0, x:abs():sum():item())
    end
  end)
  it('print inplace; refuse bad flags and unknown options', function()
    assert.equal('nn.Dropout(p 0.3, inplace)\n0 parameters', tostring(nn.Dropout(0.3, true)))
    assert.equal('nn.Dropout(p 0.5)\n0 parameters', tostring(nn.Dropout()))
    assert.equal('nn.Dropout2d(p 0.5, inplace)\n0 parameters', tostring(nn.Dropout2d{ inplace = true }))
    local x = lunet.randn(2, 3, 2, 2)
    for _, fn in ipairs({ 'dropout', 'dropout2d' }) do
      assert.matches(fn .. ': inplace must be a boolean, got string', err(F[fn], x, 0.5, true, 'yes'))
      assert.matches(fn .. ': training must be a boolean, got number', err(F[fn], x, 0.5, 1))
      assert.matches(fn .. ": unknown option 'inplce' %(did you mean 'inplace'%?%)", err(F[fn], x, { inplce = true }))
      assert.matches(fn .. ': too many arguments', err(F[fn], x, 0.5, true, true, 1))
      assert.matches(fn .. ": 'p' given both by position and in the options", err(F[fn], x, 0.5, { p = 0.2 }))
      assert.matches(fn .. ': p must be in %[0, 1%], got 2', err(F[fn], x, { p = 2 }))
    end
    assert.matches("nn.Dropout: option 'inplace'", err(nn.Dropout, 0.5, 1))
  end)
end)
