-- nn.Unfold, nn.Fold, the padding modules (ReflectionPad1d/2d,
-- ReplicationPad1d/2d, ConstantPad1d/2d), nn.LocalResponseNorm,
-- nn.ChannelShuffle and their functional forms (with normalize) against
-- PyTorch 1.13: outputs and float64 input gradients from
-- spec/fixtures/nn_fold_pad.safetensors (tools/gen_nn_fold_pad_fixtures.py),
-- in float32 and float64, on contiguous and non-contiguous input; float64
-- finite differences; printing; the errors.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local fx = require 'support.fixtures'
local nn = lunet.nn
local F = nn.functional
local err = fx.err_of

local tensors, cases = fx.load_fixture('nn_fold_pad')
local function get(case, k) return tensors[case.name .. '.' .. k] end

-- the case's functional form (functional true) or module on x
local function run(case, x, functional)
  local o = case.opts
  if case.op == 'unfold' then
    if functional then return F.unfold(x, o.kernel_size, o.opts) end
    return nn.Unfold(o.kernel_size, o.opts)(x)
  elseif case.op == 'fold' then
    if functional then return F.fold(x, o.output_size, o.kernel_size, o.opts) end
    return nn.Fold(o.output_size, o.kernel_size, o.opts)(x)
  elseif case.op == 'pad' then
    return nn[o.module](o.padding, o.value)(x)
  elseif case.op == 'normalize' then
    return F.normalize(x, { p = o.p == 'inf' and math.huge or o.p, dim = o.dim, eps = o.eps })
  elseif case.op == 'local_response_norm' then
    if functional then return F.local_response_norm(x, o.size, o.opts) end
    return nn.LocalResponseNorm(o.size, o.opts)(x)
  elseif case.op == 'channel_shuffle' then
    if functional then return F.channel_shuffle(x, o.groups) end
    return nn.ChannelShuffle(o.groups)(x)
  end
  error('unknown op ' .. case.op)
end

