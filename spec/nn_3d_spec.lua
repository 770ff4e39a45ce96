-- nn.Conv3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d (and their functional
-- forms) and BatchNorm3d against PyTorch 1.13: outputs and float64 input,
-- weight and bias gradients from spec/fixtures/nn_3d.safetensors
-- (tools/gen_nn_3d_fixtures.py), in float32 and float64, batched and
-- unbatched, a transposed view; a torch Conv3d's state_dict; BatchNorm3d's
-- running statistics and eval; float64 finite differences; printing; errors.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local fx = require 'support.fixtures'
local nn = lunet.nn
local F = nn.functional

local T, cases = fx.load_fixture('nn_3d')
local err = fx.err_of

local function get(case, k) return T[case.name .. '.' .. k] end

-- the case's module (functional false) or functional form on x (w, b its parameters)
local function run(case, x, w, b, functional)
  local a, op = case.opts, case.op
  if op == 'conv3d' then
    local o = { stride = a.stride, padding = a.padding, dilation = a.dilation, groups = a.groups }
    if functional then return F.conv3d(x, w, b, o) end
    local m = nn.Conv3d(w:size(2) * (a.groups or 1), w:size(1), { w:size(3), w:size(4), w:size(5) },
      { stride = a.stride, padding = a.padding, dilation = a.dilation, groups = a.groups, bias = b ~= nil,
        dtype = x.dtype })
    -- (the parameters themselves, so their gradients reach w and b)
    m.weight = w
    if b then m.bias = b end
    return m(x)
  elseif op == 'max_pool3d' then
    local o = { stride = a.stride, padding = a.padding, dilation = a.dilation, ceil_mode = a.ceil_mode }
    if functional then return F.max_pool3d(x, a.kernel_size, o) end
    return nn.MaxPool3d(a.kernel_size, o)(x)
  elseif op == 'avg_pool3d' then
    local o = { stride = a.stride, padding = a.padding, ceil_mode = a.ceil_mode, count_include_pad = a.count_include_pad }
    if functional then return F.avg_pool3d(x, a.kernel_size, o) end
    return nn.AvgPool3d(a.kernel_size, o)(x)
  elseif op == 'adaptive_avg_pool3d' then
    return functional and F.adaptive_avg_pool3d(x, a.output_size) or nn.AdaptiveAvgPool3d(a.output_size)(x)
  end
  error('unknown op ' .. op)
end

local function check_case(case, dtype, functional)
  local what = ('%s %s%s'):format(case.name, dtype, functional and ' (F)' or '')
  local tol = dtype == 'float32' and 2e-5 or 1e-12
  local x = get(case, 'x'):to(dtype):clone():requires_grad_()
  local w = get(case, 'weight') and get(case, 'weight'):to(dtype):clone():requires_grad_()
  local b = get(case, 'bias') and get(case, 'bias'):to(dtype):clone():requires_grad_()
  local xin = case.opts.view == 't' and x:transpose(4, 5) or x
  if case.opts.view then assert.is_false(xin:is_contiguous()) end
  local out = run(case, xin, w, b, functional)
  assert.equal(dtype, out.dtype, what)
  assert.tensor_near(out, get(case, 'out'), tol)
  ;(out * get(case, 'dout'):to(dtype)):sum():backward()
  assert.tensor_near(x.grad, get(case, 'dx'), tol)
  if w then assert.tensor_near(w.grad, get(case, 'dweight'), tol) end
  if b then assert.tensor_near(b.grad, get(case, 'dbias'), tol) end
end

local function fixture_cases(op)
  local n = 0
  for _, case in ipairs(cases) do
    if case.op == op then
      n = n + 1
      for _, dtype in ipairs({ 'float32', 'float64' }) do
        check_case(case, dtype, false)
        check_case(case, dtype, true)
      end
    end
  end
  assert.is_true(n >= 6, op)
end

local function d(...) return lunet.randn(...):double():requires_grad_() end

