-- nn.Conv1d, MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, AdaptiveMaxPool1d
-- (and their functional forms) and BatchNorm1d on (N, C, L) input against
-- PyTorch 1.13: outputs, 1-based indices, float64 input and weight gradients
-- from spec/fixtures/nn_1d.safetensors (tools/gen_nn_1d_fixtures.py), in
-- float32 and float64, batched and unbatched, a transposed view; a torch
-- Conv1d's state_dict; float64 finite differences; printing; the errors.
local lunet = require 'lunet'
local json = require 'lunet.json'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local here = debug.getinfo(1, 'S').source:match('^@(.*/)') or './'
local fx, meta = lunet.load(here .. 'fixtures/nn_1d.safetensors')
local cases = json.decode(meta.cases)

local function get(case, k) return fx[case.name .. '.' .. k] end

local function err(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'no error')
  return tostring(e)
end

-- the case's module (functional false) or functional form on x (w, b its parameters)
local function run(case, x, w, b, functional)
  local a, op = case.args, case.op
  if op == 'conv1d' then
    local o = { stride = a.stride, padding = a.padding, dilation = a.dilation, groups = a.groups }
    if functional then return F.conv1d(x, w, b, o) end
    local m = nn.Conv1d(w:size(2) * (a.groups or 1), w:size(1), w:size(3),
      { stride = a.stride, padding = a.padding, dilation = a.dilation, groups = a.groups, bias = b ~= nil,
        dtype = x.dtype })
    -- (the parameters themselves, so their gradients reach w and b)
    m.weight = w
    if b then m.bias = b end
    return m(x)
  elseif op == 'max_pool1d' then
    local o = { stride = a.stride, padding = a.padding, dilation = a.dilation, ceil_mode = a.ceil_mode,
      return_indices = true }
    if functional then return F.max_pool1d(x, a.kernel_size, o) end
    return nn.MaxPool1d(a.kernel_size, o)(x)
  elseif op == 'avg_pool1d' then
    local o = { stride = a.stride, padding = a.padding, ceil_mode = a.ceil_mode, count_include_pad = a.count_include_pad }
    if functional then return F.avg_pool1d(x, a.kernel_size, o) end
    return nn.AvgPool1d(a.kernel_size, o)(x)
  elseif op == 'adaptive_avg_pool1d' then
    return functional and F.adaptive_avg_pool1d(x, a.output_size) or nn.AdaptiveAvgPool1d(a.output_size)(x)
  elseif op == 'adaptive_max_pool1d' then
    if functional then return F.adaptive_max_pool1d(x, a.output_size, true) end
    return nn.AdaptiveMaxPool1d(a.output_size, true)(x)
  end
  error('unknown op ' .. op)
end

local function check_case(case, dtype, functional)
  local what = ('%s %s%s'):format(case.name, dtype, functional and ' (F)' or '')
  local tol = dtype == 'float32' and 1e-5 or 1e-12
  local x = get(case, 'x'):to(dtype):clone():requires_grad_()
  local w = get(case, 'weight') and get(case, 'weight'):to(dtype):clone():requires_grad_()
  local b = get(case, 'bias') and get(case, 'bias'):to(dtype):clone():requires_grad_()
  local xin = case.view == 't' and x:transpose(2, 3) or x
  if case.view then assert.is_false(xin:is_contiguous()) end
  local out, idx = run(case, xin, w, b, functional)
  assert.equal(dtype, out.dtype, what)
  assert.tensor_near(out, get(case, 'out'), tol)
  if get(case, 'indices') then
    assert.equal('int64', idx.dtype, what)
    assert.same(get(case, 'indices'):totable(), idx:totable(), what .. ' indices')
  end
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
  assert.is_true(n >= 5)
end

