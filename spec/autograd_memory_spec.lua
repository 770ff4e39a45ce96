-- Autograd state must not outlive its tensors: records, nodes, hooks and
-- retained gradients are freed with the tensors they belong to (device bytes
-- and the Lua heap back to their baseline), and a hook's replacement gradient
-- is checked against the gradient it replaces.
local lunet = require 'lunet'
local nn = lunet.nn

-- collect until the device's live bytes and the Lua heap stop changing: a
-- tensor reached only through another tensor's autograd record goes one
-- cycle after it. Compiled traces are dropped first: they are Lua heap
-- themselves and hold the last objects they saw, and how many a run has
-- compiled by then depends on what ran before (other specs, busy waits).
local function settle()
  jit.flush()
  local last, last_kb
  for _ = 1, 12 do
    lunet.synchronize()   -- (queued work holds its tensors' storages)
    collectgarbage()
    local m, kb = lunet.memory_allocated('cpu:0'), collectgarbage('count')
    if m == last and kb == last_kb then return m, kb end
    last, last_kb = m, kb
  end
  return last, last_kb
end

-- runs f n times and returns the device bytes and Lua KB left behind: the
-- least of two such windows, as a leak leaves its share in each while
-- one-off growth (tables, whose parts keep the size they grew to while
-- garbage waited for a collection) shows in the first one only
local function left_by(f, n, warm)
  for _ = 1, warm or 5 do f() end   -- (fills caches: ones tensors, tables' sizes)
  local b, bl = settle()
  local bytes, kb = math.huge, math.huge
  for _ = 1, 2 do
    for _ = 1, n do f() end
    local a, al = settle()
    bytes, kb = math.min(bytes, a - b), math.min(kb, al - bl)
    b, bl = a, al
  end
  return bytes, kb
end

local MB = 2 ^ 20

describe('autograd memory', function()
  it('normal training of many models returns to the baseline', function()
    local bytes, kb = left_by(function()
      local m = nn.Sequential { nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4) }
      local opt = lunet.optim.SGD(m:parameters(), { lr = 0.1, momentum = 0.9 })
      for _ = 1, 3 do
        opt:zero_grad()
        nn.CrossEntropyLoss()(m(lunet.randn(8, 128)), lunet.tensor({ 1, 2, 3, 4, 1, 2, 3, 4 }, { dtype = 'int64' })):backward()
        opt:step()
      end
    end, 60, 60)   -- 60 models of 66 KB of weights, as many gradients and momenta
    assert.is_true(bytes < 0.2 * MB, ('%d bytes left'):format(bytes))
    assert.is_true(kb < 150, ('%.0f KB of Lua heap left'):format(kb))
  end)

  it('frees tensors whose retain_grad mark refers back to them, before and after backward', function()
    local bytes = left_by(function()
      local x = lunet.randn({ 256, 256 }, { requires_grad = true })
      local r = (x * 2):retain_grad()
      local unused = (x * 3):retain_grad()   -- never reaches a backward
      r:sum():backward()
      assert(r.grad ~= nil and unused.grad == nil)
    end, 30)   -- 30 x 5 tensors of 256 KB
    assert.is_true(bytes < 0.2 * MB, ('%d bytes left'):format(bytes))
  end)

  it('frees a non-leaf tensor whose hook captures it, once its backward has run', function()
    local bytes = left_by(function()
      local m = nn.Linear(256, 256)
      local y = m(lunet.randn(4, 256))
      local z = y:relu()
      z:register_hook(function(g) return g + z:detach() * 0 end)   -- z's node -> hook -> z
      y:register_hook(function(g) m.seen = true; return g end)     -- y's node -> hook -> m
      z:sum():backward()
      assert(m.seen)
    end, 30)
    assert.is_true(bytes < 0.2 * MB, ('%d bytes left'):format(bytes))
  end)

  it('frees leaves and modules whose hooks or .grad refer back to them, with no hook removed', function()
    -- each is a cycle through the tensor's own autograd record: a tensor is
    -- a Lua table holding its record, so the collector frees the cycle
    local bytes, kb = left_by(function()
      local m = nn.Linear(256, 256)
      m.weight:register_hook(function(g) m.calls = (m.calls or 0) + 1 end)         -- weight -> hook -> m -> weight
      m.bias:register_post_accumulate_grad_hook(function(p) m.last = p.grad end)   -- bias -> hook -> m
      local x = lunet.randn({ 64, 64 }, { requires_grad = true })
      x:register_hook(function(g) return g + x:detach() * 0 end)                  -- x -> hook -> x
      local y = lunet.randn({ 64, 64 }, { requires_grad = true })
      y.grad = y                                                                    -- y -> .grad -> y
      ;(m(lunet.randn(2, 256)):sum() + (x * 2):sum()):backward()
      assert(m.calls == 1 and m.last ~= nil and x.grad ~= nil)
    end, 30)   -- 30 x (256 KB of weights, its gradient, 2 x 16 KB and gradients)
    assert.is_true(bytes < 0.2 * MB, ('%d bytes left'):format(bytes))
    assert.is_true(kb < 100, ('%.0f KB of Lua heap left'):format(kb))
  end)

  it('frees a leaf and its module once a hook that captures them is removed', function()
    local bytes = left_by(function()
      local m = nn.Linear(256, 256)
      local h = m.weight:register_hook(function(g) m.calls = (m.calls or 0) + 1 end)
      m(lunet.randn(2, 256)):sum():backward()
      assert(m.calls == 1)
      h:remove()
    end, 30)
    assert.is_true(bytes < 0.2 * MB, ('%d bytes left'):format(bytes))
  end)
end)

describe('gradient hooks', function()
  local err_of = require('support.fixtures').err_of

  it('a replacement of the wrong shape, dtype or device, or not a tensor, is a named error', function()
    local a = lunet.ones({ 3 }, { requires_grad = true })
    local h = a:register_hook(function(g) return lunet.ones(2) end)
    local err = err_of(function() (a * 2):sum():backward() end)
    assert.matches('backward of mul: a gradient hook returned a {2} float32 tensor on cpu:0; ' ..
      'the gradient it replaces is {3} float32 on cpu:0', err, 1, true)
    assert.is_nil(a.grad)   -- nothing accumulated
    h:remove()

    h = a:register_hook(function(g) return g:double() end)
    err = err_of(function() (a * 2):sum():backward() end)
    assert.matches('a gradient hook returned a {3} float64 tensor on cpu:0; the gradient it replaces is {3} float32', err, 1, true)
    h:remove()

    h = a:register_hook(function(g) return 5 end)
    err = err_of(function() (a * 2):sum():backward() end)
    assert.matches('backward of mul: a gradient hook returned a number; expected a tensor or nil', err, 1, true)
    h:remove()

    -- a non-leaf's hook: checked against the gradient flowing into its node
    local y = a * 2
    y:register_hook(function(g) return g:view(3, 1) end)
    err = err_of(function() y:sum():backward() end)
    assert.matches('a gradient hook returned a {3,1} float32 tensor on cpu:0; the gradient it replaces is {3} float32', err, 1, true)

    -- backward called on the leaf itself, and through autograd.backward
    h = a:register_hook(function(g) return g:sum() end)
    err = err_of(function() a:backward(lunet.ones(3)) end)
    assert.matches('backward: a gradient hook returned a {} float32 tensor', err, 1, true)
    err = err_of(function() lunet.autograd.backward({ a }, { lunet.ones(3) }) end)
    assert.matches('autograd.backward: a gradient hook returned a {} float32 tensor', err, 1, true)
    h:remove()

    -- a correct replacement still works
    a:register_hook(function(g) return g * 10 end)
    ;(a * 2):sum():backward()
    assert.tensor_near(a.grad, { 20, 20, 20 })
  end)

  it('a device other than the gradient\'s is refused', function()
    if #lunet.devices() < 2 then return end   -- (LUNET_CPU_DEVICES=2 runs it)
    local a = lunet.ones({ 3 }, { requires_grad = true })
    a:register_hook(function(g) return g:to(lunet.devices()[2]) end)
    local err = err_of(function() (a * 2):sum():backward() end)
    assert.matches('a gradient hook returned a {3} float32 tensor on ' .. lunet.devices()[2], err, 1, true)
  end)
end)