describe('nn.Conv3d', function()
  it("matches torch: stride, padding, dilation, anisotropic kernels, groups, depthwise, 'same' (odd reach), 'valid', (1, k, k), unbatched, a view",
    function() fixture_cases('conv3d') end)
  it("loads a torch Conv3d's state_dict (weight {out, in/groups, kD, kH, kW}, bias {out}) and gives its output", function()
    local m = nn.Conv3d(4, 6, { 3, 2, 3 }, { stride = { 2, 1, 1 }, padding = 1, groups = 2 })
    local sd = m:state_dict()
    assert.same({ 6, 2, 3, 2, 3 }, sd.weight:size())
    assert.same({ 6 }, sd.bias:size())
    m:load_state_dict({ weight = T['sd.weight'], bias = T['sd.bias'] })
    assert.tensor_near(m(T['sd.x']), T['sd.out'], 1e-5)
    assert.same({ 6, 2, 3, 3, 3 }, nn.Conv3d(4, 6, 3, 1, 0, 1, 2, false).weight:size())
  end)
  it("torch's default init: weight and bias within 1/sqrt(fan_in), fan_in = in/groups * kD * kH * kW", function()
    lunet.manual_seed(3)
    local m = nn.Conv3d(8, 64, { 2, 3, 3 }, { groups = 2 })
    local bound = 1 / math.sqrt(4 * 18)
    local wmax, bmax = m.weight:abs():max():item(), m.bias:abs():max():item()
    assert.is_true(wmax <= bound and wmax > 0.95 * bound, tostring(wmax))
    assert.is_true(bmax <= bound and bmax > 0.8 * bound, tostring(bmax))
  end)
  it('float64 finite differences: input, weight and bias, strided, padded, dilated, grouped, unbatched', function()
    local function f(x, w, b) return F.conv3d(x, w, b, { stride = { 2, 1, 2 }, padding = 1, dilation = { 2, 1, 1 }, groups = 2 }) end
    assert.is_true(gradcheck(f, { d(1, 4, 5, 4, 5), d(2, 2, 2, 2, 3), d(2) }))
    assert.is_true(gradcheck(function(x, w) return F.conv3d(x, w, nil, 1, 'same') end, { d(2, 3, 4, 3), d(2, 2, 2, 3, 2) }))
  end)
  it('empty batch, positional forms, options, printing', function()
    local x = lunet.randn(2, 3, 6, 7, 8)
    local m = nn.Conv3d(3, 4, 3, 2, 1)
    assert.same({ 2, 4, 3, 4, 4 }, m(x):size())
    assert.same({ 4, 3, 4, 4 }, m(x[1]):size())
    assert.is_true(m(x):is_contiguous())
    assert.same({ 0, 4, 3, 4, 4 }, m(lunet.randn(0, 3, 6, 7, 8)):size())
    assert.tensor_near(F.conv3d(x, m.weight, m.bias, 2, 1), m(x), 0)
    assert.same({ 2, 4, 6, 7, 8 }, nn.Conv3d(3, 4, { 2, 3, 4 }, { padding = 'same' })(x):size())
    assert.same({ 2, 4, 5, 5, 5 }, nn.Conv3d(3, 4, { 2, 3, 4 }, { padding = 'valid' })(x):size())
    assert.is_nil(nn.Conv3d(3, 4, 3, { bias = false }).bias)
    assert.equal('float64', nn.Conv3d(3, 4, 3, { dtype = 'float64' }).weight.dtype)
    assert.matches('^nn.Conv3d%(3 %-> 4, 3x3x3, stride 2, pad 1%)', tostring(m))
    assert.matches('^nn.Conv3d%(4 %-> 4, 1x3x3, stride 1x2x2, dilation 2, groups 2, no bias%)',
      tostring(nn.Conv3d(4, 4, { 1, 3, 3 }, { stride = { 1, 2, 2 }, dilation = 2, groups = 2, bias = false })))
  end)
  it('errors', function()
    local x = lunet.randn(2, 3, 5, 5, 5)
    local w = lunet.randn(4, 3, 3, 3, 3)
    assert.matches('nn.Conv3d: expected %(in_channels', err(nn.Conv3d, 3, 4))
    assert.matches('nn.Conv3d: kernel_size must be an integer >= 1 or {d, h, w} of them, got {3, 3}', err(nn.Conv3d, 3, 4, { 3, 3 }))
    assert.matches('nn.Conv3d: kernel_size must be an integer >= 1', err(nn.Conv3d, 3, 4, 0))
    assert.matches('nn.Conv3d: stride must be an integer >= 1', err(nn.Conv3d, 3, 4, 3, { stride = { 1, 0, 1 } }))
    assert.matches('nn.Conv3d: padding must be an integer >= 0', err(nn.Conv3d, 3, 4, 3, { padding = -1 }))
    assert.matches('nn.Conv3d: in_channels 3 and out_channels 4 must be divisible by groups 2',
      err(nn.Conv3d, 3, 4, 3, { groups = 2 }))
    assert.matches("nn.Conv3d: padding='same' is not supported for strided", err(nn.Conv3d, 3, 4, 3, { stride = 2, padding = 'same' }))
    assert.matches("padding_mode 'mirror' is not supported", err(nn.Conv3d, 3, 4, 3, { padding_mode = 'mirror' }))
    assert.matches("unknown option 'strides'", err(nn.Conv3d, 3, 4, 3, { strides = 2 }))
    assert.matches('conv3d: input must be 4%-d %(C, D, H, W%) or 5%-d %(N, C, D, H, W%), got 3%-d', err(nn.Conv3d(3, 4, 3), lunet.randn(3, 5, 5)))
    assert.matches('conv3d: input has 5 channels, weight {4,3,3,3,3} with groups 1 expects 3', err(F.conv3d, lunet.randn(2, 5, 4, 4, 4), w))
    assert.matches('conv3d: input {2,3,2,5,5} is too small for a kernel of 3x3x3', err(F.conv3d, lunet.randn(2, 3, 2, 5, 5), w))
    assert.matches('conv3d: weight must be 5%-d', err(F.conv3d, x, lunet.randn(4, 3, 3, 3)))
    assert.matches('conv3d: bias has 3 elements, weight has 4 outputs', err(F.conv3d, x, w, lunet.randn(3)))
    assert.matches("conv3d: padding must be a number, {d, h, w}, 'same' or 'valid', got 'full'", err(F.conv3d, x, w, nil, 1, 'full'))
    assert.matches("conv3d: padding='same' needs stride 1", err(F.conv3d, x, w, nil, 2, 'same'))
    assert.matches('conv3d: input must be a floating%-point', err(F.conv3d, lunet.zeros(2, 3, 5, 5, 5, { dtype = 'int64' }), w))
    assert.matches("conv3d: unknown option 'pad'", err(F.conv3d, x, w, nil, { pad = 1 }))
    assert.matches('conv3d: dilation must be an integer >= 1', err(F.conv3d, x, w, nil, { dilation = { 1, 1 } }))
  end)
end)

