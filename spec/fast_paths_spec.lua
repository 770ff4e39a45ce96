-- The LeNet-5 fast paths (bench/RESULTS.md, issue 5) against plain
-- references computed here: the 2x2/stride-2 max-pool row kernel (values and
-- indices, ties and NaN, every row width up to 40) and the 1-input-channel
-- direct convolution (forward with bias, weight and bias gradients) against
-- a Lua loop in float64 and against the im2col + GEMM path.
local ffi = require 'ffi'
local lunet = require 'lunet'
local C = lunet.C

local function ok(rc)
  if rc ~= 0 then error(ffi.string(C.ln_last_error()), 2) end
end

-- every element, in order, as Lua numbers
local function flat(t) return t:double():flatten():totable() end

-- values with many ties (small integers) and some NaN
local function tie_tensor(shape, dtype, nan_every)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local buf = ffi.new('double[?]', n)
  local seed = 12345
  for i = 0, n - 1 do
    seed = (seed * 1103515245 + 12345) % 2147483648
    buf[i] = (seed % 5) - 2
    if nan_every and i % nan_every == nan_every - 1 then buf[i] = 0 / 0 end
  end
  local t = lunet.from_buffer(buf, shape, 'float64')
  return dtype == 'float32' and t:float() or t
end

describe('max_pool2d 2x2 stride 2 row kernel', function()
  it('matches a scalar reference (values, indices; ties: first wins; a NaN always wins, as in PyTorch)', function()
    local p = ffi.new('ln_pool2d_params', {kh = 2, kw = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0,
      dil_h = 1, dil_w = 1})
    for _, dt in ipairs({'float32', 'float64'}) do
      for W = 2, 41 do
        local H = 4 + W % 3
        local x = tie_tensor({2, 3, H, W}, dt, (W % 4 == 0) and 7 or nil)
        local OH, OW = math.floor(H / 2), math.floor(W / 2)
        local y = lunet.empty({2, 3, OH, OW}, {dtype = dt})
        local idx = lunet.empty({2, 3, OH, OW}, {dtype = 'int64'})
        ok(C.ln_maxpool2d_forward(y.p, idx.p, x.p, p))
        local xv, yv, iv = flat(x), flat(y), flat(idx)
        for pl = 0, 5 do
          for oh = 0, OH - 1 do
            for ow = 0, OW - 1 do
              local best, bi
              for kh = 0, 1 do
                for kw = 0, 1 do
                  local i = (2 * oh + kh) * W + 2 * ow + kw
                  local v = xv[pl * H * W + i + 1]
                  if best == nil or v > best or v ~= v then best, bi = v, i end
                end
              end
              local o = pl * OH * OW + oh * OW + ow + 1
              local got = yv[o]
              local what = ('%s W=%d plane %d (%d,%d)'):format(dt, W, pl, oh, ow)
              if best ~= best then assert(got ~= got, what .. ': expected NaN')
              else assert.are.equal(best, got, what) end
              assert.are.equal(bi, iv[o], what .. ' index')
            end
          end
        end
      end
    end
  end)
end)

