-- nn.ConvTranspose1d, ConvTranspose3d, AdaptiveMaxPool3d, LPPool1d, LPPool2d
-- (and their functional forms) against PyTorch 1.13: outputs, 1-based
-- indices, float64 gradients from spec/fixtures/nn_layers3.safetensors
-- (tools/gen_nn_layers3_fixtures.py), float32 and float64; a torch
-- ConvTranspose1d's state_dict; float64 finite differences. Dropout1d,
-- Dropout3d, AlphaDropout, FeatureAlphaDropout: p = 0 / p = 1 / eval, the
-- mask's structure and the statistics. Printing, errors.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local sfx = require 'support.fixtures'
local nn = lunet.nn
local F = nn.functional

local fx, cases = sfx.load_fixture('nn_layers3')
local err = sfx.err_of
local function get(case, k) return fx[case.name .. '.' .. k] end
local function d(...) return lunet.randn(...):double():requires_grad_() end

-- the case's module (functional false) or functional form on x (w, b its parameters)
local function run(case, x, w, b, functional)
  local a, op = case.args, case.op
  if op == 'conv_transpose1d' or op == 'conv_transpose3d' then
    local o = { stride = a.stride, padding = a.padding, output_padding = a.output_padding, dilation = a.dilation,
      groups = a.groups }
    if functional then return F[op](x, w, b, o) end
    local M = op == 'conv_transpose1d' and nn.ConvTranspose1d or nn.ConvTranspose3d
    local k = op == 'conv_transpose1d' and w:size(3) or { w:size(3), w:size(4), w:size(5) }
    o.bias, o.dtype = b ~= nil, x.dtype
    local m = M(w:size(1), w:size(2) * (a.groups or 1), k, o)
    m.weight = w
    if b then m.bias = b end
    return m(x)
  elseif op == 'adaptive_max_pool3d' then
    if functional then return F.adaptive_max_pool3d(x, a.output_size, true) end
    return nn.AdaptiveMaxPool3d(a.output_size, true)(x)
  elseif op == 'lp_pool1d' or op == 'lp_pool2d' then
    local o = { stride = a.stride, ceil_mode = a.ceil_mode }
    if functional then return F[op](x, a.norm_type, a.kernel_size, o) end
    return (op == 'lp_pool1d' and nn.LPPool1d or nn.LPPool2d)(a.norm_type, a.kernel_size, o)(x)
  end
  error('unknown op ' .. op)
end

local function check_case(case, dtype, functional)
  local what = ('%s %s%s'):format(case.name, dtype, functional and ' (F)' or '')
  local tol = dtype == 'float32' and 2e-5 or 1e-12
  local x = get(case, 'x'):to(dtype):clone():requires_grad_()
  local w = get(case, 'weight') and get(case, 'weight'):to(dtype):clone():requires_grad_()
  local b = get(case, 'bias') and get(case, 'bias'):to(dtype):clone():requires_grad_()
  local out, idx = run(case, x, w, b, functional)
  assert.equal(dtype, out.dtype, what)
  assert.same(get(case, 'out'):size(), out:size(), what)
  assert.is_true(sfx.rel(out, get(case, 'out')) < tol, what .. ' out')
  if get(case, 'indices') then
    assert.equal('int64', idx.dtype, what)
    assert.same(get(case, 'indices'):totable(), idx:totable(), what .. ' indices')
  end
  ;(out * get(case, 'dout'):to(dtype)):sum():backward()
  assert.is_true(sfx.rel(x.grad, get(case, 'dx')) < tol, what .. ' dx')
  if w then assert.is_true(sfx.rel(w.grad, get(case, 'dweight')) < tol, what .. ' dweight') end
  if b then assert.is_true(sfx.rel(b.grad, get(case, 'dbias')) < tol, what .. ' dbias') end
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
  assert.is_true(n >= 4)
end

