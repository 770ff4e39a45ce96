-- Depthwise and grouped float32 convolutions on every CPU path (oneDNN's
-- grouped and depthwise kernels by default, the direct depthwise weight
-- gradient for kernels over 3x3 at stride 1-2, im2col + GEMM per group), forced in turn
-- with LUNET_CONV_IMPL, on 1 and 2 threads: forward, input, weight and bias
-- gradients against the float64 path (im2col + GEMM in double, checked
-- against finite differences and a naive loop in kernels_spec.lua).
local ffi = require 'ffi'
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local F = lunet.nn.functional
local C = lunet.C

pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')

-- fn(nt) under LUNET_CONV_IMPL=impl ('auto': unset) on 1 and 2 threads; both restored, also on error
local function each_thread_count(impl, fn)
  local threads = C.ln_device_threads(0)
  if impl ~= 'auto' then ffi.C.setenv('LUNET_CONV_IMPL', impl, 1) end
  local ok, err = pcall(function()
    for _, nt in ipairs({ 1, 2 }) do
      assert(C.ln_set_device_threads(0, nt) == 0)
      fn(nt)
    end
  end)
  ffi.C.unsetenv('LUNET_CONV_IMPL')
  C.ln_set_device_threads(0, threads)
  if not ok then error(err, 0) end
end

-- {N, C, O, H, W, k (or {kh, kw}), stride, pad, dil, groups (nil: C)}
local CASES = {
  { 2, 16, 16, 13, 17, 3, 1, 1, 1 },          -- depthwise 3x3, uneven sizes
  { 3, 58, 58, 15, 14, 3, 2, 1, 1 },          -- ShuffleNet's stride 2, channels not in blocks of 16
  { 1, 24, 24, 12, 12, 3, 1, 2, 2 },          -- dilation 2, batch 1
  { 2, 20, 20, 14, 14, 5, 1, 2, 1 },          -- 5x5: the direct weight gradient
  { 2, 20, 20, 15, 17, 5, 2, 2, 1 },          -- 5x5 stride 2 (EfficientNet)
  { 2, 16, 16, 17, 30, 7, 2, 3, 1 },          -- 7x7 stride 2
  { 3, 8, 8, 12, 21, 4, { 2, 1 }, 1, 1 },     -- 4x4, stride (2, 1)
  { 2, 32, 32, 16, 16, 7, 1, 3, 1 },          -- ConvNeXt's 7x7
  { 3, 8, 8, 11, 19, 7, 1, 3, 1 },            -- 7x7, odd columns over two 16-lane vectors
  { 2, 8, 8, 9, 10, { 5, 3 }, 1, { 2, 0 }, 1 },  -- 5x3, no column padding
  { 2, 16, 16, 5, 5, 7, 1, 3, 1 },            -- 7x7 on 5 columns (narrow: not the direct kernel)
  { 2, 48, 48, 12, 12, 3, 1, 1, 1, 6 },       -- RegNet: groups of 8
  { 2, 104, 104, 7, 9, 3, 2, 1, 1, 13 },      -- groups of 8, stride 2
  { 2, 32, 64, 10, 10, 3, 1, 1, 1, 2 },       -- groups of 16 in, 32 out
  { 2, 8, 16, 10, 10, 3, 1, 1, 1, 8 },        -- depthwise with 2 outputs per channel
  { 2, 6, 6, 9, 9, 1, 1, 0, 1, 3 },           -- grouped 1x1
}

local function pair(v) return type(v) == 'table' and v or { v, v } end

local function reference(c)
  local N, Cin, O, H, W, k, s, p, d, g = unpack(c)
  g = g or Cin
  local kh, kw = unpack(pair(k))
  lunet.manual_seed(5)
  local r = { opts = { stride = s, padding = p, dilation = d, groups = g } }
  r.x = lunet.randn({ N, Cin, H, W }, { dtype = 'float64' }):requires_grad_()
  r.w = lunet.randn({ O, Cin / g, kh, kw }, { dtype = 'float64' }):requires_grad_()
  r.b = lunet.randn({ O }, { dtype = 'float64' }):requires_grad_()
  r.y = F.conv2d(r.x, r.w, r.b, r.opts)
  r.g = lunet.randn(r.y:size(), { dtype = 'float64' })
  r.y:backward(r.g)
  return r