describe('max_pool2d 2x2 stride 2 backward', function()
  local p = ffi.new('ln_pool2d_params', {kh = 2, kw = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0,
    dil_h = 1, dil_w = 1})
  -- dx = dy scattered (added) at the indices, zero elsewhere
  local function check(dx, dy, idx, planes, HW, what)
    local xv, yv, iv = flat(dx), flat(dy), flat(idx)
    local OHW = #yv / planes
    local want = {}
    -- sums rounded to the tensor's dtype after each add, as the kernel adds
    local r32 = ffi.new('float[1]')
    local function round(v)
      if dx.dtype ~= 'float32' then return v end
      r32[0] = v
      return r32[0]
    end
    for i = 1, planes * HW do want[i] = 0 end
    for pl = 0, planes - 1 do
      for o = 1, OHW do
        local k = pl * HW + iv[pl * OHW + o] + 1
        want[k] = round(want[k] + yv[pl * OHW + o])
      end
    end
    for i = 1, #want do assert.are.equal(want[i], xv[i], what .. ' at ' .. i) end
  end
  it('matches the scatter of grad_output at the forward indices (tiling and ragged planes)', function()
    for _, dt in ipairs({'float32', 'float64'}) do
      for _, hw in ipairs({{28, 28}, {10, 10}, {4, 34}, {6, 2}, {7, 9}, {5, 12}}) do
        local H, W = hw[1], hw[2]
        local x = tie_tensor({2, 3, H, W}, dt, 11)
        local OH, OW = math.floor(H / 2), math.floor(W / 2)
        local y = lunet.empty({2, 3, OH, OW}, {dtype = dt})
        local idx = lunet.empty({2, 3, OH, OW}, {dtype = 'int64'})
        ok(C.ln_maxpool2d_forward(y.p, idx.p, x.p, p))
        local dy = lunet.randn({2, 3, OH, OW}, {dtype = dt})
        local dx = lunet.full({2, 3, H, W}, 7, {dtype = dt})
        ok(C.ln_maxpool2d_backward(dx.p, dy.p, idx.p, p))
        check(dx, dy, idx, 6, H * W, ('%s %dx%d'):format(dt, H, W))
      end
    end
  end)
  it('adds at an index outside its window (C API) as the general kernel does', function()
    local dy = lunet.randn({1, 2, 2, 2})
    -- plane 0: in-window indices; plane 1: two outputs pointing at element 0
    local ib = ffi.new('double[8]', {1, 2, 9, 15, 0, 0, 10, 11})
    local idx = lunet.from_buffer(ib, {1, 2, 2, 2}, 'float64'):to('int64')
    local dx = lunet.full({1, 2, 4, 4}, 7)
    ok(C.ln_maxpool2d_backward(dx.p, dy.p, idx.p, p))
    check(dx, dy, idx, 2, 16, 'out-of-window')
  end)
end)

-- max |a - b| / (1 + max |b|)
local function rel_err(a, b)
  local av, bv = flat(a), flat(b)
  assert.are.equal(#bv, #av)
  local m, s = 0, 0
  for i = 1, #bv do
    m = math.max(m, math.abs(av[i] - bv[i]))
    s = math.max(s, math.abs(bv[i]))
  end
  return m / (1 + s)
end

-- The float64 reference of a convolution case c (N, C, O, H, W, k, pad):
-- inputs requiring grad, output and gradients for a random grad_output.
local function conv_reference(c, seed)
  local F = lunet.nn.functional
  lunet.manual_seed(seed)
  local r = {opts = {padding = c.pad}}
  r.x = lunet.randn({c.N, c.C, c.H, c.W}, {dtype = 'float64'}):requires_grad_()
  r.w = lunet.randn({c.O, c.C, c.k, c.k}, {dtype = 'float64'}):requires_grad_()
  r.b = lunet.randn({c.O}, {dtype = 'float64'}):requires_grad_()
  r.y = F.conv2d(r.x, r.w, r.b, r.opts)
  r.g = lunet.randn(r.y:size(), {dtype = 'float64'})
  r.y:backward(r.g)
  return r
end

-- float32 copies of the reference's inputs, requiring grad
local function float_leaves(r)
  return r.x:detach():float():requires_grad_(), r.w:detach():float():requires_grad_(),
    r.b:detach():float():requires_grad_()
end

-- fn(nt) with cpu:0's kernel threads set to 1, then 2; the count (and
-- LUNET_CONV_IMPL, when impl is given) restored afterwards, also on error
pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')
local function on_1_and_2_threads(fn, impl)
  local threads = C.ln_device_threads(0)
  if impl then ffi.C.setenv('LUNET_CONV_IMPL', impl, 1) end
  local ok_, err = pcall(function()
    for _, nt in ipairs({1, 2}) do
      ok(C.ln_set_device_threads(0, nt))
      fn(nt)
    end
  end)
  if impl then ffi.C.unsetenv('LUNET_CONV_IMPL') end
  C.ln_set_device_threads(0, threads)
  if not ok_ then error(err, 0) end
end

