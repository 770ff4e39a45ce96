-- lunet.set_float32_matmul_precision / get_float32_matmul_precision (as
-- torch's): 'highest' (default) and 'high' leave float32 results bit for bit
-- as they were; 'medium' runs float32 convolutions on oneDNN and float32
-- matmul/linear/bmm/addmm with bfloat16 inputs and float32 accumulation
-- (within bfloat16's error of float32, and different from highest where the
-- CPU has AVX512_BF16); float64 never changes; a small CNN trains under it;
-- the errors. Every test restores 'highest'.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local nn = lunet.nn
local F = nn.functional

-- does medium take the bfloat16 path here? (oneDNN's ISA query, as the backend)
local hw = lunet.core.C.ln_cpu_bf16_supported() == 1
local function cpuinfo_bf16()
  local f = io.open('/proc/cpuinfo')
  if not f then return false end
  local s = f:read('*a')
  f:close()
  return s:find('avx512_bf16', 1, true) ~= nil
end

-- float32 passes under test: name -> function returning a list of tensors
-- (outputs and gradients), computed from fixed inputs
local function passes()
  lunet.manual_seed(7)
  local x = lunet.randn(4, 16, 12, 12)
  local w = lunet.randn(32, 16, 3, 3) * 0.1
  local b = lunet.randn(32)
  local a, m = lunet.randn(33, 70), lunet.randn(70, 45)
  local lw, lb = lunet.randn(24, 70) * 0.1, lunet.randn(24)
  local b1, b2 = lunet.randn(3, 20, 40), lunet.randn(3, 40, 17)
  local x1, w1 = lunet.randn(2, 8, 50), lunet.randn(16, 8, 5)
  local x3, w3 = lunet.randn(2, 4, 6, 7, 8), lunet.randn(8, 4, 3, 3, 3)
  local wt = lunet.randn(16, 8, 3, 3) * 0.1
  local function grads(f, ...)
    local ins = { ... }
    for i, t in ipairs(ins) do ins[i] = t:clone():requires_grad_() end
    local y = f(table.unpack(ins))
    local r = { y:detach() }
    y:backward(lunet.ones_like(y))   -- (the sum's gradient: every output weighs 1)
    for _, t in ipairs(ins) do r[#r + 1] = t.grad end
    return r
  end
  return {
    conv2d = function() return grads(function(xx, ww, bb) return F.conv2d(xx, ww, bb, { padding = 1 }) end, x, w, b) end,
    conv2d_strided = function()
      return grads(function(xx, ww) return F.conv2d(xx, ww, nil, { stride = 2, padding = 1 }) end, x, w)
    end,
    linear = function() return grads(F.linear, a, lw, lb) end,
    matmul = function() return grads(function(p, q) return p:matmul(q) end, a, m) end,
    matmul_t = function() return { a:t():t():matmul(m:t():contiguous():t()), m:t():matmul(a:t()) } end,
    bmm = function() return grads(function(p, q) return p:bmm(q) end, b1, b2) end,
    addmm = function() return { lunet.randn(33, 45):addmm(a, m, { beta = 0.5, alpha = 2 }) } end,
    conv1d = function() return grads(F.conv1d, x1, w1) end,
    conv3d = function() return grads(function(xx, ww) return F.conv3d(xx, ww, nil, { padding = 1 }) end, x3, w3) end,
    conv_transpose2d = function()
      return grads(function(xx, ww) return F.conv_transpose2d(xx, ww, nil, { stride = 2 }) end, x, wt)
    end,
  }
end

-- bias gradients: sums of grad_output (all ones here), exact in either
local EXACT = { conv2d = { [4] = true }, linear = { [4] = true } }

local function run_all(precision)
  lunet.set_float32_matmul_precision(precision)
  local r = {}
  for name, f in pairs(passes()) do r[name] = f() end
  lunet.set_float32_matmul_precision('highest')
  return r
end

describe('float32 matmul precision', function()
  after_each(function() lunet.set_float32_matmul_precision('highest') end)

  it("defaults to 'highest', round-trips, and names bad values", function()
    assert.equal('highest', lunet.get_float32_matmul_precision())
    for _, p in ipairs { 'high', 'medium', 'highest' } do
      lunet.set_float32_matmul_precision(p)
      assert.equal(p, lunet.get_float32_matmul_precision())
    end
    assert.matches("set_float32_matmul_precision: unknown precision 'low' %(expected 'highest', 'high' or 'medium'%)",
      fx.err_of(lunet.set_float32_matmul_precision, 'low'))
    assert.matches("unknown precision 'Medium'", fx.err_of(lunet.set_float32_matmul_precision, 'Medium'))
    assert.matches("set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got number",
      fx.err_of(lunet.set_float32_matmul_precision, 1))
    assert.matches('got nil', fx.err_of(lunet.set_float32_matmul_precision))
    assert.equal('highest', lunet.get_float32_matmul_precision())   -- a bad value changes nothing
  end)

  it("'highest' and 'high' are bit for bit what float32 gave before any setting", function()
    local before = {}
    for name, f in pairs(passes()) do before[name] = f() end
    run_all('medium')   -- (primitives of the other kind cached meanwhile)
    for _, p in ipairs { 'highest', 'high' } do
      local now = run_all(p)
      for name, list in pairs(before) do
        for i, t in ipairs(list) do
          assert.equal(0, fx.maxdiff(now[name][i], t), ('%s: %s result %d differs'):format(p, name, i))
        end
      end
    end
  end)

  it("'medium' stays within bfloat16's error of float32, and differs from it where the CPU has bf16", function()
    local hi, med = run_all('highest'), run_all('medium')
    local same = {}
    for name, list in pairs(hi) do
      for i, t in ipairs(list) do
        local r = fx.rel(med[name][i], t)
        assert.is_true(r < 1e-2, ('%s result %d: relative error %g'):format(name, i, r))
        if r == 0 and not (EXACT[name] and EXACT[name][i]) then same[#same + 1] = name .. ' ' .. i end
      end
    end
    if not hw then
      pending(('no AVX512_BF16 (cpuinfo: %s): medium computes as highest'):format(tostring(cpuinfo_bf16())))
      return
    end
    assert.is_true(cpuinfo_bf16())
    assert.same({}, same, 'results medium gave bit for bit as highest')
  end)

  it('never changes float64, nor empty or k = 0 products', function()
    local a, b = lunet.randn(30, 40, { dtype = 'float64' }), lunet.randn(40, 20, { dtype = 'float64' })
    local x, w = lunet.randn(2, 8, 9, 9, { dtype = 'float64' }), lunet.randn(16, 8, 3, 3, { dtype = 'float64' })
    local r0, c0 = a:matmul(b), F.conv2d(x, w)
    lunet.set_float32_matmul_precision('medium')
    assert.equal(0, fx.maxdiff(a:matmul(b), r0))
    assert.equal(0, fx.maxdiff(F.conv2d(x, w), c0))
    assert.same({ 0, 5 }, lunet.zeros(0, 3):matmul(lunet.zeros(3, 5)):size())
    local z = lunet.zeros(4, 0):matmul(lunet.zeros(0, 5))
    assert.same({ 4, 5 }, z:size())
    assert.equal(0, z:abs():max():item())
    assert.equal(0, fx.maxdiff(lunet.ones(2, 3):addmm(lunet.zeros(2, 0), lunet.zeros(0, 3), { beta = 0.5 }),
      lunet.full({ 2, 3 }, 0.5)))
  end)

  -- device workers keep oneDNN state per thread (c/cpu/dnnl_ctx.c: one
  -- engine and stream for the convolutions and bf16 products): it goes at
  -- thread exit, and fresh workers make their own (run under ASan too)
  it("device workers running 'medium' kernels exit cleanly, and fresh ones compute the same", function()
    lunet.manual_seed(5)
    local x, w = lunet.randn(4, 16, 10, 10), lunet.randn(32, 16, 3, 3) * 0.1
    local a, b = lunet.randn(64, 96), lunet.randn(96, 80)
    lunet.set_float32_matmul_precision('medium')
    local function run(dev)
      local xx, ww = x:detach():to(dev):requires_grad_(), w:detach():to(dev):requires_grad_()
      local y = F.conv2d(xx, ww, nil, { padding = 1 })
      y:backward(lunet.ones_like(y))
      local m = a:to(dev):matmul(b:to(dev))
      local r = { y:detach():to('cpu:0'), xx.grad:to('cpu:0'), ww.grad:to('cpu:0'), m:to('cpu:0') }
      xx, ww, y, m = nil, nil, nil, nil   -- (no stale reference keeps the device's memory)
      return r
    end
    local ref = run('cpu:0')
    local hi = {}
    lunet.set_float32_matmul_precision('highest')
    for i, t in ipairs(run('cpu:0')) do hi[i] = t end
    lunet.set_float32_matmul_precision('medium')
    for _ = 1, 3 do
      lunet.set_cpu_devices(3)
      local r1, r2 = run('cpu:1'), run('cpu:2')
      lunet.synchronize()
      collectgarbage(); collectgarbage()
      lunet.synchronize()
      lunet.set_cpu_devices(1)   -- the workers stop: their threads exit
      assert.equal(4, #r1)
      for i = 1, #ref do
        for _, r in ipairs { r1, r2 } do
          assert.is_true(fx.rel(r[i], hi[i]) < 1e-2, ('result %d: relative error %g'):format(i, fx.rel(r[i], hi[i])))
        end
      end
    end
    assert.equal(1, lunet.device_count())
  end)

  -- oneDNN 2.6's bfloat16 weight-gradient kernel meets its threads at a
  -- spinning barrier per image when they share one (here: stride 2, 16 -> 32
  -- channels, as ResNet-8); on a loaded machine each meeting waited out a
  -- time slice (1-2 s training steps). conv_dnnl.c runs that pass on one
  -- thread: counted by thread count (lunet_internal.h), whatever the threads
  it("runs bfloat16 weight gradients on one oneDNN thread at any thread count", function()
    local ffi = require 'ffi'
    if not pcall(ffi.typeof, 'ln_dnnl_stats') then ffi.cdef(require 'lunet.cdef_internal') end
    local function stats()
      local s = ffi.new('ln_dnnl_stats')
      assert.equal(0, lunet.C.ln_test_dnnl_stats(s))
      return tonumber(s.bf16_bwd_w_1t), tonumber(s.bf16_bwd_w_mt)
    end
    local threads = lunet.get_num_threads()
    lunet.manual_seed(11)
    local x, w = lunet.randn(8, 16, 16, 16), lunet.randn(32, 16, 3, 3) * 0.1
    local function wgrad()
      local ww = w:clone():requires_grad_()
      local y = F.conv2d(x, ww, nil, { stride = 2, padding = 1 })
      y:backward(lunet.ones_like(y))
      return ww.grad
    end
    local ref = wgrad()
    local one0 = stats()
    lunet.set_float32_matmul_precision('medium')
    for _, n in ipairs { 2, 3, 1 } do
      lunet.set_num_threads(n)
      local g = wgrad()
      assert.is_true(fx.rel(g, ref) < 1e-2, ('%d threads: relative error %g'):format(n, fx.rel(g, ref)))
    end
    lunet.set_num_threads(threads)
    local one, many = stats()
    assert.equal(0, many, "bfloat16 weight gradients run on several threads")
    if hw then assert.is_true(one >= one0 + 3, ('%d bfloat16 weight gradients counted'):format(one - one0)) end
  end)

  it("a small CNN trains under 'medium'", function()
    lunet.manual_seed(3)
    lunet.set_float32_matmul_precision('medium')
    local net = nn.Sequential {
      nn.Conv2d(3, 16, 3, { padding = 1 }), nn.ReLU(), nn.Conv2d(16, 16, 3, { padding = 1 }), nn.ReLU(),
      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 8 * 8, 4) }
    local x = lunet.randn(16, 3, 16, 16)
    local y = lunet.tensor({ 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4 }, { dtype = 'int64' })
    local opt = lunet.optim.SGD(net:parameters(), { lr = 0.05, momentum = 0.9 })
    local first, last
    for step = 1, 15 do
      opt:zero_grad()
      local loss = nn.CrossEntropyLoss()(net(x), y)
      loss:backward()
      opt:step()
      if step == 1 then first = loss:item() end
      last = loss:item()
    end
    assert.is_true(last < 0.5 * first, ('loss %g -> %g'):format(first, last))
    assert.equal('medium', lunet.get_float32_matmul_precision())
  end)
end)