describe('nn.ConvTranspose1d', function()
  it('matches torch: stride, padding, output_padding (below stride or dilation), dilation, groups, no bias, unbatched',
    function() fixture_cases('conv_transpose1d') end)
  it("loads a torch ConvTranspose1d's state_dict (weight {in, out/groups, k}) and gives its output", function()
    local m = nn.ConvTranspose1d(4, 6, 3, 2, 1, 1, 2)
    assert.same({ 4, 3, 3 }, m.weight:size())
    m:load_state_dict({ weight = fx['sd.weight'], bias = fx['sd.bias'] })
    assert.is_true(sfx.rel(m(fx['sd.x']), fx['sd.out']) < 1e-5)
  end)
  it('float64 finite differences; output_size; a view; printing', function()
    local function f(x, w, b) return F.conv_transpose1d(x, w, b, 2, 1, 1, 2, 1) end
    assert.is_true(gradcheck(f, { d(2, 4, 5), d(4, 2, 3), d(4) }))
    local m = nn.ConvTranspose1d(3, 2, 3, { stride = 3 })
    local x = lunet.randn(2, 3, 4)
    assert.same({ 2, 2, 12 }, m(x):size())
    assert.same({ 2, 2, 14 }, m(x, { 14 }):size())
    assert.same({ 2, 14 }, m(x[1], { 2, 2, 14 }):size())
    local xt = lunet.randn(2, 4, 3):transpose(2, 3)
    assert.is_true(sfx.maxdiff(m(xt), m(xt:contiguous())) < 1e-6)
    assert.equal('nn.ConvTranspose1d(3 -> 2, 3, stride 3)\n' .. (3 * 2 * 3 + 2) .. ' parameters', tostring(m))
    assert.matches('^nn.ConvTranspose1d%(4 %-> 4, 5, pad 1, output_padding 1, dilation 2, groups 2, no bias%)',
      tostring(nn.ConvTranspose1d(4, 4, 5, { padding = 1, output_padding = 1, dilation = 2, groups = 2, bias = false })))
  end)
  it('errors', function()
    local x = lunet.randn(2, 3, 5)
    assert.matches('nn.ConvTranspose1d: expected %(in_channels', err(nn.ConvTranspose1d, 3, 4))
    assert.matches('nn.ConvTranspose1d: output_padding 2 must be smaller than stride 2 or dilation 1',
      err(nn.ConvTranspose1d, 3, 4, 3, { stride = 2, output_padding = 2 }))
    assert.matches('nn.ConvTranspose1d: in_channels 3 and out_channels 4 must be divisible by groups 2',
      err(nn.ConvTranspose1d, 3, 4, 3, { groups = 2 }))
    assert.matches("unknown option 'strides'", err(nn.ConvTranspose1d, 3, 4, 3, { strides = 2 }))
    assert.matches('nn.ConvTranspose1d: output_size 9 must be between 11 and 12',
      err(nn.ConvTranspose1d(3, 4, 3, 2), x, { 9 }))
    assert.matches('conv_transpose1d: input must be 2%-d %(C, L%) or 3%-d', err(F.conv_transpose1d, lunet.randn(3), lunet.randn(3, 2, 2)))
    assert.matches('conv_transpose1d: input {2,3,5} has 3 channels, weight {4,2,2} expects 4',
      err(F.conv_transpose1d, x, lunet.randn(4, 2, 2)))
    assert.matches('conv_transpose1d: bias has 3 elements, the output 2 channels',
      err(F.conv_transpose1d, x, lunet.randn(3, 2, 2), lunet.randn(3)))
    assert.matches('conv_transpose1d: input {2,3,5} gives an empty output',
      err(F.conv_transpose1d, x, lunet.randn(3, 2, 2), nil, { padding = 5 }))
    assert.matches('conv_transpose1d: output_padding must be smaller than stride or dilation',
      err(F.conv_transpose1d, x, lunet.randn(3, 2, 2), nil, 1, 0, 1))
    assert.matches("conv_transpose1d: unknown option 'pad'", err(F.conv_transpose1d, x, lunet.randn(3, 2, 2), nil, { pad = 1 }))
    assert.matches('conv_transpose1d: input must be a floating%-point',
      err(F.conv_transpose1d, lunet.zeros(2, 3, 5, { dtype = 'int64' }), lunet.randn(3, 2, 2)))
  end)
end)