describe('direct convolution for 1-2 input channels (float32)', function()
  local F = lunet.nn.functional

  -- forward (with bias), input, weight and bias gradients of the float32 path
  -- against the float64 one (im2col + GEMM in double: the direct kernels are
  -- float32 only), for LeNet's and seed28's first layers and odd shapes
  local cases = {
    {N = 4, C = 1, O = 6, H = 28, W = 28, k = 5, pad = 2},   -- LeNet-5 conv1
    {N = 3, C = 1, O = 16, H = 28, W = 28, k = 3, pad = 1},  -- seed28
    {N = 1, C = 1, O = 6, H = 28, W = 28, k = 5, pad = 2},   -- batch 1
    {N = 2, C = 2, O = 9, H = 13, W = 19, k = 5, pad = 1},   -- 2 channels, 17 columns, 9 outputs
    {N = 2, C = 1, O = 3, H = 12, W = 22, k = 7, pad = 0},   -- 7x7: the generic weight gradient
    {N = 3, C = 1, O = 16, H = 9, W = 40, kh = 4, kw = 3, pad = 1},  -- 4x3
    {N = 2, C = 1, O = 5, H = 10, W = 12, k = 3, pad = 0},   -- 10 columns: GEMM forward, direct gradient
    {N = 3, C = 2, O = 5, H = 16, W = 32, k = 3, pad = 1},   -- 3x3 over whole vectors: weight gradient 3 + 2 outputs at a time
  }
  for _, c in ipairs(cases) do
    local kh, kw = c.kh or c.k, c.kw or c.k
    it(('%dx%dx%dx%d -> %d, %dx%d kernel, pad %d: forward and gradients match float64'):format(
      c.N, c.C, c.H, c.W, c.O, kh, kw, c.pad), function()
      lunet.manual_seed(7)
      local x64 = lunet.randn({c.N, c.C, c.H, c.W}, {dtype = 'float64'})
      local w64 = lunet.randn({c.O, c.C, kh, kw}, {dtype = 'float64'})
      local b64 = lunet.randn({c.O}, {dtype = 'float64'})
      local x, w, b = x64:float():requires_grad_(), w64:float():requires_grad_(), b64:float():requires_grad_()
      x64:requires_grad_(); w64:requires_grad_(); b64:requires_grad_()
      local opts = {padding = c.pad}
      local y, y64 = F.conv2d(x, w, b, opts), F.conv2d(x64, w64, b64, opts)
      local g64 = lunet.randn(y64:size(), {dtype = 'float64'})
      y:backward(g64:float())
      y64:backward(g64)
      assert.is_true(rel_err(y, y64) < 1e-5, 'forward')
      assert.is_true(rel_err(w.grad, w64.grad) < 1e-5, 'weight gradient')
      assert.is_true(rel_err(b.grad, b64.grad) < 1e-5, 'bias gradient')
      assert.is_true(rel_err(x.grad, x64.grad) < 1e-5, 'input gradient')
      -- and without a bias
      w.grad = nil
      F.conv2d(x, w, nil, opts):backward(g64:float())
      assert.is_true(rel_err(w.grad, w64.grad) < 1e-5, 'weight gradient, no bias')
    end)
  end
end)