describe('nn.Conv1d', function()
  it("matches torch: stride, padding, 'same' (odd reach, dilated), 'valid', dilation, groups, no bias, unbatched, a view",
    function() fixture_cases('conv1d') end)
  it("loads a torch Conv1d's state_dict (weight {out, in/groups, k}, bias {out}) and gives its output", function()
    local m = nn.Conv1d(4, 6, 3, { stride = 2, padding = 1, groups = 2 })
    local sd = m:state_dict()
    assert.same({ 6, 2, 3 }, sd.weight:size())
    assert.same({ 6 }, sd.bias:size())
    m:load_state_dict({ weight = fx['sd.weight'], bias = fx['sd.bias'] })
    assert.tensor_near(m(fx['sd.x']), fx['sd.out'], 1e-5)
    assert.same({ 6, 2, 3 }, nn.Conv1d(4, 6, { 3 }, 1, 0, 1, 2, false).weight:size())
  end)
  it("torch's default init: weight and bias within 1/sqrt(fan_in), fan_in = in/groups * k", function()
    lunet.manual_seed(3)
    local m = nn.Conv1d(8, 64, 5, { groups = 2 })
    local bound = 1 / math.sqrt(4 * 5)
    local wmax, bmax = m.weight:abs():max():item(), m.bias:abs():max():item()
    assert.is_true(wmax <= bound and wmax > 0.95 * bound, tostring(wmax))
    assert.is_true(bmax <= bound and bmax > 0.8 * bound, tostring(bmax))
  end)
  it('float64 finite differences: input, weight and bias, strided, dilated, grouped, unbatched', function()
    local function f(x, w, b) return F.conv1d(x, w, b, { stride = 2, padding = 1, dilation = 2, groups = 2 }) end
    local d = function(...) return lunet.randn(...):double():requires_grad_() end
    assert.is_true(gradcheck(f, { d(2, 4, 9), d(4, 2, 3), d(4) }))
    assert.is_true(gradcheck(function(x, w) return F.conv1d(x, w, nil, 1, 'same') end, { d(3, 8), d(2, 3, 4) }))
  end)
  it('positional forms, options, printing', function()
    local x = lunet.randn(2, 3, 10)
    local m = nn.Conv1d(3, 4, 3, 2, 1)
    assert.same({ 2, 4, 5 }, m(x):size())
    assert.same({ 4, 5 }, m(x[1]):size())
    assert.tensor_near(F.conv1d(x, m.weight, m.bias, 2, 1), m(x), 0)
    assert.same({ 2, 4, 10 }, nn.Conv1d(3, 4, 4, { padding = 'same' })(x):size())
    assert.same({ 2, 4, 7 }, nn.Conv1d(3, 4, 4, { padding = 'valid' })(x):size())
    assert.is_nil(nn.Conv1d(3, 4, 3, { bias = false }).bias)
    assert.equal('float64', nn.Conv1d(3, 4, 3, { dtype = 'float64' }).weight.dtype)
    assert.matches('^nn.Conv1d%(3 %-> 4, 3, stride 2, pad 1%)', tostring(m))
    assert.matches('^nn.Conv1d%(4 %-> 4, 5, dilation 2, groups 2, no bias%)',
      tostring(nn.Conv1d(4, 4, 5, { dilation = 2, groups = 2, bias = false })))
  end)
  it('errors', function()
    local x = lunet.randn(2, 3, 10)
    assert.matches('nn.Conv1d: expected %(in_channels', err(nn.Conv1d, 3, 4))
    assert.matches('nn.Conv1d: kernel_size must be an integer >= 1 %(or {n}%), got {3, 3}', err(nn.Conv1d, 3, 4, { 3, 3 }))
    assert.matches('nn.Conv1d: stride must be an integer >= 1', err(nn.Conv1d, 3, 4, 3, { stride = 0 }))
    assert.matches('nn.Conv1d: in_channels 3 and out_channels 4 must be divisible by groups 2',
      err(nn.Conv1d, 3, 4, 3, { groups = 2 }))
    assert.matches("nn.Conv1d: padding='same' is not supported for strided", err(nn.Conv1d, 3, 4, 3, { stride = 2, padding = 'same' }))
    assert.matches("padding_mode 'mirror' is not supported", err(nn.Conv1d, 3, 4, 3, { padding_mode = 'mirror' }))
    assert.matches("unknown option 'strides'", err(nn.Conv1d, 3, 4, 3, { strides = 2 }))
    assert.matches('conv1d: input must be 2%-d %(C, L%) or 3%-d %(N, C, L%), got 4%-d', err(nn.Conv1d(3, 4, 3), lunet.randn(1, 3, 5, 5)))
    assert.matches('conv1d: input has 5 channels, weight {4,3,3} with groups 1 expects 3', err(nn.Conv1d(3, 4, 3), lunet.randn(2, 5, 8)))
    assert.matches('conv1d: input {2,3,2} is too small for a kernel of 3', err(nn.Conv1d(3, 4, 3), lunet.randn(2, 3, 2)))
    assert.matches('conv1d: weight must be 3%-d', err(F.conv1d, x, lunet.randn(4, 3, 3, 3)))
    assert.matches('conv1d: bias has 3 elements, weight has 4 outputs', err(F.conv1d, x, lunet.randn(4, 3, 3), lunet.randn(3)))
    assert.matches("conv1d: padding must be a number, 'same' or 'valid', got 'full'", err(F.conv1d, x, lunet.randn(4, 3, 3), nil, 1, 'full'))
    assert.matches("conv1d: padding='same' needs stride 1", err(F.conv1d, x, lunet.randn(4, 3, 3), nil, 2, 'same'))
    assert.matches('conv1d: input must be a floating%-point', err(F.conv1d, lunet.zeros(2, 3, 5, { dtype = 'int64' }), lunet.randn(4, 3, 3)))
    assert.matches("conv1d: unknown option 'pad'", err(F.conv1d, x, lunet.randn(4, 3, 3), nil, { pad = 1 }))
  end)
end)