describe('nn.ConvTranspose3d', function()
  it('matches torch: stride, padding, output_padding (past the padding, at or above the stride), dilation, groups, unbatched',
    function() fixture_cases('conv_transpose3d') end)
  it('is the adjoint of conv3d with the same weight: <ct(x), y> = <x, conv3d(y)>', function()
    local x, w, y = lunet.randn(2, 4, 3, 3, 3):double(), lunet.randn(4, 3, 2, 3, 2):double(), nil
    local o = { stride = { 2, 1, 2 }, padding = { 1, 1, 0 }, groups = 2 }
    local z = F.conv_transpose3d(x, w, nil, o)
    y = lunet.randn(table.unpack(z:size())):double()
    local lhs = (z * y):sum():item()
    local rhs = (x * F.conv3d(y, w, nil, o)):sum():item()
    assert.is_true(math.abs(lhs - rhs) < 1e-9 * math.max(1, math.abs(lhs)), lhs .. ' vs ' .. rhs)
  end)
  it('float64 finite differences; printing', function()
    local function f(x, w, b)
      return F.conv_transpose3d(x, w, b, { stride = { 2, 1, 1 }, padding = 1, output_padding = { 1, 0, 0 }, groups = 2 })
    end
    assert.is_true(gradcheck(f, { d(1, 2, 2, 3, 2), d(2, 1, 3, 2, 2), d(2) }))
    assert.same({ 0, 4, 5, 3, 3 }, F.conv_transpose3d(lunet.randn(0, 2, 3, 2, 2), lunet.randn(2, 4, 3, 2, 2)):size())
    assert.same({ 0, 2, 6 }, F.conv_transpose1d(lunet.randn(0, 3, 5), lunet.randn(3, 2, 2)):size())
    local xt = lunet.randn(1, 2, 3, 3, 2):transpose(3, 5)
    local wt = lunet.randn(2, 2, 2, 2, 2)
    assert.is_true(sfx.maxdiff(F.conv_transpose3d(xt, wt, nil, 2), F.conv_transpose3d(xt:contiguous(), wt, nil, 2)) < 1e-6)
    assert.equal('nn.ConvTranspose3d(2 -> 4, 3x3x3, stride 2, pad 1)\n' .. (2 * 4 * 27 + 4) .. ' parameters',
      tostring(nn.ConvTranspose3d(2, 4, 3, 2, 1)))
    assert.matches('^nn.ConvTranspose3d%(4 %-> 2, 1x2x3, output_padding 0x1x0, dilation 1x2x1, groups 2, no bias%)',
      tostring(nn.ConvTranspose3d(4, 2, { 1, 2, 3 }, { output_padding = { 0, 1, 0 }, dilation = { 1, 2, 1 }, groups = 2, bias = false })))
  end)
  it('errors', function()
    local x = lunet.randn(1, 2, 3, 3, 3)
    assert.matches('nn.ConvTranspose3d: kernel_size must be an integer >= 1 or {d, h, w}', err(nn.ConvTranspose3d, 2, 2, { 2, 2 }))
    assert.matches('nn.ConvTranspose3d: output_padding 1 must be smaller than stride 1 or dilation 1',
      err(nn.ConvTranspose3d, 2, 2, 2, { output_padding = 1 }))
    assert.matches('conv_transpose3d: input must be 4%-d %(C, D, H, W%) or 5%-d', err(F.conv_transpose3d, lunet.randn(2, 3, 3), lunet.randn(2, 1, 1, 1, 1)))
    assert.matches('conv_transpose3d: weight must be 5%-d', err(F.conv_transpose3d, x, lunet.randn(2, 1, 1, 1)))
    assert.matches('conv_transpose3d: input channels 2 are not divisible by groups 4',
      err(F.conv_transpose3d, x, lunet.randn(2, 1, 1, 1, 1), nil, { groups = 4 }))
    assert.matches('conv_transpose3d: input {1,2,3,3,3} gives an empty output',
      err(F.conv_transpose3d, x, lunet.randn(2, 1, 1, 1, 1), nil, { padding = { 0, 2, 0 } }))
  end)
end)