local function check_case(case, dtype, functional, strided)
  local what = ('%s %s%s%s'):format(case.name, dtype, functional and ' (F)' or '', strided and ' strided' or '')
  local tol = dtype == 'float32' and 1e-5 or 1e-12
  local x = get(case, 'x'):to(dtype)
  if strided then   -- (every other element of a wider tensor)
    local nd = x:dim()
    x = lunet.stack({ x, x }, nd + 1):select(nd + 1, 1)
    assert.is_false(x:is_contiguous(), what)
  else x = x:clone() end
  x:requires_grad_()
  local out = run(case, x, functional)
  assert.equal(dtype, out.dtype, what)
  assert.same(get(case, 'out'):size(), out:size(), what)
  assert.is_true(fx.maxdiff(out, get(case, 'out')) <= tol * 10, what)
  ;(out * get(case, 'dout'):to(dtype)):sum():backward()
  -- (relative: an all-zero row's gradient is dout / eps, 1e12)
  local dx = get(case, 'dx')
  assert.is_true(fx.maxdiff(x.grad, dx) <= tol * 10 * math.max(1, dx:abs():max():item()), what .. ' gradient')
end

local function fixture_cases(op, least)
  local n = 0
  for _, case in ipairs(cases) do
    if case.op == op then
      n = n + 1
      for _, dtype in ipairs({ 'float32', 'float64' }) do
        for _, strided in ipairs({ false, true }) do
          check_case(case, dtype, false, strided)
          check_case(case, dtype, true, strided)
        end
      end
    end
  end
  assert.is_true(n >= least, op .. ': ' .. n .. ' cases')
end

local function d(...) return lunet.randn(...):double():requires_grad_() end

describe('nn.Unfold and nn.Fold', function()
  it('unfold matches torch: square and non-square kernels, stride, padding, dilation, L = 1, 1x1, unbatched',
    function() fixture_cases('unfold', 6) end)
  it('fold matches torch: overlapping blocks summed, strides leaving gaps, padding, dilation, L = 1, unbatched',
    function() fixture_cases('fold', 6) end)
  it('float64 finite differences; fold is unfold\'s adjoint: <unfold(x), y> = <x, fold(y)>', function()
    local o = { stride = { 2, 1 }, padding = 1, dilation = { 1, 2 } }
    assert.is_true(gradcheck(function(x) return F.unfold(x, { 2, 3 }, o) end, { d(2, 2, 4, 5) }))
    assert.is_true(gradcheck(function(x) return F.fold(x, { 4, 5 }, { 2, 3 }, o) end, { d(2, 12, 9) }))
    assert.is_true(gradcheck(function(x) return F.fold(x, 3, 2) end, { d(8, 4) }))
    local x, y = lunet.randn(2, 3, 6, 7):double(), lunet.randn(2, 3 * 6, 12):double()
    local o2 = { stride = 2, padding = { 1, 0 } }
    local lhs = (F.unfold(x, { 2, 3 }, o2) * y):sum():item()
    local rhs = (x * F.fold(y, { 6, 7 }, { 2, 3 }, o2)):sum():item()
    assert.is_true(math.abs(lhs - rhs) < 1e-10 * math.abs(lhs), lhs .. ' ' .. rhs)
  end)
  it("positional forms as torch's (dilation, padding, stride); empty batch; printing", function()
    local x = lunet.randn(2, 3, 6, 7)
    local o = { dilation = 2, padding = 1, stride = { 2, 1 } }
    assert.tensor_near(F.unfold(x, 2, 2, 1, { 2, 1 }), F.unfold(x, 2, o), 0)
    assert.tensor_near(nn.Unfold(2, 2, 1, { 2, 1 })(x), F.unfold(x, 2, o), 0)
    assert.tensor_near(F.unfold(x, 2, 2, { padding = 1, stride = { 2, 1 } }), F.unfold(x, 2, o), 0)
    local u = F.unfold(x, 2, o)
    assert.tensor_near(F.fold(u, { 6, 7 }, 2, 2, 1, { 2, 1 }), F.fold(u, { 6, 7 }, 2, o), 0)
    assert.tensor_near(nn.Fold({ 6, 7 }, 2, 2, 1, { 2, 1 })(u), F.fold(u, { 6, 7 }, 2, o), 0)
    assert.same({ 0, 12, 30 }, F.unfold(lunet.randn(0, 3, 6, 7), 2):size())
    assert.same({ 0, 3, 6, 7 }, F.fold(lunet.randn(0, 12, 30), { 6, 7 }, 2):size())
    assert.equal('nn.Unfold({2, 3}, dilation 2, padding {1, 0})\n0 parameters',
      tostring(nn.Unfold({ 2, 3 }, { dilation = 2, padding = { 1, 0 } })))
    assert.equal('nn.Unfold(2)\n0 parameters', tostring(nn.Unfold(2)))
    assert.equal('nn.Fold(output_size {4, 5}, kernel_size 2, stride 2)\n0 parameters',
      tostring(nn.Fold({ 4, 5 }, 2, { stride = 2 })))
  end)
  it('errors', function()
    local x = lunet.randn(2, 3, 4, 4)
    assert.matches('nn.Unfold: expected kernel_size', err(nn.Unfold))
    assert.matches('nn.Unfold: kernel_size must be an integer >= 1', err(nn.Unfold, 0))
    assert.matches('nn.Unfold: stride must be an integer >= 1', err(nn.Unfold, 2, { stride = 0 }))
    assert.matches('nn.Unfold: padding must be an integer >= 0', err(nn.Unfold, 2, { padding = -1 }))
    assert.matches("nn.Unfold: unknown option 'strides'", err(nn.Unfold, 2, { strides = 1 }))
    assert.matches('nn.Fold: expected output_size', err(nn.Fold))
    assert.matches('nn.Fold: output_size must be an integer >= 1', err(nn.Fold, { 0, 3 }, 2))
    assert.matches('nn.Fold: expected kernel_size', err(nn.Fold, 4))
    assert.matches('unfold: kernel_size must be integers >= 1, got 0', err(F.unfold, x, 0))
    assert.matches('unfold: stride must be integers >= 1', err(F.unfold, x, 2, { stride = { 1, 0 } }))
    assert.matches('unfold: dilation must be integers >= 1', err(F.unfold, x, 2, 0))
    assert.matches("unfold: unknown option 'pad'", err(F.unfold, x, 2, { pad = 1 }))
    assert.matches('unfold: expected kernel_size', err(F.unfold, x))
    assert.matches('unfold: a 4x4 plane with kernel_size {5, 5}.* gives 0x0 blocks', err(F.unfold, x, 5))
    assert.matches('unfold: input must be 4%-d %(N, C, H, W%) or 3%-d', err(F.unfold, lunet.randn(4, 4), 2))
    assert.matches('unfold: input must be a floating%-point tensor, got int64',
      err(F.unfold, lunet.zeros(1, 1, 3, 3, { dtype = 'int64' }), 2))
    assert.matches('unfold: input must be a tensor', err(F.unfold, nil, 2))
    local u = lunet.randn(2, 12, 9)
    assert.matches('fold: input has 9 blocks %(dim 3%), but output_size {5, 5} with kernel_size {2, 2}.* gives 4x4 = 16',
      err(F.fold, u, 5, 2))
    assert.matches('fold: input has 12 values per block %(dim 2%), not divisible by kernel_size 3x3 = 9',
      err(F.fold, u, 5, 3))
    assert.matches('fold: input has 12 values per block %(dim 1%)', err(F.fold, lunet.randn(12, 9), 5, 3))
    assert.matches('fold: input must be 3%-d %(N, C%*kh%*kw, L%) or 2%-d', err(F.fold, x, 4, 2))
    assert.matches('fold: output_size must be integers >= 1', err(F.fold, u, { 4, 0 }, 2))
    assert.matches('fold: expected output_size', err(F.fold, u))
    assert.matches("fold: unknown option 'strides'", err(F.fold, u, 4, 2, { strides = 1 }))
    assert.matches('fold: a 1x1 plane with kernel_size {2, 2}', err(F.fold, u, 1, 2))
  end)
end)

describe('the padding modules', function()
  it('match torch: reflect, replicate, constant; 1-d and 2-d; batched and unbatched; constant on 1-d and 5-d input',
    function() fixture_cases('pad', 12) end)
  it('float64 finite differences; empty batch; printing', function()
    assert.is_true(gradcheck(function(x) return nn.ReflectionPad2d({ 1, 2, 2, 0 })(x) end, { d(1, 2, 3, 4) }))
    assert.is_true(gradcheck(function(x) return nn.ReplicationPad1d({ 2, 1 })(x) end, { d(2, 3) }))
    assert.is_true(gradcheck(function(x) return nn.ConstantPad1d(1, 2.5)(x) end, { d(2, 2, 2, 3) }))
    assert.same({ 0, 3, 9 }, nn.ReflectionPad1d(2)(lunet.randn(0, 3, 5)):size())
    assert.same({ 0, 3, 4, 6 }, nn.ConstantPad2d(1, 1)(lunet.randn(0, 3, 2, 4)):size())
    assert.same({ 1, 2, 2, 2 }, nn.ConstantPad1d({ 2, 0 }, 7)(lunet.zeros(1, 2, 2, 0)):size())
    assert.same({ 7, 7, 0, 7 }, nn.ConstantPad1d({ 2, 1 }, { value = 7 })(lunet.zeros(1)):totable())
    assert.same({ 9, 5, 3, 1, 3 }, nn.ReflectionPad1d({ 0, 1 })(lunet.tensor({ { 9, 5, 3, 1 } })):totable()[1])
    assert.equal('nn.ReflectionPad1d({2, 2})\n0 parameters', tostring(nn.ReflectionPad1d(2)))
    assert.equal('nn.ReplicationPad2d({1, 2, 3, 4})\n0 parameters', tostring(nn.ReplicationPad2d({ 1, 2, 3, 4 })))
    assert.equal('nn.ConstantPad2d({1, 1, 1, 1}, value 1.5)\n0 parameters', tostring(nn.ConstantPad2d(1, 1.5)))
    -- nn.ZeroPad2d is the family's constant pad with value 0, on any input of 2 or more dims, as torch's
    assert.same({ { 0, 0, 0 }, { 0, 5, 0 } }, nn.ZeroPad2d({ 1, 1, 1, 0 })(lunet.tensor({ { 5 } })):totable())
    assert.same({ 1, 2, 3, 4, 6 }, nn.ZeroPad2d(1)(lunet.zeros(1, 2, 3, 2, 4)):size())
    assert.equal('nn.ZeroPad2d({1, 1, 1, 1})\n0 parameters', tostring(nn.ZeroPad2d(1)))
    assert.matches('nn.ZeroPad2d: takes padding only', err(nn.ZeroPad2d, 1, 2))
  end)
  it('errors', function()
    assert.matches('nn.ReflectionPad1d: padding must be a number or {left, right}, got 4 values',
      err(nn.ReflectionPad1d, { 1, 2, 3, 4 }))
    assert.matches('nn.ReflectionPad2d: padding must be a number or {left, right, top, bottom}, got 2 values',
      err(nn.ReflectionPad2d, { 1, 2 }))
    assert.matches('nn.ReplicationPad1d: padding must be integers >= 0, got %-1', err(nn.ReplicationPad1d, -1))
    assert.matches('nn.ReplicationPad2d: padding must be integers >= 0, got 1.5', err(nn.ReplicationPad2d, { 1, 1, 1.5, 0 }))
    assert.matches('nn.ReflectionPad1d: takes padding only', err(nn.ReflectionPad1d, 1, 2))
    assert.matches('nn.ConstantPad1d: expected value', err(nn.ConstantPad1d, 1))
    assert.matches("nn.ConstantPad2d: unknown option 'val'", err(nn.ConstantPad2d, 1, { val = 1 }))
    assert.matches("nn.ConstantPad2d: option 'value' must be a number", err(nn.ConstantPad2d, 1, 'x'))
    assert.matches("pad: left padding 4 is too large for mode 'reflect' on a dim of size 4",
      err(nn.ReflectionPad1d(4), lunet.randn(2, 4)))
    assert.matches("pad: top padding 3 is too large for mode 'reflect' on a dim of size 3",
      err(nn.ReflectionPad2d(3), lunet.randn(2, 3, 5)))
    assert.matches("pad: left padding 1 is too large for mode 'replicate' on a dim of size 0",
      err(nn.ReplicationPad1d(1), lunet.randn(2, 0)))
    assert.matches('nn.ReflectionPad1d: input must be %(N, C, W%) or %(C, W%), got 4%-d',
      err(nn.ReflectionPad1d(1), lunet.randn(1, 2, 3, 4)))
    assert.matches('nn.ReplicationPad2d: input must be %(N, C, H, W%) or %(C, H, W%), got 2%-d',
      err(nn.ReplicationPad2d(1), lunet.randn(3, 4)))
    assert.matches('nn.ConstantPad2d: input must have at least 2 dim', err(nn.ConstantPad2d(1, 0), lunet.randn(3)))
    assert.matches('nn.ConstantPad1d: input must be a tensor', err(nn.ConstantPad1d(1, 0), 3))
  end)
end)

describe('normalize, nn.LocalResponseNorm, nn.ChannelShuffle', function()
  it('normalize matches torch: p 1, 2, 3 and inf, dims (1-based, negative), a large eps, an all-zero row',
    function() fixture_cases('normalize', 6) end)
  it('local_response_norm matches torch: 3-d to 5-d input, size larger than C',
    function() fixture_cases('local_response_norm', 3) end)
  it('channel_shuffle matches torch', function() fixture_cases('channel_shuffle', 2) end)
  it('float64 finite differences; positional forms; empty input; printing', function()
    assert.is_true(gradcheck(function(x) return F.normalize(x, 3, 1) end, { d(3, 4) }))
    assert.is_true(gradcheck(function(x) return F.local_response_norm(x, 3, 0.1, 0.6, 1.5) end, { d(2, 4, 3) }))
    assert.is_true(gradcheck(function(x) return F.channel_shuffle(x, 2) end, { d(1, 4, 2, 3) }))
    local x = lunet.randn(2, 5, 3)
    assert.tensor_near(F.normalize(x, 1, -1, 0.1), F.normalize(x, { p = 1, dim = -1, eps = 0.1 }), 0)
    assert.tensor_near(F.normalize(x, 1, { dim = 3 }), F.normalize(x, { p = 1, dim = 3 }), 0)
    assert.tensor_near(F.local_response_norm(x, 2, 0.1, { k = 2 }),
      nn.LocalResponseNorm(2, { alpha = 0.1, k = 2 })(x), 0)
    assert.tensor_near(nn.LocalResponseNorm(2, 0.1, 0.75, 2)(x), F.local_response_norm(x, 2, { alpha = 0.1, k = 2 }), 0)
    assert.same({ 0, 4, 3 }, F.local_response_norm(lunet.randn(0, 4, 3), 2):size())
    assert.same({ 0, 4, 3 }, F.channel_shuffle(lunet.randn(0, 4, 3), 2):size())
    assert.same({ 3, 0 }, F.normalize(lunet.randn(3, 0), { dim = 1 }):size())
    assert.same({ 1, 3, 5, 2, 4, 6 }, F.channel_shuffle(lunet.tensor({ { { 1 }, { 2 }, { 3 }, { 4 }, { 5 }, { 6 } } }), 3)
      :view(-1):totable())
    assert.equal('nn.LocalResponseNorm(3, alpha 0.1, beta 0.5, k 2)\n0 parameters',
      tostring(nn.LocalResponseNorm(3, { alpha = 0.1, beta = 0.5, k = 2 })))
    assert.equal('nn.ChannelShuffle(groups 2)\n0 parameters', tostring(nn.ChannelShuffle(2)))
  end)
  it('errors', function()
    local x = lunet.randn(2, 6, 3)
    assert.matches('normalize: dim 3 out of range for a 2%-d tensor', err(F.normalize, lunet.randn(2, 3), { dim = 3 }))
    assert.matches('normalize: dim 2 out of range for a 1%-d tensor', err(F.normalize, lunet.randn(3)))
    assert.matches('normalize: p must be > 0', err(F.normalize, x, 0))
    assert.matches('normalize: eps must be >= 0', err(F.normalize, x, 2, 2, -1))
    assert.matches("normalize: unknown option 'axis'", err(F.normalize, x, { axis = 1 }))
    assert.matches('normalize: input must be a floating%-point tensor', err(F.normalize, lunet.zeros(2, 2, { dtype = 'int64' })))
    assert.matches('nn.LocalResponseNorm: size must be an integer >= 1, got 0', err(nn.LocalResponseNorm, 0))
    assert.matches("nn.LocalResponseNorm: unknown option 'bias'", err(nn.LocalResponseNorm, 2, { bias = 1 }))
    assert.matches('local_response_norm: input must have at least 3 dims %(N, C, %*%), got 2%-d',
      err(F.local_response_norm, lunet.randn(2, 6), 2))
    assert.matches('local_response_norm: size must be an integer >= 1', err(F.local_response_norm, x))
    assert.matches("local_response_norm: unknown option 'size'", err(F.local_response_norm, x, 2, { size = 2 }))
    assert.matches('nn.ChannelShuffle: groups must be an integer >= 1, got 0', err(nn.ChannelShuffle, 0))
    assert.matches('nn.ChannelShuffle: takes groups only', err(nn.ChannelShuffle, 2, { groups = 2 }))
    assert.matches('channel_shuffle: input has 6 channels, not divisible by groups 4', err(F.channel_shuffle, x, 4))
    assert.matches('channel_shuffle: input must have more than 2 dims %(N, C, %*%), got 2%-d',
      err(F.channel_shuffle, lunet.randn(2, 6), 2))
  end)
end)
