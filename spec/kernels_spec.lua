-- The CNN kernels of lunet.h ("Neural-network kernels"), called directly
-- through FFI: outputs and gradients against PyTorch fixtures
-- (tools/gen_kernel_fixtures.py), float64 finite differences, argument
-- errors, and the queued path of a virtual device.
local ffi = require 'ffi'
local lunet = require 'lunet'
local C = lunet.C

local function fixture(name) return dofile('spec/fixtures/kernels_' .. name .. '.lua') end
local conv_cases, pool_cases = fixture('conv'), fixture('pool')
local norm_cases, softmax_cases, nll_cases = fixture('norm'), fixture('softmax'), fixture('nll')

-- ---- helpers -------------------------------------------------------------------------

local function values(f)
  local t = {}
  for v in f.data:gmatch('%S+') do t[#t + 1] = tonumber(v) end
  return t
end

-- A fixture input as a lunet tensor of dtype (float32, float64, int64). The
-- inputs are float32 values printed with 9 digits: rounding to float32 gives
-- them back exactly, for float64 too.
local function T(f, dtype, device)
  local vals = values(f)
  local int = dtype == 'int64'
  local buf = ffi.new(int and 'int64_t[?]' or 'float[?]', math.max(#vals, 1))
  for i = 1, #vals do buf[i - 1] = vals[i] end
  local t = lunet.from_buffer(buf, f.shape, int and 'int64' or 'float32', device)
  if dtype == 'float64' then t = t:double() end
  return t
end

local function empty(shape, dtype, device) return lunet.empty(shape, {dtype = dtype, device = device}) end
local function ptr(t) return t and t.p or nil end

-- Raise the C message when a call fails.
local function ok(rc)
  if rc ~= 0 then error(ffi.string(C.ln_last_error()), 2) end
end

-- The C call's error message (it must fail).
local function fails(rc)
  assert.is_not.equal(0, rc)
  return ffi.string(C.ln_last_error())
end

-- Errors found by a kernel: at once on an inline device, else at the next sync.
local function kernel_fails(rc, device)
  if rc == 0 then rc = C.ln_sync(device or 0) end
  return fails(rc)
end

-- t against fixture f (or a flat table): shape and values within tol*(1+|y|).
local function near(t, f, tol, what)
  local expected = f
  if lunet.is_tensor(f) then
    local b, n = f:double():read()
    expected = {}
    for i = 1, n do expected[i] = b[i - 1] end
  elseif f.data then
    expected = values(f)
  end
  if f.shape then assert.same(f.shape, t:size(), what .. ': shape') end
  local buf, n = t:double():read()
  assert.equal(#expected, n, what .. ': element count')
  for i = 1, n do
    local x, y = buf[i - 1], expected[i]
    if not (math.abs(x - y) <= tol * (1 + math.abs(y))) then
      error(('%s: element %d is %.9g, expected %.9g (tol %g)'):format(what, i, x, y, tol), 2)
    end
  end
end

local function conv_params(c)
  return ffi.new('ln_conv2d_params', {stride_h = c.stride[1], stride_w = c.stride[2], pad_h = c.pad[1],
    pad_w = c.pad[2], dil_h = c.dil[1], dil_w = c.dil[2], groups = c.groups})
end

local function pool_params(c)
  return ffi.new('ln_pool2d_params', {kh = c.k[1], kw = c.k[2], stride_h = c.stride[1], stride_w = c.stride[2],
    pad_h = c.pad[1], pad_w = c.pad[2], dil_h = c.dil[1], dil_w = c.dil[2], ceil_mode = c.ceil_mode and 1 or 0,
    count_include_pad = c.count_include_pad and 1 or 0})
end

-- A non-contiguous view holding the same values as t: the first half of
-- the last dim of a tensor twice as wide.
local function noncontig(t)
  local shape = t:size()
  local n = shape[#shape]
  shape[#shape] = 2 * n
  local v = lunet.full(shape, 99, {dtype = t.dtype, device = t.device}):narrow(-1, 1, n)
  v:copy_(t)
  assert.is_false(v:is_contiguous())
  return v
end

-- Central finite differences of L = sum(forward() * v) with respect to each
-- float64 tensor in `wrt` ({x, analytic_grad, name}), compared with the
-- analytic gradients. forward() must recompute from the tensors' memory.
local function fd_check(forward, v, wrt, opts)
  opts = opts or {}
  local eps, tol = opts.eps or 1e-6, opts.tol or 1e-6
  local vb, nv = v:read()
  local function loss()
    local buf, n = forward():read()
    assert(n == nv)
    local s = 0
    for i = 0, n - 1 do s = s + buf[i] * vb[i] end
    return s
  end
  for _, w in ipairs(wrt) do
    local x, g, name = w[1], w[2], w[3]
    assert(x.dtype == 'float64' and x:is_contiguous())
    local p = ffi.cast('double*', C.ln_data_ptr(x.p))
    local gb = g:read()
    for i = 0, x:numel() - 1 do
      local old = p[i]
      p[i] = old + eps
      local lp = loss()
      p[i] = old - eps
      local lm = loss()
      p[i] = old
      local num = (lp - lm) / (2 * eps)
      if math.abs(num - gb[i]) > tol * (1 + math.abs(num)) then
        error(('%s[%d]: analytic %.10g, finite difference %.10g'):format(name, i, gb[i], num), 2)
      end
    end
  end
end

-- conv2d forward + backward of fixture case c in dtype; returns y, dx, dw, db
local function run_conv(c, dtype, device, views)
  local x, w, dy = T(c.x, dtype, device), T(c.w, dtype, device), T(c.dy, dtype, device)
  local b = c.b and T(c.b, dtype, device)
  if views then x, w, dy = noncontig(x), noncontig(w), noncontig(dy) end
  local p = conv_params(c)
  local y = empty(c.y.shape, dtype, device)
  ok(C.ln_conv2d_forward(y.p, x.p, w.p, ptr(b), p))
  local dx, dw = empty(c.x.shape, dtype, device), empty(c.w.shape, dtype, device)
  local db = c.b and empty(c.b.shape, dtype, device)
  ok(C.ln_conv2d_backward(dx.p, dw.p, ptr(db), dy.p, x.p, w.p, p))
  return y, dx, dw, db
end

-- ---- conv2d ----------------------------------------------------------------------------

describe('conv2d kernels', function()
  for _, c in ipairs(conv_cases) do
    it('match PyTorch (forward, grad input/weight/bias): ' .. c.name, function()
      for _, dt in ipairs({'float32', 'float64'}) do
        local tol = dt == 'float32' and 1e-5 or 1e-10
        local y, dx, dw, db = run_conv(c, dt)
        near(y, c.y, tol, c.name .. ' ' .. dt .. ' out')
        near(dx, c.dx, tol, c.name .. ' ' .. dt .. ' grad input')
        near(dw, c.dw, tol, c.name .. ' ' .. dt .. ' grad weight')
        if c.b then near(db, c.db, tol, c.name .. ' ' .. dt .. ' grad bias') end
      end
    end)
  end

  it('take non-contiguous inputs and write non-contiguous outputs', function()
    for _, c in ipairs({conv_cases[2], conv_cases[4]}) do
      local y, dx, dw, db = run_conv(c, 'float32', nil, true)
      near(y, c.y, 1e-5, 'out'); near(dx, c.dx, 1e-5, 'grad input'); near(dw, c.dw, 1e-5, 'grad weight')
      if c.b then near(db, c.db, 1e-5, 'grad bias') end
      -- outputs that are transposed views
      local x, w, dy = T(c.x, 'float32'), T(c.w, 'float32'), T(c.dy, 'float32')
      local yv = noncontig(empty(c.y.shape, 'float32'))
      local dxv, dwv = noncontig(empty(c.x.shape, 'float32')), noncontig(empty(c.w.shape, 'float32'))
      ok(C.ln_conv2d_forward(yv.p, x.p, w.p, nil, conv_params(c)))
      ok(C.ln_conv2d_backward(dxv.p, dwv.p, nil, dy.p, x.p, w.p, conv_params(c)))
      near(dxv, c.dx, 1e-5, 'grad input view'); near(dwv, c.dw, 1e-5, 'grad weight view')
      if not c.b then near(yv, c.y, 1e-5, 'out view') end
    end
  end)

  it('backward computes only the gradients asked for, overwriting them', function()
    local c = conv_cases[1]
    local x, w, dy = T(c.x, 'float32'), T(c.w, 'float32'), T(c.dy, 'float32')
    local p = conv_params(c)
    local dw = lunet.full(c.w.shape, 7)
    ok(C.ln_conv2d_backward(nil, dw.p, nil, dy.p, x.p, w.p, p))
    near(dw, c.dw, 1e-5, 'grad weight alone')
    local dx = lunet.full(c.x.shape, 7)
    ok(C.ln_conv2d_backward(dx.p, nil, nil, dy.p, x.p, w.p, p))
    near(dx, c.dx, 1e-5, 'grad input alone')
    local db = lunet.full(c.b.shape, 7)
    ok(C.ln_conv2d_backward(nil, nil, db.p, dy.p, x.p, w.p, p))
    near(db, c.db, 1e-5, 'grad bias alone')
    ok(C.ln_conv2d_backward(nil, nil, nil, dy.p, x.p, w.p, p))
  end)

  it('backward matches finite differences in float64 (stride, padding, dilation, groups)', function()
    lunet.manual_seed(7)
    local p = ffi.new('ln_conv2d_params', {stride_h = 2, stride_w = 1, pad_h = 1, pad_w = 1, dil_h = 1, dil_w = 2, groups = 2})
    local x = lunet.randn({2, 4, 6, 5}, {dtype = 'float64'})
    local w = lunet.randn({4, 2, 3, 2}, {dtype = 'float64'})
    local b = lunet.randn({4}, {dtype = 'float64'})
    -- OH = (6 + 2 - 2 - 1) / 2 + 1 = 3, OW = (5 + 2 - 2 - 1) / 1 + 1 = 5
    local v = lunet.randn({2, 4, 3, 5}, {dtype = 'float64'})
    local function forward()
      local y = empty({2, 4, 3, 5}, 'float64')
      ok(C.ln_conv2d_forward(y.p, x.p, w.p, b.p, p))
      return y
    end
    local dx, dw, db = empty({2, 4, 6, 5}, 'float64'), empty({4, 2, 3, 2}, 'float64'), empty({4}, 'float64')
    ok(C.ln_conv2d_backward(dx.p, dw.p, db.p, v.p, x.p, w.p, p))
    fd_check(forward, v, {{x, dx, 'grad input'}, {w, dw, 'grad weight'}, {b, db, 'grad bias'}})
  end)

  -- direct loops in Lua: out[n][o][i][j] = b[o] + sum x[n][g*Cg+c][i*s-p+kh*d][j*s-p+kw*d] * w[o][c][kh][kw]
  local function direct_conv(x, w, b, s, pd, d, G)
    local N, Cc, H, W = unpack(x:size())
    local O, Cg, KH, KW = unpack(w:size())
    local OH = math.floor((H + 2 * pd - d * (KH - 1) - 1) / s) + 1
    local OW = math.floor((W + 2 * pd - d * (KW - 1) - 1) / s) + 1
    local xb, wb, bb = x:read(), w:read(), b:read()
    local y = ffi.new('double[?]', N * O * OH * OW)
    local Og = O / G
    for n = 0, N - 1 do for o = 0, O - 1 do
      local g = math.floor(o / Og)
      for i = 0, OH - 1 do for j = 0, OW - 1 do
        local s_ = bb[o]
        for c = 0, Cg - 1 do for kh = 0, KH - 1 do
          local ih = i * s - pd + kh * d
          if ih >= 0 and ih < H then
            for kw = 0, KW - 1 do
              local iw = j * s - pd + kw * d
              if iw >= 0 and iw < W then
                s_ = s_ + xb[((n * Cc + g * Cg + c) * H + ih) * W + iw] * wb[((o * Cg + c) * KH + kh) * KW + kw]
              end
            end
          end
        end end
        y[((n * O + o) * OH + i) * OW + j] = s_
      end end
    end end
    return lunet.from_buffer(y, {N, O, OH, OW}, 'float64'), OH, OW
  end

  it('split into tiles and threads match direct loops (1, 2 and 3 threads)', function()
    lunet.manual_seed(3)
    local saved = C.ln_device_threads(0)
    local cases = {  -- {N, C, H, W, O, K, stride, pad, dil, groups}: im2col tiles cut rows
      {1, 64, 31, 33, 5, 3, 1, 1, 1, 1},   -- 31*33 positions > one tile of 910 (K = 576)
      {3, 6, 40, 33, 4, 5, 2, 2, 1, 2},
      {2, 8, 30, 30, 6, 1, 1, 0, 1, 2},   -- 1x1 without im2col
      {1, 3, 50, 45, 3, 3, 1, 2, 2, 3},
    }
    local finally_ok, err = pcall(function()
      for _, k in ipairs(cases) do
        local N, Cc, H, W, O, K, s, pd, d, G = unpack(k)
        local x = lunet.randn({N, Cc, H, W}, {dtype = 'float64'})
        local w = lunet.randn({O, Cc / G, K, K}, {dtype = 'float64'})
        local b = lunet.randn({O}, {dtype = 'float64'})
        local ref, OH, OW = direct_conv(x, w, b, s, pd, d, G)
        local p = ffi.new('ln_conv2d_params', {stride_h = s, stride_w = s, pad_h = pd, pad_w = pd, dil_h = d, dil_w = d, groups = G})
        local v = lunet.randn({N, O, OH, OW}, {dtype = 'float64'})
        local grads
        for _, nt in ipairs({1, 2, 3}) do
          ok(C.ln_set_device_threads(0, nt))
          local y = empty({N, O, OH, OW}, 'float64')
          ok(C.ln_conv2d_forward(y.p, x.p, w.p, b.p, p))
          near(y, ref, 1e-10, ('case %s, %d threads: out'):format(table.concat(k, ','), nt))
          local dx, dw = empty({N, Cc, H, W}, 'float64'), empty(w:size(), 'float64')
          ok(C.ln_conv2d_backward(dx.p, dw.p, nil, v.p, x.p, w.p, p))
          if not grads then grads = {dx, dw}
          else
            near(dx, grads[1], 1e-10, ('case %s, %d threads: grad input'):format(table.concat(k, ','), nt))
            near(dw, grads[2], 1e-10, ('case %s, %d threads: grad weight'):format(table.concat(k, ','), nt))
          end
        end
        -- grad weight of the direct loops: sum over n, i, j of v * x window (checked on a few entries)
        local xb, vb = x:read(), v:read()
        local gw = grads[2]:read()
        local Cg, Og = Cc / G, O / G
        for _, e in ipairs({{0, 0, 0, 0}, {O - 1, Cg - 1, K - 1, K - 1}, {math.floor(O / 2), 0, math.floor(K / 2), K - 1}}) do
          local o, c, kh, kw = unpack(e)
          local g, acc = math.floor(o / Og), 0
          for n = 0, N - 1 do for i = 0, OH - 1 do for j = 0, OW - 1 do
            local ih, iw = i * s - pd + kh * d, j * s - pd + kw * d
            if ih >= 0 and ih < H and iw >= 0 and iw < W then
              acc = acc + vb[((n * O + o) * OH + i) * OW + j] * xb[((n * Cc + g * Cg + c) * H + ih) * W + iw]
            end
          end end end
          local got = gw[((o * Cg + c) * K + kh) * K + kw]
          assert(math.abs(got - acc) <= 1e-10 * (1 + math.abs(acc)), ('grad weight %d,%d,%d,%d: %g vs %g'):format(o, c, kh, kw, got, acc))
        end
      end
    end)
    C.ln_set_device_threads(0, saved)
    assert(finally_ok, err)
  end)

  it('reject bad shapes, dtypes, devices and parameters with clear messages', function()
    local c = conv_cases[1]
    local x, w, b = T(c.x, 'float32'), T(c.w, 'float32'), T(c.b, 'float32')
    local y = empty(c.y.shape, 'float32')
    local p = conv_params(c)
    assert.matches('conv2d: input has 3 channels, weight {4,2,3,3} expects 2',
      fails(C.ln_conv2d_forward(y.p, x.p, lunet.zeros(4, 2, 3, 3).p, nil, p)))
    assert.matches('conv2d: input must be 4%-d %(N,C,H,W%), got shape {3,7,6}',
      fails(C.ln_conv2d_forward(y.p, x:select(1, 1).p, w.p, nil, p)))
    assert.matches('conv2d: weight is float64 but the input is float32',
      fails(C.ln_conv2d_forward(y.p, x.p, w:double().p, nil, p)))
    assert.matches('conv2d: input must be float32 or float64, got int64',
      fails(C.ln_conv2d_forward(y.p, x:long().p, w.p, nil, p)))
    assert.matches('conv2d: out has shape {2,4,7,7}, expected {2,4,7,6}',
      fails(C.ln_conv2d_forward(lunet.zeros(2, 4, 7, 7).p, x.p, w.p, nil, p)))
    assert.matches('conv2d: bias has shape {3}, expected {4}',
      fails(C.ln_conv2d_forward(y.p, x.p, w.p, lunet.zeros(3).p, p)))
    local bad = ffi.new('ln_conv2d_params', {stride_h = 0, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, groups = 1})
    assert.matches('conv2d: stride must be >= 1, got %(0,1%)', fails(C.ln_conv2d_forward(y.p, x.p, w.p, nil, bad)))
    bad = ffi.new('ln_conv2d_params', {stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, groups = 2})
    assert.matches('conv2d: input channels 3 are not divisible by groups 2',
      fails(C.ln_conv2d_forward(y.p, x.p, w.p, nil, bad)))
    bad = ffi.new('ln_conv2d_params', {stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 4, dil_w = 1, groups = 1})
    assert.matches('conv2d: padded input 7x6 is smaller than the %(dilated%) kernel 9x3',
      fails(C.ln_conv2d_forward(y.p, x.p, w.p, nil, bad)))
    assert.matches('conv2d: input is nil', fails(C.ln_conv2d_forward(y.p, nil, w.p, nil, p)))
    assert.matches('conv2d_backward: grad_output has shape {2,4,7,6}, expected {2,4,7,5}',
      fails(C.ln_conv2d_backward(nil, nil, nil, lunet.zeros(2, 4, 7, 6).p, x:narrow(4, 1, 5):contiguous().p, w.p, p)))
    assert.matches('conv2d_backward: grad_weight has shape {4,3,3,2}, expected {4,3,3,3}',
      fails(C.ln_conv2d_backward(nil, lunet.zeros(4, 3, 3, 2).p, nil, lunet.zeros(2, 4, 7, 6).p, x.p, w.p, p)))
  end)
end)

-- ---- pooling ---------------------------------------------------------------------------

describe('pooling kernels', function()
  local function run_pool(c, dtype, views)
    local x, dy = T(c.x, dtype), T(c.dy, dtype)
    if views then x, dy = noncontig(x), noncontig(dy) end
    local y, dx = empty(c.y.shape, dtype), empty(c.x.shape, dtype)
    local idx
    if c.kind == 'max' then
      idx = empty(c.y.shape, 'int64')
      ok(C.ln_maxpool2d_forward(y.p, idx.p, x.p, pool_params(c)))
      ok(C.ln_maxpool2d_backward(dx.p, dy.p, idx.p, pool_params(c)))
    elseif c.kind == 'avg' then
      ok(C.ln_avgpool2d_forward(y.p, x.p, pool_params(c)))
      ok(C.ln_avgpool2d_backward(dx.p, dy.p, pool_params(c)))
    else
      ok(C.ln_adaptive_avgpool2d_forward(y.p, x.p))
      ok(C.ln_adaptive_avgpool2d_backward(dx.p, dy.p))
    end
    return y, dx, idx
  end

  for _, kind in ipairs({'max', 'avg', 'adaptive'}) do
    it(kind .. ' pooling matches PyTorch (ceil_mode, padding, dilation, count_include_pad, 3-d input, views)', function()
      local n = 0
      for _, c in ipairs(pool_cases) do
        if c.kind == kind then
          n = n + 1
          for _, dt in ipairs({'float32', 'float64'}) do
            local tol = dt == 'float32' and 1e-5 or 1e-10
            for _, views in ipairs({false, true}) do
              local what = ('%s %s%s'):format(c.name, dt, views and ' (views)' or '')
              local y, dx, idx = run_pool(c, dt, views)
              near(y, c.y, tol, what .. ' out')
              near(dx, c.dx, tol, what .. ' grad input')
              if idx then
                -- indices are 0-based positions within the plane, as PyTorch's
                assert.same(values(c.idx), (function() local b, m = idx:read(); local t = {}
                  for i = 0, m - 1 do t[i + 1] = tonumber(b[i]) end; return t end)(), what .. ' indices')
              end
            end
          end
        end
      end
      assert.is_true(n >= 3)
    end)
  end

  it('backward matches finite differences in float64', function()
    lunet.manual_seed(11)
    local x = lunet.randn({2, 2, 7, 6}, {dtype = 'float64'})
    local specs = {
      {'max', {kh = 3, kw = 2, stride_h = 2, stride_w = 2, pad_h = 1, pad_w = 1, dil_h = 1, dil_w = 1, ceil_mode = 1}},
      {'max', {kh = 2, kw = 3, stride_h = 1, stride_w = 2, pad_h = 0, pad_w = 1, dil_h = 2, dil_w = 1}},
      {'avg', {kh = 3, kw = 3, stride_h = 2, stride_w = 2, pad_h = 1, pad_w = 1, dil_h = 1, dil_w = 1, ceil_mode = 1}},
      {'avg', {kh = 3, kw = 2, stride_h = 2, stride_w = 1, pad_h = 1, pad_w = 1, dil_h = 1, dil_w = 1, ceil_mode = 1, count_include_pad = 1}},
      {'adaptive', {oh = 4, ow = 4}},
    }
    for _, s in ipairs(specs) do
      local kind, p = s[1], ffi.new('ln_pool2d_params', s[2])
      local shape
      local function forward()
        local y
        if kind == 'adaptive' then
          y = empty({2, 2, s[2].oh, s[2].ow}, 'float64')
          ok(C.ln_adaptive_avgpool2d_forward(y.p, x.p))
        else
          y = empty(shape, 'float64')
          if kind == 'max' then ok(C.ln_maxpool2d_forward(y.p, empty(shape, 'int64').p, x.p, p))
          else ok(C.ln_avgpool2d_forward(y.p, x.p, p)) end
        end
        return y
      end
      if kind ~= 'adaptive' then
        local function osz(n, k, st, pd, d, ceil)
          local num = n + 2 * pd - d * (k - 1) - 1
          local o = (ceil == 1 and math.ceil(num / st) or math.floor(num / st)) + 1
          if ceil == 1 and (o - 1) * st >= n + pd then o = o - 1 end
          return o
        end
        shape = {2, 2, osz(7, p.kh, p.stride_h, p.pad_h, p.dil_h, p.ceil_mode), osz(6, p.kw, p.stride_w, p.pad_w, p.dil_w, p.ceil_mode)}
      else
        shape = {2, 2, s[2].oh, s[2].ow}
      end
      local v = lunet.randn(shape, {dtype = 'float64'})
      local dx = empty({2, 2, 7, 6}, 'float64')
      if kind == 'max' then
        local y, idx = empty(shape, 'float64'), empty(shape, 'int64')
        ok(C.ln_maxpool2d_forward(y.p, idx.p, x.p, p))
        ok(C.ln_maxpool2d_backward(dx.p, v.p, idx.p, p))
      elseif kind == 'avg' then
        ok(C.ln_avgpool2d_backward(dx.p, v.p, p))
      else
        ok(C.ln_adaptive_avgpool2d_backward(dx.p, v.p))
      end
      fd_check(forward, v, {{x, dx, kind .. ' grad input'}})
    end
  end)

  it('reject bad parameters, shapes and indices', function()
    local x = lunet.zeros(1, 2, 5, 5)
    local p = ffi.new('ln_pool2d_params', {kh = 2, kw = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1})
    local y, idx = lunet.zeros(1, 2, 2, 2), lunet.zeros({1, 2, 2, 2}, {dtype = 'int64'})
    ok(C.ln_maxpool2d_forward(y.p, idx.p, x.p, p))
    assert.matches('max_pool2d: out has shape {1,2,3,3}, expected {1,2,2,2}',
      fails(C.ln_maxpool2d_forward(lunet.zeros(1, 2, 3, 3).p, idx.p, x.p, p)))
    assert.matches('max_pool2d: indices must be int64, got float32',
      fails(C.ln_maxpool2d_forward(y.p, y.p, x.p, p)))
    assert.matches('max_pool2d: input must be 3%-d %(C,H,W%) or 4%-d %(N,C,H,W%), got shape {5,5}',
      fails(C.ln_maxpool2d_forward(y.p, idx.p, lunet.zeros(5, 5).p, p)))
    local bad = ffi.new('ln_pool2d_params', {kh = 2, kw = 2, stride_h = 2, stride_w = 2, pad_h = 2, pad_w = 0, dil_h = 1, dil_w = 1})
    assert.matches('max_pool2d: padding %(2,0%) must be at most half the kernel size %(2,2%)',
      fails(C.ln_maxpool2d_forward(y.p, idx.p, x.p, bad)))
    bad = ffi.new('ln_pool2d_params', {kh = 2, kw = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0, dil_h = 2, dil_w = 1})
    assert.matches('avg_pool2d: dilation must be 1 for average pooling', fails(C.ln_avgpool2d_forward(y.p, x.p, bad)))
    bad = ffi.new('ln_pool2d_params', {kh = 7, kw = 2, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1})
    assert.matches('avg_pool2d: input 5x5 is too small for kernel %(7,2%)', fails(C.ln_avgpool2d_forward(y.p, x.p, bad)))
    assert.matches('max_pool2d_backward: index 25 out of range for a 5x5 plane',
      kernel_fails(C.ln_maxpool2d_backward(x.p, y.p, lunet.full({1, 2, 2, 2}, 25, {dtype = 'int64'}).p, p)))
    assert.matches('adaptive_avg_pool2d: out has shape {1,3,2,2}, expected {1,2,%*,%*}',
      fails(C.ln_adaptive_avgpool2d_forward(lunet.zeros(1, 3, 2, 2).p, x.p)))
  end)
end)

-- ---- batch norm ------------------------------------------------------------------------

describe('batch norm kernels', function()
  it('match PyTorch: training/eval, affine or not, running stats update (unbiased, momentum)', function()
    for _, c in ipairs(norm_cases) do
      for _, dt in ipairs({'float32', 'float64'}) do
        local tol = dt == 'float32' and 2e-5 or 1e-10
        local what = c.name .. ' ' .. dt
        local x, dy = T(c.x, dt), T(c.dy, dt)
        local w, b = c.w and T(c.w, dt), c.b and T(c.b, dt)
        local rm, rv = c.rm and T(c.rm, dt), c.rv and T(c.rv, dt)
        local C_ = c.x.shape[2]
        local y, sm, si = empty(c.x.shape, dt), empty({C_}, dt), empty({C_}, dt)
        ok(C.ln_batchnorm_forward(y.p, sm.p, si.p, x.p, ptr(w), ptr(b), ptr(rm), ptr(rv), c.training and 1 or 0,
          c.momentum, c.eps))
        near(y, c.y, tol, what .. ' out')
        near(sm, c.save_mean, tol, what .. ' save_mean')
        near(si, c.save_invstd, tol, what .. ' save_invstd')
        if rm then near(rm, c.rm_after, tol, what .. ' running_mean'); near(rv, c.rv_after, tol, what .. ' running_var') end
        local dx = empty(c.x.shape, dt)
        local dw, db = w and empty({C_}, dt), b and empty({C_}, dt)
        ok(C.ln_batchnorm_backward(dx.p, ptr(dw), ptr(db), dy.p, x.p, ptr(w), sm.p, si.p, c.training and 1 or 0))
        near(dx, c.dx, tol, what .. ' grad input')
        if w then near(dw, c.dw, tol, what .. ' grad weight'); near(db, c.db, tol, what .. ' grad bias') end
      end
    end
  end)

  it('work on non-contiguous input and strided running stats', function()
    local c = norm_cases[2]
    local x = noncontig(T(c.x, 'float32'))
    local rm_big, rv_big = lunet.zeros(c.x.shape[2], 2), lunet.zeros(c.x.shape[2], 2)
    local rm, rv = rm_big:select(2, 1), rv_big:select(2, 2)
    rm:copy_(T(c.rm, 'float32')); rv:copy_(T(c.rv, 'float32'))
    assert.is_false(rm:is_contiguous())
    local y = noncontig(empty(c.x.shape, 'float32'))
    ok(C.ln_batchnorm_forward(y.p, nil, nil, x.p, T(c.w, 'float32').p, T(c.b, 'float32').p, rm.p, rv.p, 1, c.momentum, c.eps))
    near(y, c.y, 2e-5, 'out')
    near(rm, c.rm_after, 1e-5, 'running_mean'); near(rv, c.rv_after, 1e-5, 'running_var')
    near(rm_big:select(2, 2), {0, 0, 0, 0}, 0, 'untouched column')
  end)

  it('backward matches finite differences in float64 (training and eval)', function()
    lunet.manual_seed(5)
    local x = lunet.randn({3, 2, 2, 3}, {dtype = 'float64'})
    local w, b = lunet.randn({2}, {dtype = 'float64'}), lunet.randn({2}, {dtype = 'float64'})
    local rm, rv = lunet.tensor({0.1, -0.2}, {dtype = 'float64'}), lunet.tensor({0.7, 1.3}, {dtype = 'float64'})
    local v = lunet.randn({3, 2, 2, 3}, {dtype = 'float64'})
    for _, training in ipairs({1, 0}) do
      local sm, si = empty({2}, 'float64'), empty({2}, 'float64')
      local function forward()
        local y = empty({3, 2, 2, 3}, 'float64')
        ok(C.ln_batchnorm_forward(y.p, sm.p, si.p, x.p, w.p, b.p, training == 0 and rm.p or nil,
          training == 0 and rv.p or nil, training, 0.1, 1e-5))
        return y
      end
      forward()
      local dx, dw, db = empty({3, 2, 2, 3}, 'float64'), empty({2}, 'float64'), empty({2}, 'float64')
      ok(C.ln_batchnorm_backward(dx.p, dw.p, db.p, v.p, x.p, w.p, sm.p, si.p, training))
      fd_check(forward, v, {{x, dx, 'grad input'}, {w, dw, 'grad weight'}, {b, db, 'grad bias'}}, {tol = 1e-5})
    end
  end)

  it('reject one value per channel in training and missing running stats in eval', function()
    local x = lunet.zeros(1, 3)
    assert.matches('batch_norm: expected more than 1 value per channel when training, got input of shape {1,3}',
      fails(C.ln_batchnorm_forward(lunet.zeros(1, 3).p, nil, nil, x.p, nil, nil, nil, nil, 1, 0.1, 1e-5)))
    assert.matches('batch_norm: running_mean and running_var are needed in evaluation mode',
      fails(C.ln_batchnorm_forward(lunet.zeros(1, 3).p, nil, nil, x.p, nil, nil, nil, nil, 0, 0.1, 1e-5)))
    assert.matches('batch_norm: weight has shape {4}, expected {3}',
      fails(C.ln_batchnorm_forward(lunet.zeros(2, 3).p, nil, nil, lunet.zeros(2, 3).p, lunet.zeros(4).p, nil, nil, nil, 1, 0.1, 1e-5)))
    assert.matches('batch_norm_backward: save_mean and save_invstd',
      fails(C.ln_batchnorm_backward(nil, nil, nil, x.p, x.p, nil, nil, nil, 1)))
    assert.matches('batch_norm_relu: expected more than 1 value per channel when training',
      fails(C.ln_batchnorm_relu_forward(lunet.zeros(1, 3).p, nil, nil, x.p, nil, nil, nil, nil, 1, 0.1, 1e-5)))
    assert.matches('batch_norm_relu_backward: out %(the forward\'s output%) is required',
      fails(C.ln_batchnorm_relu_backward(nil, nil, nil, x.p, nil, x.p, nil, x.p, x.p, 1)))
    assert.matches('batch_norm_relu_backward: out has shape {2,3}, expected {1,3}',
      fails(C.ln_batchnorm_relu_backward(nil, nil, nil, x.p, lunet.zeros(2, 3).p, x.p, nil, lunet.zeros(3).p,
        lunet.zeros(3).p, 1)))
    local x2 = lunet.zeros(2, 3)
    assert.matches('batch_norm_add_relu: residual is required',
      fails(C.ln_batchnorm_add_relu_forward(lunet.zeros(2, 3).p, nil, nil, x2.p, nil, nil, nil, nil, nil, 1, 0.1, 1e-5)))
    assert.matches('batch_norm_add_relu: residual has shape {2,4}, expected {2,3}',
      fails(C.ln_batchnorm_add_relu_forward(lunet.zeros(2, 3).p, nil, nil, x2.p, lunet.zeros(2, 4).p, nil, nil, nil,
        nil, 1, 0.1, 1e-5)))
    assert.matches('batch_norm_add_relu_backward: out %(the forward\'s output%) is required',
      fails(C.ln_batchnorm_add_relu_backward(nil, nil, nil, x2.p, x2.p, nil, x2.p, nil, lunet.zeros(3).p,
        lunet.zeros(3).p, 1)))
    assert.matches('batch_norm_add_relu_backward: grad_residual has shape {3,3}, expected {2,3}',
      fails(C.ln_batchnorm_add_relu_backward(nil, nil, nil, lunet.zeros(3, 3).p, x2.p, x2.p, x2.p, nil,
        lunet.zeros(3).p, lunet.zeros(3).p, 1)))
  end)
end)

-- ---- softmax, nll, relu ----------------------------------------------------------------

describe('softmax, nll loss and relu kernels', function()
  it('softmax and log_softmax match PyTorch along any dim (views too)', function()
    for _, c in ipairs(softmax_cases) do
      for _, dt in ipairs({'float32', 'float64'}) do
        local tol = dt == 'float32' and 1e-5 or 1e-10
        local x, dy = T(c.x, dt), T(c.dy, dt)
        if #c.x.shape > 1 then x = noncontig(x) end
        local y, dx = empty(c.x.shape, dt), empty(c.x.shape, dt)
        ok(C.ln_softmax_forward(y.p, x.p, c.dim, c.log and 1 or 0))
        near(y, c.y, tol, c.name .. ' ' .. dt .. ' out')
        ok(C.ln_softmax_backward(dx.p, dy.p, y.p, c.dim, c.log and 1 or 0))
        near(dx, c.dx, tol, c.name .. ' ' .. dt .. ' grad input')
      end
    end
  end)

  it('softmax backward matches finite differences in float64', function()
    lunet.manual_seed(9)
    local x = lunet.randn({2, 3, 4}, {dtype = 'float64'})
    local v = lunet.randn({2, 3, 4}, {dtype = 'float64'})
    for _, log in ipairs({0, 1}) do
      for dim = 0, 2 do
        local function forward()
          local y = empty({2, 3, 4}, 'float64')
          ok(C.ln_softmax_forward(y.p, x.p, dim, log))
          return y
        end
        local dx = empty({2, 3, 4}, 'float64')
        ok(C.ln_softmax_backward(dx.p, v.p, forward().p, dim, log))
        fd_check(forward, v, {{x, dx, ('grad input (log %d, dim %d)'):format(log, dim)}})
      end
    end
    assert.matches('softmax: dim 4 out of range for a 3%-d tensor',
      fails(C.ln_softmax_forward(empty({2, 3, 4}, 'float64').p, x.p, 3, 0)))
  end)

  it('nll loss matches PyTorch: reductions, class weights, ignore_index, base 0 and 1', function()
    for _, c in ipairs(nll_cases) do
      for _, dt in ipairs({'float32', 'float64'}) do
        local tol = dt == 'float32' and 1e-5 or 1e-10
        local logp, target, dy = T(c.logp, dt), T(c.target, 'int64'), T(c.dy, dt)
        local w = c.weight and T(c.weight, dt)
        local y = empty(c.y.shape, dt)
        ok(C.ln_nll_loss_forward(y.p, logp.p, target.p, ptr(w), c.reduction, c.ignore_index, c.base))
        near(y, c.y, tol, c.name .. ' ' .. dt .. ' loss')
        local dlogp = lunet.full(c.logp.shape, 5, {dtype = dt})
        ok(C.ln_nll_loss_backward(dlogp.p, dy.p, target.p, ptr(w), c.reduction, c.ignore_index, c.base))
        near(dlogp, c.dlogp, tol, c.name .. ' ' .. dt .. ' grad input')
      end
    end
  end)

  it('nll loss backward matches finite differences; bad targets are named', function()
    lunet.manual_seed(13)
    local logp = lunet.randn({5, 4}, {dtype = 'float64'})
    local target = lunet.tensor({1, 4, 2, 0, 4}, {dtype = 'int64'})
    local w = lunet.tensor({0.5, 1.5, 1, 2}, {dtype = 'float64'})
    for reduction = 0, 2 do
      local shape = reduction == 0 and {5} or {}
      local v = lunet.randn(shape, {dtype = 'float64'})
      local function forward()
        local y = empty(shape, 'float64')
        ok(C.ln_nll_loss_forward(y.p, logp.p, target.p, w.p, reduction, 0, 1))
        return y
      end
      local d = empty({5, 4}, 'float64')
      ok(C.ln_nll_loss_backward(d.p, v.p, target.p, w.p, reduction, 0, 1))
      fd_check(forward, v, {{logp, d, 'grad input, reduction ' .. reduction}})
    end
    local bad = lunet.tensor({1, 5, 2, 1, 1}, {dtype = 'int64'})
    assert.matches('nll_loss: target 5 %(sample 2%) is out of range: classes are 1..4',
      kernel_fails(C.ln_nll_loss_forward(empty({}, 'float64').p, logp.p, bad.p, nil, 1, -100, 1)))
    assert.matches('nll_loss: target must be int64 class ids, got float32',
      fails(C.ln_nll_loss_forward(empty({}, 'float64').p, logp.p, lunet.zeros(5).p, nil, 1, -100, 1)))
    assert.matches('nll_loss: target has shape {4}, expected {5}',
      fails(C.ln_nll_loss_forward(empty({}, 'float64').p, logp.p, lunet.zeros({4}, {dtype = 'int64'}).p, nil, 1, -100, 1)))
    assert.matches('nll_loss: out has shape {5}, expected a 0%-d tensor with reduction mean',
      fails(C.ln_nll_loss_forward(empty({5}, 'float64').p, logp.p, target.p, nil, 1, 0, 1)))
  end)

  it('relu_backward passes the gradient where the output is positive (views too)', function()
    local out = lunet.tensor({{0, 1.5, -0}, {2, 0, 3}, {0.25, 0, 0}}, {dtype = 'float64'})
    local dout = lunet.tensor({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, {dtype = 'float64'})
    local din = empty({3, 3}, 'float64')
    ok(C.ln_relu_backward(din.p, dout.p, out.p))
    assert.same({{0, 2, 0}, {4, 0, 6}, {7, 0, 0}}, din:totable())
    local dv = empty({3, 3}, 'float32'):t()
    ok(C.ln_relu_backward(dv.p, dout:float():t().p, out:float():t().p))
    assert.same({{0, 4, 7}, {2, 0, 0}, {0, 6, 0}}, dv:totable())
    assert.matches('relu_backward: grad_output has shape {3,2}, expected {3,3}',
      fails(C.ln_relu_backward(din.p, lunet.zeros({3, 2}, {dtype = 'float64'}).p, out.p)))
  end)
end)

-- ---- queued virtual device --------------------------------------------------------------

describe('nn kernels on a queued virtual device', function()
  it('give the same results on cpu:1 of 2 devices, and raise kernel errors at sync', function()
    lunet.set_cpu_devices(2)
    local run_ok, err = pcall(function()
      local c = conv_cases[5]
      local y, dx, dw, db = run_conv(c, 'float32', 'cpu:1')
      assert.equal('cpu:1', y.device)
      near(y, c.y, 1e-5, 'cpu:1 conv out'); near(dx, c.dx, 1e-5, 'cpu:1 conv grad input')
      near(dw, c.dw, 1e-5, 'cpu:1 conv grad weight'); near(db, c.db, 1e-5, 'cpu:1 conv grad bias')
      local pc = pool_cases[2]
      local x = T(pc.x, 'float32', 'cpu:1')
      local py, idx = empty(pc.y.shape, 'float32', 'cpu:1'), empty(pc.y.shape, 'int64', 'cpu:1')
      ok(C.ln_maxpool2d_forward(py.p, idx.p, x.p, pool_params(pc)))
      local pdx = empty(pc.x.shape, 'float32', 'cpu:1')
      ok(C.ln_maxpool2d_backward(pdx.p, T(pc.dy, 'float32', 'cpu:1').p, idx.p, pool_params(pc)))
      near(py, pc.y, 1e-5, 'cpu:1 max pool'); near(pdx, pc.dx, 1e-5, 'cpu:1 max pool grad')
      local bc = norm_cases[2]
      local bx, rm, rv = T(bc.x, 'float32', 'cpu:1'), T(bc.rm, 'float32', 'cpu:1'), T(bc.rv, 'float32', 'cpu:1')
      local by = empty(bc.x.shape, 'float32', 'cpu:1')
      ok(C.ln_batchnorm_forward(by.p, nil, nil, bx.p, T(bc.w, 'float32', 'cpu:1').p, T(bc.b, 'float32', 'cpu:1').p,
        rm.p, rv.p, 1, bc.momentum, bc.eps))
      near(by, bc.y, 2e-5, 'cpu:1 batch norm'); near(rv, bc.rv_after, 1e-5, 'cpu:1 running var')
      local sc = softmax_cases[4]
      local sy = empty(sc.x.shape, 'float32', 'cpu:1')
      ok(C.ln_softmax_forward(sy.p, noncontig(T(sc.x, 'float32', 'cpu:1')).p, sc.dim, 1))
      near(sy, sc.y, 1e-5, 'cpu:1 log_softmax')
      -- mixing devices is refused on the calling thread
      assert.matches('conv2d: weight is on cpu:0 but the input is on cpu:1',
        fails(C.ln_conv2d_forward(y.p, T(c.x, 'float32', 'cpu:1').p, T(c.w, 'float32').p, nil, conv_params(c))))
      -- a bad target is found by the queued kernel and raised at the next sync
      local logp = lunet.zeros({3, 4}, {device = 'cpu:1'})
      local bad = lunet.tensor({1, 9, 2}, {dtype = 'int64'}):to('cpu:1')
      ok(C.ln_nll_loss_forward(empty({}, 'float32', 'cpu:1').p, logp.p, bad.p, nil, 1, -100, 1))
      assert.matches('nll_loss: target 9 %(sample 2%) is out of range: classes are 1..4 %(in nll_loss, cpu:1%)',
        fails(C.ln_sync(1)))
      ok(C.ln_sync(1))   -- the error was raised once and cleared
    end)
    collectgarbage(); collectgarbage()
    lunet.set_cpu_devices(1)
    assert(run_ok, err)
  end)
end)