describe('nn.AdaptiveMaxPool3d', function()
  it('matches torch: uneven, even and growing bins, None (false) entries, unbatched; 1-based indices in each volume',
    function() fixture_cases('adaptive_max_pool3d') end)
  it('float64 finite differences; the output alone by default; printing', function()
    assert.is_true(gradcheck(function(x) return F.adaptive_max_pool3d(x, { 2, 3, 2 }) end, { d(1, 2, 3, 5, 4) }))
    local y, i = nn.AdaptiveMaxPool3d(2)(lunet.randn(2, 3, 4, 4, 4))
    assert.same({ 2, 3, 2, 2, 2 }, y:size()); assert.is_nil(i)
    assert.equal('nn.AdaptiveMaxPool3d(2x2x2)\n0 parameters', tostring(nn.AdaptiveMaxPool3d(2)))
    assert.equal('nn.AdaptiveMaxPool3d(3xNonex4, return_indices)\n0 parameters',
      tostring(nn.AdaptiveMaxPool3d({ output_size = { 3, false, 4 }, return_indices = true })))
  end)
  it('errors', function()
    assert.matches('nn.AdaptiveMaxPool3d: output_size must be an integer >= 1 or {d, h, w}', err(nn.AdaptiveMaxPool3d, { 2, 2 }))
    assert.matches('nn.AdaptiveMaxPool3d: output_size must be', err(nn.AdaptiveMaxPool3d, 0))
    assert.matches("unknown option 'indices'", err(nn.AdaptiveMaxPool3d, 2, { indices = true }))
    assert.matches('adaptive_max_pool3d: input must be 4%-d %(C, D, H, W%) or 5%-d', err(F.adaptive_max_pool3d, lunet.randn(3, 4, 4), 2))
    assert.same({ 0, 2, 1, 1, 1 }, F.adaptive_max_pool3d(lunet.randn(0, 2, 3, 3, 3), 1):size())
    assert.matches('adaptive_max_pool3d: input {1,2,0,3,3} is empty', err(F.adaptive_max_pool3d, lunet.randn(1, 2, 0, 3, 3), 2))
    assert.matches('adaptive_max_pool3d: return_indices must be a boolean', err(F.adaptive_max_pool3d, lunet.randn(2, 3, 3, 3), 2, 1))
    assert.matches('adaptive_max_pool3d: expected output_size', err(F.adaptive_max_pool3d, lunet.randn(2, 3, 3, 3)))
  end)
end)

