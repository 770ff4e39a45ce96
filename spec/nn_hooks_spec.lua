-- Forward hooks and pre-hooks on modules (lunet.nn.hooks), as PyTorch's
-- register_forward_hook / register_forward_pre_hook: what they see, what
-- they replace, their order and removal, that a hooked module inside a
-- container runs unfused (its hook sees its own output) and that the
-- parallel wrappers call them.
local lunet = require 'lunet'
local nn = lunet.nn

local function close(a, b, tol)
  return (a - b):abs():max():item() <= (tol or 1e-6)
end

-- a CNN whose runs lunet.nn.fuse fuses: Conv2d -> BatchNorm2d -> ReLU in
-- eval, ReLU -> MaxPool2d, BasicBlocks
local function cnn()
  lunet.manual_seed(7)
  return nn.Sequential {
    nn.Conv2d(3, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
    nn.BasicBlock(8, 8), nn.BasicBlock(8, 16, 2),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4),
  }
end

-- some training steps so that the batch norms' running statistics are not 0 and 1
local function trained_cnn()
  local m = cnn()
  local x = lunet.randn({ 6, 3, 8, 8 })
  for _ = 1, 3 do m(x) end
  return m, x
end

describe('nn hooks', function()
  it('a forward hook sees the module, its inputs and its output; a pre-hook sees the inputs', function()
    local lin = nn.Linear(3, 2)
    local x = lunet.randn({ 4, 3 })
    local seen = {}
    lin:register_forward_pre_hook(function(m, inputs) seen.pre_m, seen.pre_x = m, inputs[1] end)
    lin:register_forward_hook(function(m, inputs, out) seen.m, seen.x, seen.out, seen.n = m, inputs[1], out, #inputs end)
    local y = lin(x)
    assert.equal(lin, seen.pre_m)
    assert.equal(x, seen.pre_x)
    assert.equal(lin, seen.m)
    assert.equal(x, seen.x)
    assert.equal(y, seen.out)
    assert.equal(1, seen.n)
  end)

  it('replaces the output (gradients flow through the replacement) and the inputs', function()
    local lin = nn.Linear(3, 2)
    local x = lunet.randn({ 4, 3 })
    local plain = lin(x)
    local h = lin:register_forward_hook(function(_, _, out) return out * 2 end)
    local y = lin(x)
    assert.is_true(close(y, plain * 2))
    y:sum():backward()
    -- d(sum(2 * (x W^T + b)))/db = 2 per row
    assert.is_true(close(lin.bias.grad, lunet.full({ 2 }, 8)))
    h:remove()
    -- a single value replaces the arguments; a list replaces them all
    local p = lin:register_forward_pre_hook(function(_, inputs) return inputs[1] * 0 end)
    assert.is_true(close(lin(x), lin.bias:view(1, 2):expand(4, 2)))
    p:remove()
    local mse = nn.MSELoss()
    local a, b = lunet.randn({ 5 }), lunet.randn({ 5 })
    mse:register_forward_pre_hook(function(_, inputs) return { inputs[2], inputs[2] } end)
    assert.equal(0, mse(a, b):item())
  end)

  it('a module returning more than its output (indices, a recurrent state) keeps the rest under a hook', function()
    local pool = nn.MaxPool2d(2, { return_indices = true })
    local x = lunet.randn({ 1, 1, 4, 4 })
    local y0, i0 = pool(x)
    local seen
    pool:register_forward_hook(function(_, _, out) seen = out; return out * 2 end)
    local y, i = pool(x)
    assert.is_true(close(seen, y0))
    assert.is_true(close(y, y0 * 2))
    assert.is_true(lunet.is_tensor(i))
    assert.is_true(i:equal(i0))
    local lstm = nn.LSTM(3, 2)
    local s = lunet.randn({ 4, 1, 3 })
    local o0, st0 = lstm(s)
    lstm:register_forward_pre_hook(function() end)
    local o, st = lstm(s)
    assert.is_true(close(o, o0))
    assert.equal('table', type(st))
    assert.is_true(close(st[1], st0[1]) and close(st[2], st0[2]))
  end)

  it('run in the order registered (prepend: first); removal is idempotent and leaves the module plain', function()
    local r = nn.ReLU()
    local order = {}
    local h1 = r:register_forward_hook(function() order[#order + 1] = 1 end)
    r:register_forward_hook(function() order[#order + 1] = 2 end)
    r:register_forward_hook(function() order[#order + 1] = 0 end, { prepend = true })
    r(lunet.randn({ 2 }))
    assert.same({ 0, 1, 2 }, order)
    h1:remove(); h1:remove()
    order = {}
    r(lunet.randn({ 2 }))
    assert.same({ 0, 2 }, order)
    for _, h in ipairs({ h1 }) do h:remove() end
    assert.is_true(require('lunet.nn.hooks').plain(nn.ReLU()))
    local lone = nn.ReLU()
    local h = lone:register_forward_hook(function() end)
    assert.is_false(require('lunet.nn.hooks').plain(lone))
    h:remove()
    assert.is_true(require('lunet.nn.hooks').plain(lone))
    assert.matches('RemovableHandle%(nn.ReLU%)', tostring(h))
  end)

  it('a hook that removes itself while the module runs: the others still run', function()
    local r = nn.ReLU()
    local calls = { 0, 0 }
    local h
    h = r:register_forward_hook(function() calls[1] = calls[1] + 1; h:remove() end)
    r:register_forward_hook(function() calls[2] = calls[2] + 1 end)
    r(lunet.randn({ 2 })); r(lunet.randn({ 2 }))
    assert.same({ 1, 2 }, calls)
  end)

  it('fire for the children of a Sequential and of BasicBlocks, which then run unfused, values unchanged', function()
    for _, training in ipairs({ true, false }) do
      local m, x = trained_cnn()
      m:train(training)
      local want = lunet.no_grad(function() return m(x) end)
      local want_grad = m(x)
      -- every child and every BasicBlock's part hooked
      local outs, count = {}, 0
      for _, e in ipairs(m:named_modules()) do
        local name, mod = e[1], e[2]
        if name ~= '' then
          mod:register_forward_hook(function(_, inputs, out)
            outs[name], count = { inputs[1], out }, count + 1
          end)
        end
      end
      local got = lunet.no_grad(function() return m(x) end)
      assert.is_true(close(got, want, 1e-5), 'training ' .. tostring(training))
      assert.is_true(close(m(x), want_grad, 1e-5))
      -- the convolution's hook saw its own output: conv(x), not conv + bn + relu fused
      local conv_in, conv_out = outs['0'][1], outs['0'][2]
      assert.equal(x, conv_in)
      assert.is_true(close(conv_out, lunet.no_grad(function() return nn.functional.conv2d(x, m[1].weight, m[1].bias, { padding = 1 }) end), 1e-5))
      assert.is_true(close(outs['1'][2], lunet.no_grad(function() return m[2]:forward(conv_out) end), 1e-5))
      assert.is_truthy(outs['4.conv1'] and outs['4.bn2'] and outs['5.shortcut.0'])
      assert.is_true(count > 0)
    end
  end)

  it('the model with its hooks removed gives the same values, fused again', function()
    local m, x = trained_cnn()
    m:eval()
    local want = lunet.no_grad(function() return m(x) end)
    local hs = {}
    for _, e in ipairs(m:named_modules()) do hs[#hs + 1] = e[2]:register_forward_hook(function() end) end
    for _, h in ipairs(hs) do h:remove() end
    assert.is_true(close(lunet.no_grad(function() return m(x) end), want, 0))
  end)

  it('a copy keeps its hooks; a hooked Sequential inside a model is one atom for a pipeline', function()
    local m = nn.Sequential { nn.Linear(3, 3), nn.Sequential { nn.ReLU(), nn.Linear(3, 2) } }
    local n = 0
    m[2]:register_forward_hook(function() n = n + 1 end)
    local c = m:clone()
    c(lunet.randn({ 2, 3 }))
    assert.equal(1, n)
    assert.equal(2, #require('lunet.parallel.atoms').of(m))
    assert.equal(3, #require('lunet.parallel.atoms').of(nn.Sequential { nn.Linear(3, 3), nn.Sequential { nn.ReLU(), nn.Linear(3, 2) } }))
  end)

  it('refuses what is not a hook, unknown options and a call that is not a method', function()
    local lin = nn.Linear(2, 2)
    local ok, err = pcall(lin.register_forward_hook, lin, 42)
    assert.is_false(ok)
    assert.matches('register_forward_hook: expected a function, got number', err)
    ok, err = pcall(function() lin:register_forward_pre_hook(function() end, { prepand = true }) end)
    assert.is_false(ok)
    assert.matches('register_forward_pre_hook', err)
    assert.matches('prepand', err)
    assert.matches('nn_hooks_spec.lua', err)
    ok, err = pcall(function() lin.register_forward_hook(function() end) end)
    assert.is_false(ok)
    assert.matches('call it as a method', err)
    local h = lin:register_forward_hook(function() end)
    ok, err = pcall(function() h.remove() end)
    assert.is_false(ok)
    assert.matches('call it as a method', err)
    -- an error in a hook reaches the caller
    lin:register_forward_hook(function() error('hook failed here') end)
    ok, err = pcall(lin, lunet.randn({ 1, 2 }))
    assert.is_false(ok)
    assert.matches('hook failed here', err)
  end)

  describe('in parallel wrappers', function()
    setup(function() lunet.set_cpu_devices(4) end)
    teardown(function()
      for _ = 1, 4 do collectgarbage() end
      pcall(lunet.synchronize)
      lunet.set_cpu_devices(1)
    end)

    it('DataParallel calls each replica (its hooks run per replica) and a Pipeline each atom', function()
      local m = nn.Sequential { nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2) }
      local rows = 0
      m:register_forward_hook(function(_, inputs) rows = rows + inputs[1]:size(1) end)
      local dp = lunet.parallel.DataParallel(m, { devices = { 'cpu:0', 'cpu:1' } })
      dp(lunet.randn({ 6, 3 }))
      lunet.synchronize()
      assert.equal(6, rows)

      local p = nn.Sequential { nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2) }
      local seen = {}
      p[3]:register_forward_hook(function(_, inputs) seen[#seen + 1] = inputs[1]:size(1) end)
      local pipe = lunet.parallel.Pipeline(p, { devices = { 'cpu:0', 'cpu:1' }, chunks = 2, balance = { 2, 1 } })
      pipe:forward_loss(nn.MSELoss(), lunet.randn({ 6, 3 }), lunet.randn({ 6, 2 })):backward()
      assert.same({ 3, 3 }, seen)
    end)

    it('hooks registered after wrapping (and removed) reach every replica of DataParallel and of a hybrid pipeline', function()
      local m = nn.Sequential { nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2) }
      local dp = lunet.parallel.DataParallel(m, { devices = { 'cpu:0', 'cpu:1', 'cpu:2' } })
      local rows, top = 0, 0
      local h = m[3]:register_forward_hook(function(_, inputs) rows = rows + inputs[1]:size(1) end)
      local ht = m:register_forward_pre_hook(function(_, inputs) top = top + inputs[1]:size(1) end)
      dp(lunet.randn({ 9, 3 }))
      lunet.synchronize()
      assert.equal(9, rows)
      assert.equal(9, top)
      h:remove(); ht:remove()
      dp(lunet.randn({ 9, 3 }))
      lunet.synchronize()
      assert.equal(9, rows)
      assert.equal(9, top)

      local p = nn.Sequential { nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2) }
      local pipe = lunet.parallel.Pipeline(p, { devices = { 'cpu:0', 'cpu:1', 'cpu:2', 'cpu:3' }, replicas = 2, chunks = 2,
        balance = { 2, 1 } })
      local crit, x, y = nn.MSELoss(), lunet.randn({ 8, 3 }), lunet.randn({ 8, 2 })
      pipe:forward_loss(crit, x, y):backward()
      local seen = 0
      local hp = p[3]:register_forward_hook(function(_, inputs) seen = seen + inputs[1]:size(1) end)
      pipe:forward_loss(crit, x, y):backward()
      assert.equal(8, seen)
      hp:remove()
      pipe:forward_loss(crit, x, y):backward()
      assert.equal(8, seen)
    end)
  end)
end)