describe('nn.MaxPool1d', function()
  it('matches torch: stride, padding, dilation, ceil_mode (with padding), ties, unbatched; 1-based indices',
    function() fixture_cases('max_pool1d') end)
  it('float64 finite differences; the output alone by default; positional forms; printing', function()
    assert.is_true(gradcheck(function(x) return F.max_pool1d(x, 3, 2, 1, 1, true) end,
      { lunet.randn(2, 3, 10):double():requires_grad_() }))
    local x = lunet.randn(2, 3, 10)
    local y, i = nn.MaxPool1d(2)(x)
    assert.same({ 2, 3, 5 }, y:size()); assert.is_nil(i)
    assert.equal(2, select('#', nn.MaxPool1d(3, 1, 1, 1, true)(x)))
    assert.equal(2, select('#', F.max_pool1d(x, 3, nil, 0, 1, false, true)))
    assert.equal('nn.MaxPool1d(3, stride 2, pad 1, ceil)\n0 parameters',
      tostring(nn.MaxPool1d(3, { stride = 2, padding = 1, ceil_mode = true })))
    assert.equal('nn.MaxPool1d(2)\n0 parameters', tostring(nn.MaxPool1d(2)))
  end)
  it('errors', function()
    local x = lunet.randn(2, 3, 10)
    assert.matches('nn.MaxPool1d: expected kernel_size', err(nn.MaxPool1d))
    assert.matches('nn.MaxPool1d: kernel_size must be an integer >= 1', err(nn.MaxPool1d, 0))
    assert.matches('nn.MaxPool1d: dilation must be an integer >= 1', err(nn.MaxPool1d, 2, { dilation = 0 }))
    assert.matches("unknown option 'ceil'", err(nn.MaxPool1d, 2, { ceil = true }))
    assert.matches('max_pool1d: padding 2 must be at most half the kernel 3', err(F.max_pool1d, x, 3, { padding = 2 }))
    assert.matches('max_pool1d: input {2,3,10} is too small for a window of 11', err(nn.MaxPool1d(11), x))
    assert.matches('max_pool1d: input must be 2%-d %(C, L%) or 3%-d', err(F.max_pool1d, lunet.randn(3), 2))
    assert.matches('max_pool1d: stride must be an integer >= 1 %(or {n}%), got {1, 2}', err(F.max_pool1d, x, 2, { stride = { 1, 2 } }))
  end)
end)

describe('nn.AvgPool1d', function()
  it('matches torch: stride, padding with and without count_include_pad, ceil_mode, unbatched',
    function() fixture_cases('avg_pool1d') end)
  it('float64 finite differences; positional forms; printing', function()
    assert.is_true(gradcheck(function(x) return F.avg_pool1d(x, 4, 3, 1, true, false) end,
      { lunet.randn(2, 9):double():requires_grad_() }))
    local x = lunet.randn(2, 3, 9)
    assert.tensor_near(nn.AvgPool1d(4, 3, 1, true, false)(x),
      F.avg_pool1d(x, 4, { stride = 3, padding = 1, ceil_mode = true, count_include_pad = false }), 0)
    assert.equal('nn.AvgPool1d(4, stride 3, pad 1, ceil, exclude pad)\n0 parameters',
      tostring(nn.AvgPool1d(4, 3, 1, true, false)))
  end)
  it('errors', function()
    assert.matches('nn.AvgPool1d: padding must be an integer >= 0', err(nn.AvgPool1d, 2, { padding = -1 }))
    assert.matches("unknown option 'dilation'", err(nn.AvgPool1d, 2, { dilation = 2 }))
    assert.matches('avg_pool1d: input {3,1} is too small for a window of 2', err(nn.AvgPool1d(2), lunet.randn(3, 1)))
    assert.matches('avg_pool1d: expected kernel_size', err(F.avg_pool1d, lunet.randn(3, 4)))
  end)
end)