describe('nn.LPPool1d, nn.LPPool2d', function()
  it('match torch (1-d): norm types 1 (signed input), 2, 3 and 1.5, stride, ceil_mode, unbatched',
    function() fixture_cases('lp_pool1d') end)
  it('match torch (2-d): norm types 1, 2, 3 and 1.5, rectangular kernels and strides, ceil_mode, unbatched',
    function() fixture_cases('lp_pool2d') end)
  it('float64 finite differences; positional forms; printing', function()
    local function pos(...) return (lunet.rand(...):double() + 0.2):requires_grad_() end
    assert.is_true(gradcheck(function(x) return F.lp_pool2d(x, 3, 2, 1, true) end, { pos(1, 2, 4, 5) }))
    assert.is_true(gradcheck(function(x) return F.lp_pool1d(x, 2, 3, 2) end, { pos(2, 7) }))
    local x = lunet.rand(2, 3, 6, 7)
    assert.is_true(sfx.maxdiff(nn.LPPool2d(2, 3, 2, true)(x), F.lp_pool2d(x, 2, 3, { stride = 2, ceil_mode = true })) == 0)
    assert.equal('nn.LPPool2d(norm_type 2, 3, stride 2, ceil)\n0 parameters', tostring(nn.LPPool2d(2, 3, 2, true)))
    assert.equal('nn.LPPool1d(norm_type 1.5, 4)\n0 parameters', tostring(nn.LPPool1d(1.5, 4)))
    assert.equal('nn.LPPool2d(norm_type 2, 2x3, stride 1x2)\n0 parameters', tostring(nn.LPPool2d(2, { 2, 3 }, { 1, 2 })))
  end)
  it('errors', function()
    assert.matches('nn.LPPool2d: norm_type must be a finite nonzero number, got 0', err(nn.LPPool2d, 0, 2))
    assert.matches('nn.LPPool1d: expected %(norm_type, kernel_size', err(nn.LPPool1d, 2))
    assert.matches('nn.LPPool1d: kernel_size must be an integer >= 1 %(or {n}%)', err(nn.LPPool1d, 2, { 2, 2 }))
    assert.matches('nn.LPPool2d: stride must be an integer >= 1 or {h, w}', err(nn.LPPool2d, 2, 2, 0))
    assert.matches("nn.LPPool2d: unknown option 'padding'", err(nn.LPPool2d, 2, 2, { padding = 1 }))
    assert.matches('lp_pool2d: input must be 3%-d %(C, H, W%) or 4%-d', err(F.lp_pool2d, lunet.randn(4, 4), 2, 2))
    assert.matches('lp_pool2d: norm_type must be a finite nonzero number', err(F.lp_pool2d, lunet.randn(1, 4, 4), 'x', 2))
    assert.matches('lp_pool1d: input must be 2%-d %(C, L%) or 3%-d', err(F.lp_pool1d, lunet.randn(4), 2, 2))
    assert.matches('lp_pool1d: expected kernel_size', err(F.lp_pool1d, lunet.randn(2, 4), 2))
  end)
end)