describe('nn.MaxPool3d', function()
  it('matches torch: stride, padding, anisotropic, dilation, ceil_mode (with padding), ties, unbatched',
    function() fixture_cases('max_pool3d') end)
  it('float64 finite differences; positional forms; printing', function()
    assert.is_true(gradcheck(function(x) return F.max_pool3d(x, 3, 2, 1, { 1, 2, 1 }, true) end, { d(1, 2, 6, 7, 5) }))
    local x = lunet.randn(2, 3, 6, 6, 6)
    assert.same({ 2, 3, 3, 3, 3 }, nn.MaxPool3d(2)(x):size())
    assert.tensor_near(nn.MaxPool3d(3, 2, 1, 1, false, true)(x), F.max_pool3d(x, 3, { stride = 2, padding = 1, ceil_mode = true }), 0)
    assert.equal('nn.MaxPool3d(3x3x3, stride 2x2x2, pad 1x1x1, ceil)\n0 parameters',
      tostring(nn.MaxPool3d(3, { stride = 2, padding = 1, ceil_mode = true })))
    assert.equal('nn.MaxPool3d(1x2x2, dilation 1x2x1)\n0 parameters', tostring(nn.MaxPool3d({ 1, 2, 2 }, { dilation = { 1, 2, 1 } })))
  end)
  it('errors', function()
    local x = lunet.randn(2, 3, 6, 6, 6)
    assert.matches('nn.MaxPool3d: expected kernel_size', err(nn.MaxPool3d))
    assert.matches('nn.MaxPool3d: kernel_size must be an integer >= 1', err(nn.MaxPool3d, 0))
    assert.matches('nn.MaxPool3d: dilation must be an integer >= 1', err(nn.MaxPool3d, 2, { dilation = 0 }))
    assert.matches('nn.MaxPool3d: return_indices is not supported', err(nn.MaxPool3d, 2, { return_indices = true }))
    assert.matches('max_pool3d: return_indices is not supported', err(F.max_pool3d, x, 2, { return_indices = true }))
    assert.matches("unknown option 'ceil'", err(nn.MaxPool3d, 2, { ceil = true }))
    assert.matches('max_pool3d: padding {2, 0, 0} must be at most half the kernel {3, 3, 3}', err(F.max_pool3d, x, 3, { padding = { 2, 0, 0 } }))
    assert.matches('max_pool3d: input {2,3,6,6,6} is too small for a window of 7x2x2', err(nn.MaxPool3d({ 7, 2, 2 }), x))
    assert.matches('max_pool3d: input must be 4%-d %(C, D, H, W%) or 5%-d', err(F.max_pool3d, lunet.randn(3, 4, 4), 2))
    assert.matches('max_pool3d: stride must be an integer >= 1 or {d, h, w} of them, got {1, 2}', err(F.max_pool3d, x, 2, { stride = { 1, 2 } }))
  end)
end)