describe('nn.AdaptiveAvgPool1d and nn.AdaptiveMaxPool1d', function()
  it('match torch: uneven, even and growing bins, unbatched; 1-based indices', function()
    fixture_cases('adaptive_avg_pool1d')
    fixture_cases('adaptive_max_pool1d')
  end)
  it('float64 finite differences; options forms; printing', function()
    local d = lunet.randn(2, 3, 10):double():requires_grad_()
    assert.is_true(gradcheck(function(x) return F.adaptive_avg_pool1d(x, 4) end, { d }))
    assert.is_true(gradcheck(function(x) return F.adaptive_max_pool1d(x, 4) end, { d }))
    local x = lunet.randn(2, 3, 10)
    assert.same({ 2, 3, 4 }, nn.AdaptiveAvgPool1d{ output_size = 4 }(x):size())
    assert.is_nil(select(2, nn.AdaptiveMaxPool1d(4)(x)))
    assert.equal(2, select('#', nn.AdaptiveMaxPool1d{ output_size = 4, return_indices = true }(x)))
    assert.equal('nn.AdaptiveAvgPool1d(4)\n0 parameters', tostring(nn.AdaptiveAvgPool1d({ 4 })))
    assert.equal('nn.AdaptiveMaxPool1d(4, return_indices)\n0 parameters', tostring(nn.AdaptiveMaxPool1d(4, true)))
  end)
  it('errors', function()
    local x = lunet.randn(2, 3, 10)
    assert.matches('nn.AdaptiveAvgPool1d: expected output_size', err(nn.AdaptiveAvgPool1d))
    assert.matches('nn.AdaptiveAvgPool1d: output_size must be an integer >= 1', err(nn.AdaptiveAvgPool1d, { 2, 2 }))
    assert.matches('nn.AdaptiveMaxPool1d: output_size must be an integer >= 1', err(nn.AdaptiveMaxPool1d, 0))
    assert.matches("unknown option 'indices'", err(nn.AdaptiveMaxPool1d, 2, { indices = true }))
    assert.matches('adaptive_avg_pool1d: output_size must be', err(F.adaptive_avg_pool1d, x, 1.5))
    assert.matches('adaptive_max_pool1d: return_indices must be a boolean', err(F.adaptive_max_pool1d, x, 2, 1))
    assert.matches('adaptive_max_pool1d: input {2,3,0} is empty', err(F.adaptive_max_pool1d, lunet.randn(2, 3, 0), 2))
    assert.matches('adaptive_avg_pool1d: input must be 2%-d', err(F.adaptive_avg_pool1d, lunet.randn(1, 2, 3, 4), 2))
  end)
end)

describe('nn.BatchNorm1d on (N, C, L)', function()
  it("matches torch: training output, gradient and running statistics, then eval", function()
    local case
    for _, c in ipairs(cases) do if c.op == 'batch_norm1d' then case = c end end
    for _, dtype in ipairs({ 'float32', 'float64' }) do
      local tol = dtype == 'float32' and 1e-5 or 1e-12
      local m = nn.BatchNorm1d(3, { momentum = 0.2, dtype = dtype })
      lunet.no_grad(function() m.weight:copy_(get(case, 'w')); m.bias:copy_(get(case, 'b')) end)
      local x = get(case, 'x'):to(dtype):clone():requires_grad_()
      local out = m(x)
      assert.tensor_near(out, get(case, 'out'), tol)
      ;(out * get(case, 'dout'):to(dtype)):sum():backward()
      assert.tensor_near(x.grad, get(case, 'dx'), dtype == 'float32' and 1e-4 or 1e-10)
      assert.tensor_near(m.running_mean, get(case, 'running_mean'), tol)
      assert.tensor_near(m.running_var, get(case, 'running_var'), tol)
      m:eval()
      assert.tensor_near(m(get(case, 'x2'):to(dtype)), get(case, 'out2'), tol)
    end
  end)
end)

describe('1-d layers in a Sequential', function()
  it('Conv1d -> BatchNorm1d -> ReLU -> MaxPool1d -> AdaptiveAvgPool1d trains, and eval matches the layers one by one', function()
    lunet.manual_seed(1)
    local layers = { nn.Conv1d(2, 4, 3, { padding = 1 }), nn.BatchNorm1d(4), nn.ReLU(), nn.MaxPool1d(2),
      nn.AdaptiveAvgPool1d(1), nn.Flatten() }
    local net = nn.Sequential(unpack(layers))
    local x = lunet.randn(5, 2, 12)
    local loss = (net(x) ^ 2):sum()
    loss:backward()
    assert.is_true(net[1].weight.grad:abs():sum():item() > 0)
    net:eval()
    local y = x
    for _, m in ipairs(layers) do y = m:forward(y) end
    assert.tensor_near(net(x), y, 1e-6)
  end)
end)