describe('nn.Dropout1d, nn.Dropout3d', function()
  -- every slice of y over the dims past `keep` is constant, 0 or 1/(1-p); returns the kept share
  local function whole_channels(y, keep, p)
    local rows = y:reshape(keep, -1)
    local lo, hi = rows:min(2), rows:max(2)
    assert.is_true(sfx.maxdiff(lo, hi) == 0, 'a channel is not all kept or all dropped')
    local scale = 1 / (1 - p)
    local kept = lo:gt(0):sum():item()
    assert.is_true(lo:eq(0):sum():item() + lo:eq(scale):sum():item() == keep, 'values other than 0 and 1/(1-p)')
    return kept / keep
  end
  it('drop whole channels of (N, C, L), (C, L), (N, C, D, H, W), (C, D, H, W), scaled by 1/(1-p)', function()
    lunet.manual_seed(5)
    local share = whole_channels(F.dropout1d(lunet.ones(40, 50, 6), 0.3), 2000, 0.3)
    assert.is_true(math.abs(share - 0.7) < 0.04, tostring(share))
    whole_channels(F.dropout1d(lunet.ones(30, 7), 0.5), 30, 0.5)
    share = whole_channels(nn.Dropout3d(0.6)(lunet.ones(20, 50, 2, 3, 2)), 1000, 0.6)
    assert.is_true(math.abs(share - 0.4) < 0.05, tostring(share))
    whole_channels(F.dropout3d(lunet.ones(40, 2, 2, 3), 0.5), 40, 0.5)
    -- torch 1.13 only warns for another rank, and drops dim 1's slices
    whole_channels(F.dropout3d(lunet.ones(40, 3, 2), 0.5), 40, 0.5)
    whole_channels(nn.Dropout1d(0.5)(lunet.ones(8, 9, 4):transpose(2, 3)):contiguous(), 32, 0.5)   -- (a view)
  end)
  it('p = 0 and eval give x itself, p = 1 zeros; the gradient is the mask; in place', function()
    local x = lunet.randn(2, 3, 4)
    assert.equal(x, F.dropout1d(x, 0)); assert.equal(x, F.dropout1d(x, 0.5, false))
    local m = nn.Dropout3d(0.5); m:eval()
    local x5 = lunet.randn(2, 3, 2, 2, 2)
    assert.equal(x5, m(x5))
    assert.equal(0, F.dropout1d(x, 1):abs():sum():item())
    assert.equal(0, F.dropout3d(x5, 1):abs():sum():item())
    local xg = lunet.randn(4, 5, 6):requires_grad_()
    local y = F.dropout1d(xg, 0.4)
    y:sum():backward()
    assert.is_true(sfx.maxdiff(xg.grad * xg, y) < 1e-6)
    local xi = lunet.ones(6, 5, 3)
    assert.equal(xi, F.dropout1d(xi, 0.5, true, true))
    whole_channels(xi, 30, 0.5)
    assert.equal('nn.Dropout1d(p 0.3, inplace)\n0 parameters', tostring(nn.Dropout1d(0.3, true)))
    assert.equal('nn.Dropout3d(p 0.5)\n0 parameters', tostring(nn.Dropout3d()))
  end)
  it('errors', function()
    assert.matches('dropout1d: input must be 2%-d %(C, L%) or 3%-d %(N, C, L%), got 4%-d', err(F.dropout1d, lunet.randn(1, 2, 3, 4)))
    assert.matches('dropout1d: input must be 2%-d', err(nn.Dropout1d(), lunet.randn(3)))
    assert.matches('dropout1d: p must be in %[0, 1%], got 1.5', err(F.dropout1d, lunet.randn(2, 3), 1.5))
    assert.matches('dropout3d: feature dropout needs at least 2 dims', err(F.dropout3d, lunet.tensor(1.0), 0.5))
    assert.matches('nn.Dropout1d: p must be a number in %[0, 1%]', err(nn.Dropout1d, -0.1))
    assert.matches("nn.Dropout3d: unknown option 'q'", err(nn.Dropout3d, { q = 1 }))
    assert.matches("dropout3d: unknown option 'train'", err(F.dropout3d, lunet.randn(2, 2, 2, 2), { train = true }))
  end)
end)