end

describe('depthwise and grouped conv2d, float32, every path', function()
  for _, c in ipairs(CASES) do
    local k = pair(c[6])
    local name = ('%dx%dx%dx%d -> %d, %dx%d, stride %s, pad %s, dil %d, groups %d'):format(c[1], c[2], c[4], c[5],
      c[3], k[1], k[2], table.concat(pair(c[7]), ','), table.concat(pair(c[8]), ','), c[9], c[10] or c[2])
    local r
    for _, impl in ipairs({ 'auto', 'gemm', 'direct', 'dnnl' }) do
      it(impl .. ': ' .. name .. ': forward and gradients match float64 (1 and 2 threads)', function()
        r = r or reference(c)
        each_thread_count(impl, function(nt)
          local x, w, b = r.x:detach():float():requires_grad_(), r.w:detach():float():requires_grad_(),
            r.b:detach():float():requires_grad_()
          local y = F.conv2d(x, w, b, r.opts)
          assert.is_true(fx.rel(y, r.y:detach()) < 1e-5, nt .. ' threads: forward')
          local y0 = lunet.no_grad(function() return F.conv2d(x, w, nil, r.opts) end)
          assert.is_true(fx.rel(y0, r.y:detach() - r.b:detach():view(1, -1, 1, 1)) < 1e-5, nt .. ' threads: forward, no bias')
          y:backward(r.g:float())
          assert.is_true(fx.rel(x.grad, r.x.grad) < 1e-5, nt .. ' threads: input gradient')
          assert.is_true(fx.rel(w.grad, r.w.grad) < 1e-5, nt .. ' threads: weight gradient')
          assert.is_true(fx.rel(b.grad, r.b.grad) < 1e-5, nt .. ' threads: bias gradient')
          -- each gradient alone (the passes run one by one), no bias
          w.grad, x.grad = nil, nil
          local xd = r.x:detach():float()
          F.conv2d(xd, w, nil, r.opts):backward(r.g:float())
          assert.is_true(fx.rel(w.grad, r.w.grad) < 1e-5, nt .. ' threads: weight gradient alone')
          local wd = r.w:detach():float()
          F.conv2d(x, wd, nil, r.opts):backward(r.g:float())
          assert.is_true(fx.rel(x.grad, r.x.grad) < 1e-5, nt .. ' threads: input gradient alone')
        end)
      end)
    end
  end

  it("oneDNN runs only its grouped and depthwise JIT kernels (never its gemm or reference ones)", function()
    -- a child process logs oneDNN's primitives (DNNL_VERBOSE=1): shapes with
    -- JIT kernels, and dilated, channel-multiplier and 5x5/7x7 ones whose
    -- oneDNN passes would be its gemm (lunet's own paths run those)
    local script = os.tmpname()
    local f = assert(io.open(script, 'w'))
    f:write([[
local lunet = require 'lunet'
local F = lunet.nn.functional
for _, c in ipairs { {32, 32, 3, 1, 1, 1, 32}, {48, 48, 3, 1, 1, 1, 6}, {32, 32, 3, 1, 2, 2, 32},
                     {16, 32, 3, 1, 1, 1, 16}, {32, 32, 5, 2, 2, 1, 32}, {32, 32, 7, 1, 3, 1, 32} } do
  local C, O, k, s, p, d, g = unpack(c)
  local x = lunet.randn(4, C, 20, 20):requires_grad_()
  local w = lunet.randn(O, C / g, k, k):requires_grad_()
  F.conv2d(x, w, nil, { stride = s, padding = p, dilation = d, groups = g }):sum():backward()
end
print('done')
]])
    f:close()
    local p = io.popen('DNNL_VERBOSE=1 luajit ' .. script .. ' 2>&1')
    local out = p:read('*a')
    p:close()
    os.remove(script)
    assert.truthy(out:find('done', 1, true), out)
    local jit_dw, bad = 0, {}
    for line in out:gmatch('[^\n]+') do
      if line:find('^%a+_verbose,exec,') and line:find(',convolution,', 1, true) then
        if line:find(',jit_dw:', 1, true) then jit_dw = jit_dw + 1 end
        if line:find('gemm', 1, true) or line:find(',ref:', 1, true) then bad[#bad + 1] = line end
      end
    end
    assert.is_true(#bad == 0, table.concat(bad, '\n'))
    assert.is_true(jit_dw > 0, 'no jit_dw convolution ran:\n' .. out:sub(1, 2000))
  end)

  it('batches run a few images at a time (LUNET_DNNL_CHUNK_KB) give the same outputs and input gradients', function()
    -- conv_dnnl.c splits a grouped forward or data gradient into chunks of
    -- images; a 1 KB budget makes chunks of one image per thread (uneven
    -- tail), 1 MB chunks of 2 of the 9 images of 64 channels at 28x28
    local cases = { { 5, 16, 16, 13, 17, 3, 1, 1, 1 }, { 5, 58, 58, 15, 14, 3, 2, 1, 1 },
                    { 3, 48, 48, 12, 12, 3, 1, 1, 1, 6 }, { 9, 64, 64, 28, 28, 3, 1, 1, 1 } }
    for i, c in ipairs(cases) do
      local r = reference(c)
      each_thread_count('dnnl', function(nt)
        local x, w, b = r.x:detach():float():requires_grad_(), r.w:detach():float(), r.b:detach():float()
        local function run(kb)
          ffi.C.setenv('LUNET_DNNL_CHUNK_KB', kb, 1)
          x.grad = nil
          local y = F.conv2d(x, w, b, r.opts)
          y:backward(r.g:float())
          local y0 = lunet.no_grad(function() return F.conv2d(x:detach(), w, nil, r.opts) end)
          ffi.C.unsetenv('LUNET_DNNL_CHUNK_KB')
          return y:detach(), y0, x.grad
        end
        local kb = i < 4 and '1' or '1024'
        local y, y0, gx = run(kb)
        local yw, y0w, gxw = run('0')   -- the whole batch in one call
        local what = ('case %d, %d threads'):format(i, nt)
        assert.is_true(fx.rel(y, r.y:detach()) < 1e-5, what .. ': forward')
        assert.is_true(fx.rel(gx, r.x.grad) < 1e-5, what .. ': input gradient')
        assert.equal(0, fx.maxdiff(y, yw), what .. ': forward, chunked and not')
        assert.equal(0, fx.maxdiff(y0, y0w), what .. ': forward without bias, chunked and not')
        assert.equal(0, fx.maxdiff(gx, gxw), what .. ': input gradient, chunked and not')
        -- the weights reordered by the first chunk and kept: new values are seen
        w:mul_(-1)
        local yn = run(kb)
        assert.is_true(fx.rel(yn, (r.y:detach() - r.b:detach():view(1, -1, 1, 1) * 2):mul(-1)) < 1e-5, what .. ': new weights')
        w:mul_(-1)
      end)
    end
  end)

  it('a non-contiguous input and an empty batch', function()
    lunet.manual_seed(3)
    local big = lunet.randn(2, 32, 14, 20)
    local x = big:narrow(2, 5, 16):narrow(4, 3, 14)   -- channels 5..20, columns 3..16
    local w = lunet.randn(16, 1, 3, 3)
    local o = { padding = 1, groups = 16 }
    local y = F.conv2d(x, w, nil, o)
    local y64 = F.conv2d(x:contiguous():double(), w:double(), nil, o)
    assert.is_true(fx.rel(y, y64) < 1e-5)
    local e = lunet.randn(0, 16, 8, 8):requires_grad_()
    local we = w:clone():requires_grad_()
    local ye = F.conv2d(e, we, nil, o)
    assert.are.same({ 0, 16, 8, 8 }, { ye:size(1), ye:size(2), ye:size(3), ye:size(4) })
    ye:sum():backward()
    assert.are.same({ 0, 16, 8, 8 }, { e.grad:size(1), e.grad:size(2), e.grad:size(3), e.grad:size(4) })
    assert.equal(0, we.grad:abs():sum():item())
  end)
end)