describe('nn.AvgPool3d', function()
  it('matches torch: stride, padding with and without count_include_pad, anisotropic, ceil_mode, unbatched',
    function() fixture_cases('avg_pool3d') end)
  it('float64 finite differences; positional forms; printing', function()
    assert.is_true(gradcheck(function(x) return F.avg_pool3d(x, { 3, 4, 3 }, { 2, 3, 2 }, 1, true, false) end,
      { d(2, 6, 7, 5) }))
    local x = lunet.randn(2, 3, 6, 7, 5)
    assert.tensor_near(nn.AvgPool3d(3, 2, 1, true, false)(x),
      F.avg_pool3d(x, 3, { stride = 2, padding = 1, ceil_mode = true, count_include_pad = false }), 0)
    assert.equal('nn.AvgPool3d(3x3x3, stride 2x2x2, pad 1x1x1, ceil, exclude pad)\n0 parameters',
      tostring(nn.AvgPool3d(3, 2, 1, true, false)))
    assert.equal('nn.AvgPool3d(2x2x2)\n0 parameters', tostring(nn.AvgPool3d(2)))
  end)
  it('errors', function()
    assert.matches('nn.AvgPool3d: padding must be an integer >= 0', err(nn.AvgPool3d, 2, { padding = -1 }))
    assert.matches('nn.AvgPool3d: divisor_override is not supported', err(nn.AvgPool3d, 2, { divisor_override = 3 }))
    assert.matches('avg_pool3d: divisor_override is not supported', err(F.avg_pool3d, lunet.randn(2, 4, 4, 4), 2, nil, 0, false, true, 3))
    assert.matches("unknown option 'dilation'", err(nn.AvgPool3d, 2, { dilation = 2 }))
    assert.matches('avg_pool3d: input {3,1,4,4} is too small for a window of 2x2x2', err(nn.AvgPool3d(2), lunet.randn(3, 1, 4, 4)))
    assert.matches('avg_pool3d: expected kernel_size', err(F.avg_pool3d, lunet.randn(3, 4, 4, 4)))
  end)
end)

describe('nn.AdaptiveAvgPool3d', function()
  it('matches torch: uneven, even and growing bins, None (false) entries, unbatched',
    function() fixture_cases('adaptive_avg_pool3d') end)
  it('float64 finite differences; options forms; printing', function()
    assert.is_true(gradcheck(function(x) return F.adaptive_avg_pool3d(x, { 2, 3, 2 }) end, { d(1, 2, 5, 4, 3) }))
    local x = lunet.randn(2, 3, 5, 6, 7)
    assert.same({ 2, 3, 4, 4, 4 }, nn.AdaptiveAvgPool3d{ output_size = 4 }(x):size())
    assert.same({ 2, 3, 5, 1, 7 }, nn.AdaptiveAvgPool3d({ false, 1, false })(x):size())
    assert.equal('nn.AdaptiveAvgPool3d(4)\n0 parameters', tostring(nn.AdaptiveAvgPool3d(4)))
    assert.equal('nn.AdaptiveAvgPool3d(None, 1, None)\n0 parameters', tostring(nn.AdaptiveAvgPool3d({ false, 1, false })))
  end)
  it('errors', function()
    local x = lunet.randn(2, 3, 5, 6, 7)
    assert.matches('nn.AdaptiveAvgPool3d: expected output_size', err(nn.AdaptiveAvgPool3d))
    assert.matches('nn.AdaptiveAvgPool3d: output_size must be an integer >= 1', err(nn.AdaptiveAvgPool3d, { 2, 2 }))
    assert.matches('nn.AdaptiveAvgPool3d: output_size must be an integer >= 1', err(nn.AdaptiveAvgPool3d, 0))
    assert.matches("unknown option 'size'", err(nn.AdaptiveAvgPool3d, { size = 2 }))
    assert.matches('adaptive_avg_pool3d: output_size must be', err(F.adaptive_avg_pool3d, x, 1.5))
    assert.matches('adaptive_avg_pool3d: expected output_size', err(F.adaptive_avg_pool3d, x))
    assert.matches('adaptive_avg_pool3d: input {2,3,0,6,7} is empty', err(F.adaptive_avg_pool3d, lunet.randn(2, 3, 0, 6, 7), 2))
    assert.matches('adaptive_avg_pool3d: input must be 4%-d', err(F.adaptive_avg_pool3d, lunet.randn(2, 3, 4), 2))
  end)
end)