describe('direct gradients for narrow 3-16 channel convolutions (float32)', function()
  local F = lunet.nn.functional

  -- 16 outputs and rows up to 16 wide: the weight gradient over output-channel
  -- vectors (nn_conv_direct_wgrad16); 3-8 input channels, rows up to 16: the
  -- narrow data gradient (LUNET_CONV_IMPL=direct; oneDNN's by default), each
  -- against the float64 path (im2col + GEMM in double)
  local cases = {
    {N = 4, C = 6, O = 16, H = 14, W = 14, k = 5, pad = 0},   -- LeNet-5 conv2
    {N = 3, C = 6, O = 16, H = 14, W = 14, k = 5, pad = 0},   -- odd batch over 2 threads
    {N = 2, C = 3, O = 16, H = 11, W = 12, k = 5, pad = 2},   -- padded, odd rows
    {N = 5, C = 8, O = 16, H = 13, W = 10, k = 3, pad = 1},   -- 3x3, 8 channels
    {N = 2, C = 16, O = 16, H = 9, W = 16, k = 3, pad = 0},   -- 16 channels (data: wide shape)
    {N = 2, C = 5, O = 12, H = 12, W = 15, k = 5, pad = 1},   -- 12 outputs: narrow data only
  }
  for _, impl in ipairs({'auto', 'direct'}) do
    for _, c in ipairs(cases) do
      it(('%s: %dx%dx%dx%d -> %d, %dx%d, pad %d: gradients match float64 (1 and 2 threads)'):format(
        impl, c.N, c.C, c.H, c.W, c.O, c.k, c.k, c.pad), function()
        local r = conv_reference(c, 11)
        on_1_and_2_threads(function(nt)
          local x, w, b = float_leaves(r)
          F.conv2d(x, w, b, r.opts):backward(r.g:float())
          assert.is_true(rel_err(w.grad, r.w.grad) < 1e-5, nt .. ' threads: weight gradient')
          assert.is_true(rel_err(b.grad, r.b.grad) < 1e-5, nt .. ' threads: bias gradient')
          assert.is_true(rel_err(x.grad, r.x.grad) < 1e-5, nt .. ' threads: input gradient')
          w.grad = nil
          F.conv2d(x, w, nil, r.opts):backward(r.g:float())
          assert.is_true(rel_err(w.grad, r.w.grad) < 1e-5, nt .. ' threads: weight gradient, no bias')
        end, impl == 'direct' and 'direct' or nil)
      end)
    end
  end
end)

describe('RGB stems: direct forward, input and weight gradients for 3 input channels (float32)', function()
  local F = lunet.nn.functional

  -- 3 input channels, at most 16 outputs, NCHW: the forward in the direct
  -- kernel's 8 x 32 blocks (conv2d.c's direct_stem); the input gradient of
  -- rows wider than 16 in the few shape (3 channels by 8 rows, conv_direct.c;
  -- 3x3, padding 1, rows of whole vectors: read unpadded on AVX-512),
  -- 3x3 over rows of whole 16-column vectors, the weight gradient too (several
  -- output channels at a time, AVX-512); each against the float64 path
  -- (im2col + GEMM in double), 1 and 2 threads.
  -- The shapes cover partial row blocks and column vectors, 5x5, and the
  -- cases that keep other kernels (batch 1 gradient, 24 outputs forward).
  local cases = {
    {N = 4, C = 3, O = 16, H = 32, W = 32, k = 3, pad = 1},   -- ResNet-8 and seed32 stems
    {N = 2, C = 3, O = 8, H = 19, W = 37, k = 3, pad = 0},    -- 17 rows, 35 columns: ragged blocks
    {N = 3, C = 3, O = 6, H = 21, W = 20, k = 5, pad = 2},    -- 5x5, 6 outputs
    {N = 2, C = 3, O = 12, H = 9, W = 17, k = 3, pad = 1},    -- 17 columns; gradient on GEMM (scratch too small)
    {N = 1, C = 3, O = 16, H = 32, W = 32, k = 3, pad = 1},   -- batch 1
    {N = 2, C = 3, O = 24, H = 12, W = 24, k = 3, pad = 1},   -- 24 outputs
    {N = 3, C = 3, O = 8, H = 16, W = 16, k = 3, pad = 1},    -- weight gradient 3 + 3 + 2 outputs at a time
    {N = 2, C = 3, O = 16, H = 13, W = 48, k = 3, pad = 1},   -- input gradient unpadded: 3 vectors a row, 13 rows
  }
  for _, c in ipairs(cases) do
    it(('%dx%dx%dx%d -> %d, %dx%d, pad %d: forward and gradients match float64 (1 and 2 threads)'):format(
      c.N, c.C, c.H, c.W, c.O, c.k, c.k, c.pad), function()
      local r = conv_reference(c, 13)
      on_1_and_2_threads(function(nt)
        local x, w, b = float_leaves(r)
        local y = F.conv2d(x, w, b, r.opts)
        assert.is_true(rel_err(y, r.y) < 1e-5, nt .. ' threads: forward')
        y:backward(r.g:float())
        assert.is_true(rel_err(x.grad, r.x.grad) < 1e-5, nt .. ' threads: input gradient')
        assert.is_true(rel_err(w.grad, r.w.grad) < 1e-5, nt .. ' threads: weight gradient')
        assert.is_true(rel_err(b.grad, r.b.grad) < 1e-5, nt .. ' threads: bias gradient')
        -- without a bias, and the input gradient alone
        w = r.w:detach():float()
        x.grad = nil
        local y2 = F.conv2d(x, w, nil, r.opts)
        assert.is_true(rel_err(y2, r.y - r.b:detach():view(1, c.O, 1, 1)) < 1e-5, nt .. ' threads: forward, no bias')
        y2:backward(r.g:float())
        assert.is_true(rel_err(x.grad, r.x.grad) < 1e-5, nt .. ' threads: input gradient alone')
      end)
    end)
  end
end)