describe('nn.AlphaDropout, nn.FeatureAlphaDropout', function()
  it("take torch's two values on ones (kept a*(1 + alpha'p), dropped -a*alpha'(1-p)), p = 0.2 and 0.7", function()
    lunet.manual_seed(7)
    for _, p in ipairs({ 0.2, 0.7 }) do
      for _, v in ipairs({ { 'alpha', F.alpha_dropout(lunet.ones(4000, { dtype = 'float64' }), p, true), 4000 },
        { 'feature_alpha', F.feature_alpha_dropout(lunet.ones(400, 10, 2, { dtype = 'float64' }), p, true), 4000 } }) do
        local want = fx[('%s_%d.values'):format(v[1], math.floor(p * 10 + 0.5))]
        local kept, dropped = want[1]:item(), want[2]:item()
        local y = v[2]
        local nk, nd = y:eq(kept):sum():item(), y:eq(dropped):sum():item()
        assert.equal(y:numel(), nk + nd, v[1] .. ' values')
        assert.is_true(math.abs(nd / y:numel() - p) < 0.05, v[1] .. ' dropped share ' .. nd / y:numel())
      end
    end
  end)
  it('keep the mean and variance of SELU-normalised input (mean 0, variance 1)', function()
    lunet.manual_seed(8)
    for _, p in ipairs({ 0.1, 0.5, 0.8 }) do
      local x = lunet.randn(400000, { dtype = 'float64' })
      local y = nn.AlphaDropout(p)(x)
      assert.is_true(math.abs(y:mean():item()) < 0.01 and math.abs(y:var():item() - 1) < 0.02,
        ('p %g: mean %g, var %g'):format(p, y:mean():item(), y:var():item()))
      y = nn.FeatureAlphaDropout(p)(lunet.randn(200, 400, 5, { dtype = 'float64' }))
      assert.is_true(math.abs(y:mean():item()) < 0.02 and math.abs(y:var():item() - 1) < 0.04,
        ('feature p %g: mean %g, var %g'):format(p, y:mean():item(), y:var():item()))
    end
  end)
  it('whole channels for the feature form; eval, p = 0 the identity, p = 1 zeros; gradient a*mask; in place', function()
    local y = F.feature_alpha_dropout(lunet.ones(30, 40, 3, 2), 0.5, true):reshape(1200, 6)
    assert.is_true(sfx.maxdiff(y:min(2), y:max(2)) == 0)
    local x = lunet.randn(3, 4)
    assert.equal(x, F.alpha_dropout(x, 0.5))   -- (training defaults to false, as torch's)
    assert.equal(x, F.feature_alpha_dropout(x, 0.5))
    assert.equal(x, F.alpha_dropout(x, 0, true))
    local m = nn.AlphaDropout(0.5); m:eval()
    assert.equal(x, m(x))
    assert.equal(0, F.alpha_dropout(x, 1, true):abs():sum():item())
    assert.equal(0, F.feature_alpha_dropout(lunet.randn(2, 3, 4), 1, true):abs():sum():item())
    local p, al = 0.3, 1.7580993408473766
    local a = 1 / math.sqrt((al * al * p + 1) * (1 - p))
    local xg = lunet.randn(50, 20, { dtype = 'float64' }):requires_grad_()
    local yg = F.alpha_dropout(xg, p, true)
    yg:sum():backward()
    local kept = xg.grad:gt(0)
    assert.equal(xg.grad:numel(), kept:sum():item() + xg.grad:eq(0):sum():item())
    assert.is_true(sfx.maxdiff(xg.grad:masked_select(kept), lunet.full({ kept:sum():item() }, a, { dtype = 'float64' })) < 1e-12)
    assert.is_true(sfx.maxdiff(yg:detach(), (xg:detach() * a + al * a * p):where(kept, -al * a * (1 - p))) < 1e-12)
    local xi = lunet.ones(5, 6)
    assert.equal(xi, F.alpha_dropout(xi, 0.5, true, true))
    assert.equal('nn.AlphaDropout(p 0.2)\n0 parameters', tostring(nn.AlphaDropout(0.2)))
    assert.equal('nn.FeatureAlphaDropout(p 0.5, inplace)\n0 parameters', tostring(nn.FeatureAlphaDropout { inplace = true }))
  end)
  it('errors', function()
    assert.matches('feature_alpha_dropout: feature dropout needs at least 2 dims', err(F.feature_alpha_dropout, lunet.randn(5), 0.5, true))
    assert.matches('alpha_dropout: p must be in %[0, 1%]', err(F.alpha_dropout, lunet.randn(5), -1))
    assert.matches('nn.AlphaDropout: p must be a number in %[0, 1%]', err(nn.AlphaDropout, 2))
    assert.matches("nn.FeatureAlphaDropout: unknown option 'rate'", err(nn.FeatureAlphaDropout, { rate = 0.1 }))
    local leaf = lunet.randn(3, 4):requires_grad_()
    assert.matches('alpha_dropout: a leaf tensor that requires grad cannot be changed in place', err(F.alpha_dropout, leaf, 0.5, true, true))
  end)
end)