describe('nn.BatchNorm3d', function()
  it('matches torch: training output, gradient and running statistics over two steps, then eval', function()
    local case
    for _, c in ipairs(cases) do if c.op == 'batch_norm3d' then case = c end end
    for _, dtype in ipairs({ 'float32', 'float64' }) do
      local tol = dtype == 'float32' and 1e-5 or 1e-12
      local m = nn.BatchNorm3d(3, { momentum = 0.2, dtype = dtype })
      lunet.no_grad(function() m.weight:copy_(get(case, 'w')); m.bias:copy_(get(case, 'b')) end)
      local x = get(case, 'x'):to(dtype):clone():requires_grad_()
      local out = m(x)
      assert.same(x:size(), out:size())
      assert.tensor_near(out, get(case, 'out'), tol)
      ;(out * get(case, 'dout'):to(dtype)):sum():backward()
      assert.tensor_near(x.grad, get(case, 'dx'), dtype == 'float32' and 1e-4 or 1e-10)
      m(get(case, 'x1'):to(dtype))
      assert.tensor_near(m.running_mean, get(case, 'running_mean'), tol)
      assert.tensor_near(m.running_var, get(case, 'running_var'), tol)
      assert.equal(2, m.num_batches_tracked:item())
      m:eval()
      assert.tensor_near(m(get(case, 'x2'):to(dtype)), get(case, 'out2'), tol)
      -- a non-contiguous input
      assert.tensor_near(m(get(case, 'x2'):to(dtype):transpose(4, 5):contiguous():transpose(4, 5)), get(case, 'out2'), tol)
    end
  end)
  it('state_dict names as torch; printing; errors', function()
    local m = nn.BatchNorm3d(4, { eps = 1e-3 })
    local sd = m:state_dict()
    for _, k in ipairs({ 'weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked' }) do assert.is_not_nil(sd[k], k) end
    assert.matches('^nn.BatchNorm3d%(4, eps 0.001%)', tostring(m))
    assert.matches('nn.BatchNorm3d: expected a 5%-d input %(N, C, D, H, W%), got 4%-d', err(m, lunet.randn(2, 4, 3, 3)))
    assert.matches('nn.BatchNorm3d: input has 3 channels, expected 4', err(m, lunet.randn(2, 3, 2, 2, 2)))
    assert.matches('nn.BatchNorm3d: input must be a tensor', err(m, 3))
    assert.matches("unknown option 'moment'", err(nn.BatchNorm3d, 4, { moment = 0.1 }))
    assert.matches('nn.BatchNorm3d: num_features must be an integer >= 1', err(nn.BatchNorm3d, 0))
  end)
end)

describe('3-d layers in a Sequential', function()
  it('Conv3d -> BatchNorm3d -> ReLU -> MaxPool3d -> AvgPool3d -> AdaptiveAvgPool3d trains, and eval matches the layers one by one', function()
    lunet.manual_seed(1)
    local layers = { nn.Conv3d(2, 4, 3, { padding = 1 }), nn.BatchNorm3d(4), nn.ReLU(), nn.MaxPool3d(2),
      nn.AvgPool3d({ 1, 2, 2 }), nn.AdaptiveAvgPool3d(1), nn.Flatten() }
    local net = nn.Sequential(unpack(layers))
    local x = lunet.randn(3, 2, 6, 8, 8)
    local loss = (net(x) ^ 2):sum()
    loss:backward()
    assert.is_true(net[1].weight.grad:abs():sum():item() > 0)
    net:eval()
    local y = x
    for _, m in ipairs(layers) do y = m:forward(y) end
    assert.tensor_near(net(x), y, 1e-6)
  end)
end)