describe('backward frees the gradients it made once consumed', function()
  it('keeps O(1) gradients of a chain alive, and shared gradients intact', function()
    collectgarbage(); collectgarbage()
    collectgarbage('stop')
    local ok, err = pcall(function()
      local n, size = 20, 65536   -- 256 KB tensors: under the collector's own trigger
      local x = lunet.randn({ size }):requires_grad_()
      local y = x
      for _ = 1, n do y = (y * 1.5):relu() + 0 end
      local s = y:sum()
      local before = tonumber(C.ln_memory_allocated(0))
      s:backward()
      local grown = tonumber(C.ln_memory_allocated(0)) - before
      -- x.grad (1 tensor) plus a few in flight, not 3 per link
      assert.is_true(grown <= 4 * size * 4, ('grew by %d bytes'):format(grown))
      -- the gradient is right: (1.5^n where x > 0)
      local xv, gv = flat(x), flat(x.grad)
      for i = 1, 100 do
        local want = xv[i] > 0 and 1.5 ^ n or 0
        assert.is_true(math.abs(gv[i] - want) <= 1e-5 * want + 1e-12, 'grad ' .. i)
      end
      -- one gradient handed to several nodes (add passes it to both inputs)
      local a = lunet.randn({ 8 }):requires_grad_()
      local z = (a * a + a * 3):sum()
      z:backward()
      local av, ag = flat(a), flat(a.grad)
      for i = 1, 8 do assert.is_true(math.abs(ag[i] - (2 * av[i] + 3)) < 1e-5, 'shared ' .. i) end
    end)
    collectgarbage('restart')
    if not ok then error(err, 0) end
  end)

  it('keeps gradients that were cast, shared or seen by a hook when summing into .grad', function()
    local x = lunet.randn({ 1000 }):double():requires_grad_()
    local y = lunet.randn({ 1000 }):requires_grad_()    -- float32: the float64 gradient is cast
    local w = lunet.randn({ 1000 }):requires_grad_()
    local c = lunet.randn({ 1000 }):double()             -- no grad: w alone gets add's gradient, cast
    local z = lunet.randn({ 1000 }):requires_grad_()
    local seen = {}
    z:register_hook(function(g) seen[#seen + 1] = g end)   -- keeps every gradient it sees
    for _ = 1, 3 do
      ((x + y):sum() + (w + c):sum() * 3 + (z * 2):sum()):backward()
      collectgarbage()
    end
    for i = 1, 1000, 111 do
      assert.equal(3, flat(y.grad)[i]); assert.equal(3, flat(x.grad)[i]); assert.equal(6, flat(z.grad)[i])
      assert.equal(9, flat(w.grad)[i])
    end
    for k = 1, 3 do assert.equal(2, flat(seen[k])[1]) end   -- still readable
    -- the caller's own gradient, passed through add and cast for the leaf
    local g64 = lunet.ones({ 1000 }):double()
    for _ = 1, 3 do (w + c):backward(g64) end
    assert.equal(1000, g64:sum():item())
    assert.equal(12, flat(w.grad)[1])
  end)

  it('frees a weight gradient once summed into .grad, inline and on a stream worker', function()
    lunet.set_cpu_devices(2)
    collectgarbage(); collectgarbage()
    collectgarbage('stop')
    local ok, err = pcall(function()
      for _, dev in ipairs({ 'cpu:0', 'cpu:1' }) do
        local id = tonumber(dev:match('%d+'))
        local lin = lunet.nn.Linear(1024, 1024):to(dev)   -- a 4 MB weight gradient per backward
        local x = lunet.randn({ 1, 1024 }):to(dev)
        lin(x):sum():backward()
        local once = lin.weight.grad:clone()
        lunet.synchronize()
        local before = tonumber(C.ln_memory_allocated(id))
        for _ = 1, 10 do lin(x):sum():backward() end
        lunet.synchronize()
        local grown = tonumber(C.ln_memory_allocated(id)) - before
        assert.is_true(grown < 4 * 1048576, ('%s: grew by %d bytes in 10 backwards'):format(dev, grown))
        local want, got = flat(once * 11), flat(lin.weight.grad)
        for i = 1, #want, 997 do
          assert.is_true(math.abs(got[i] - want[i]) <= 1e-5 * math.abs(want[i]) + 1e-6, dev .. ' grad ' .. i)
        end
      end
    end)
    collectgarbage('restart')
    collectgarbage(); collectgarbage()   -- the cpu:1 tensors, before cpu:1 goes
    lunet.synchronize()
    lunet.set_cpu_devices(1)
    if not ok then error(err, 0) end
  end)
end)
