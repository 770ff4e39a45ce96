-- nn.AdaptiveMaxPool2d, PixelShuffle, PixelUnshuffle, Unflatten and
-- InstanceNorm2d (and their functional forms) against PyTorch 1.13:
-- outputs, 1-based indices and float64 input gradients from
-- spec/fixtures/nn_more_layers.safetensors (tools/gen_nn_more_layers_fixtures.py)
-- in float32 and float64, 3-d and 4-d inputs, transposed views; float64
-- finite differences; printing; the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local fx, cases = fixtures.load_fixture('nn_more_layers')

local function get(case, k) return fx[case.name .. '.' .. k] end

local err = fixtures.err_of

-- the case's module (functional false) or functional form on x
local function run(case, x, functional)
  local a, op = case.args, case.op
  if op == 'adaptive_max_pool2d' then
    if functional then return F.adaptive_max_pool2d(x, a.output_size, true) end
    return nn.AdaptiveMaxPool2d(a.output_size, { return_indices = true })(x)
  elseif op == 'pixel_shuffle' then
    return functional and F.pixel_shuffle(x, a.factor) or nn.PixelShuffle(a.factor)(x)
  elseif op == 'pixel_unshuffle' then
    return functional and F.pixel_unshuffle(x, a.factor) or nn.PixelUnshuffle(a.factor)(x)
  elseif op == 'unflatten' then
    return functional and F.unflatten(x, a.dim, a.sizes) or nn.Unflatten(a.dim, a.sizes)(x)
  end
  error('unknown op ' .. op)
end

local function check_case(case, dtype, functional)
  local x = get(case, 'x'):to(dtype):clone():requires_grad_()
  local xin = case.view == 't' and x:transpose(3, 4) or x
  if case.view then assert.is_false(xin:is_contiguous()) end
  local out, idx = run(case, xin, functional)
  local what = ('%s %s%s'):format(case.name, dtype, functional and ' (F)' or '')
  assert.equal(dtype, out.dtype, what)
  assert.tensor_near(out, get(case, 'out'), dtype == 'float32' and 1e-6 or 1e-12)
  if case.op == 'adaptive_max_pool2d' then
    assert.equal('int64', idx.dtype, what)
    assert.same(get(case, 'indices'):totable(), idx:totable(), what .. ' indices')
  end
  ;(out * get(case, 'dout'):to(dtype)):sum():backward()
  assert.tensor_near(x.grad, get(case, 'dx'), dtype == 'float32' and 1e-5 or 1e-12)
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
  assert.is_true(n >= 2)
end

describe('nn.AdaptiveMaxPool2d', function()
  it('matches torch: uneven, even and growing bins, a kept (false) size, ties, NaNs, 3-d, a view', function()
    fixture_cases('adaptive_max_pool2d')
  end)
  it('float64 finite differences, batched and unbatched', function()
    local function f(x) return F.adaptive_max_pool2d(x, { 3, 2 }) end
    assert.is_true(gradcheck(f, { lunet.randn(2, 2, 5, 7):double():requires_grad_() }))
    assert.is_true(gradcheck(f, { lunet.randn(3, 4, 3):double():requires_grad_() }))
  end)
  it("max_pool2d's indices are 1-based too, as adaptive_max_pool2d's where their windows agree", function()
    -- (torch 1.13: max_pool2d(arange(16).view(1, 1, 4, 4), 2, return_indices=True)[1] = [[5, 7], [13, 15]])
    local x = lunet.arange(16):float():reshape({ 1, 1, 4, 4 })
    local _, i = F.max_pool2d(x, 2, { return_indices = true })
    assert.equal('int64', i.dtype)
    assert.same({ { { { 6, 8 }, { 14, 16 } } } }, i:totable())
    local _, im = nn.MaxPool2d(2, { return_indices = true })(x)
    assert.same(i:totable(), im:totable())
    local r = lunet.randn(2, 3, 8, 8)
    local _, ip = F.max_pool2d(r, 2, { return_indices = true })
    local _, ia = F.adaptive_max_pool2d(r, 4, true)
    assert.same(ia:totable(), ip:totable())
  end)
  it('returns the output alone by default; options and positional forms; printing', function()
    local x = lunet.randn(1, 2, 5, 5)
    local y, i = nn.AdaptiveMaxPool2d(2)(x)
    assert.same({ 1, 2, 2, 2 }, y:size()); assert.is_nil(i)
    assert.is_nil(select(2, F.adaptive_max_pool2d(x, 2)))
    assert.equal(2, select('#', nn.AdaptiveMaxPool2d(2, true)(x)))
    assert.equal(2, select('#', nn.AdaptiveMaxPool2d{ output_size = 2, return_indices = true }(x)))
    assert.same({ 1, 2, 5, 3 }, nn.AdaptiveMaxPool2d({ false, 3 })(x):size())
    assert.same({ 1, 2, 4, 5 }, nn.AdaptiveMaxPool2d({ nil, 5 })(lunet.randn(1, 2, 4, 9)):size())
    assert.equal('nn.AdaptiveMaxPool2d(5x7)\n0 parameters', tostring(nn.AdaptiveMaxPool2d({ 5, 7 })))
    assert.equal('nn.AdaptiveMaxPool2d(Nonex7, return_indices)\n0 parameters',
      tostring(nn.AdaptiveMaxPool2d({ false, 7 }, true)))
    assert.equal('nn.AdaptiveMaxPool2d(3x3)\n0 parameters', tostring(nn.AdaptiveMaxPool2d(3)))
  end)
  it('errors', function()
    local x = lunet.randn(1, 2, 5, 5)
    assert.matches('AdaptiveMaxPool2d: output_size must be an integer >= 1', err(nn.AdaptiveMaxPool2d, 0))
    assert.matches('output_size must be', err(nn.AdaptiveMaxPool2d, { 2.5, 2 }))
    assert.matches('output_size must be', err(nn.AdaptiveMaxPool2d, { 5 }))
    assert.matches('output_size must be', err(nn.AdaptiveMaxPool2d, { 1, 2, 3 }))
    assert.matches('output_size must be', err(nn.AdaptiveMaxPool2d))
    assert.matches("unknown option 'return_index'", err(nn.AdaptiveMaxPool2d, 2, { return_index = true }))
    assert.matches('adaptive_max_pool2d: output_size must be', err(F.adaptive_max_pool2d, x, -1))
    assert.matches('adaptive_max_pool2d: output_size must be', err(F.adaptive_max_pool2d, x, { 2 }))
    assert.matches('adaptive_max_pool2d: output_size must be', err(F.adaptive_max_pool2d, x, 'a'))
    assert.matches('must be 3%-d %(C, H, W%) or 4%-d', err(F.adaptive_max_pool2d, lunet.randn(5, 5), 2))
    assert.matches('must be 3%-d %(C, H, W%) or 4%-d', err(nn.AdaptiveMaxPool2d(2), lunet.randn(1, 1, 1, 5, 5)))
    assert.matches('is empty', err(F.adaptive_max_pool2d, lunet.randn(1, 2, 0, 5), 2))
    assert.matches('floating%-point', err(F.adaptive_max_pool2d, lunet.zeros(1, 2, 3, 3, { dtype = 'int64' }), 2))
    assert.matches('return_indices must be a boolean', err(F.adaptive_max_pool2d, x, 2, 1))
  end)
end)

describe('nn.PixelShuffle and nn.PixelUnshuffle', function()
  it('match torch on 3-d, 4-d, 5-d inputs and views', function()
    fixture_cases('pixel_shuffle')
    fixture_cases('pixel_unshuffle')
  end)
  it('are inverses; float64 finite differences; printing', function()
    local x = lunet.randn(2, 3, 4, 6)
    assert.tensor_near(F.pixel_shuffle(F.pixel_unshuffle(x, 2), 2), x, 0)
    assert.is_true(gradcheck(function(t) return F.pixel_shuffle(t, 2) end, { lunet.randn(2, 8, 2, 3):double():requires_grad_() }))
    assert.is_true(gradcheck(function(t) return F.pixel_unshuffle(t, 2) end, { lunet.randn(2, 4, 6):double():requires_grad_() }))
    assert.equal('nn.PixelShuffle(upscale_factor 3)\n0 parameters', tostring(nn.PixelShuffle(3)))
    assert.equal('nn.PixelUnshuffle(downscale_factor 2)\n0 parameters', tostring(nn.PixelUnshuffle{ downscale_factor = 2 }))
  end)
  it('errors', function()
    assert.matches('nn.PixelShuffle: upscale_factor must be an integer >= 1, got 0', err(nn.PixelShuffle, 0))
    assert.matches('nn.PixelShuffle: upscale_factor must be', err(nn.PixelShuffle))
    assert.matches("unknown option 'scale'", err(nn.PixelShuffle, { scale = 2 }))
    assert.matches('pixel_shuffle: input has 5 channels %(dim 2%), not divisible by upscale_factor%^2 = 4',
      err(nn.PixelShuffle(2), lunet.randn(1, 5, 2, 2)))
    assert.matches('pixel_shuffle: input must have at least 3 dims', err(F.pixel_shuffle, lunet.randn(4, 4), 2))
    assert.matches('pixel_unshuffle: input height 5 and width 4 must be divisible by downscale_factor 2',
      err(nn.PixelUnshuffle(2), lunet.randn(1, 5, 4)))
    assert.matches('pixel_unshuffle: downscale_factor must be an integer >= 1', err(F.pixel_unshuffle, lunet.randn(1, 4, 4), 1.5))
  end)
end)

describe('nn.Unflatten', function()
  it('matches torch, 1-based and negative dims', function()
    fixture_cases('unflatten')
  end)
  it('sizes with -1, nn.Flatten undone, the options form, printing', function()
    local x = lunet.randn(2, 3, 4, 5)
    local y = nn.Flatten()(x)
    assert.tensor_near(nn.Unflatten(2, { 3, 4, 5 })(y), x, 0)
    assert.same({ 2, 3, 2, 10, 1 }, nn.Unflatten(-2, { 2, -1 })(x:view(2, 3, 20, 1)):size())
    assert.same({ 2, 1, 3, 4, 5 }, nn.Unflatten{ dim = 1, unflattened_size = { 2, 1 } }(x):size())
    assert.equal('nn.Unflatten(dim 2, {3, 4})\n0 parameters', tostring(nn.Unflatten(2, { 3, 4 })))
  end)
  it('errors', function()
    assert.matches('nn.Unflatten: dim must be a non%-zero integer', err(nn.Unflatten, 0, { 2 }))
    assert.matches('nn.Unflatten: unflattened_size must be a non%-empty list', err(nn.Unflatten, 1, {}))
    assert.matches('at most one %-1, got {%-1, %-1}', err(nn.Unflatten, 1, { -1, -1 }))
    assert.matches('got {2, x}', err(nn.Unflatten, 1, { 2, 'x' }))
    assert.matches("unknown option 'sizes'", err(nn.Unflatten, { dim = 1, sizes = { 2 } }))
    assert.matches('unflatten: sizes {2, 4} do not multiply up to the size 6 of dim 2',
      err(nn.Unflatten(2, { 2, 4 }), lunet.randn(1, 6)))
    assert.matches('unflatten: sizes {4, %-1} do not multiply up to the size 6', err(F.unflatten, lunet.randn(6), 1, { 4, -1 }))
    assert.matches('unflatten: dim 3 out of range for a 2%-d tensor', err(nn.Unflatten(3, { 1 }), lunet.randn(2, 2)))
  end)
end)

describe('nn.InstanceNorm2d', function()
  -- the case's module in dtype, its affine parameters from the fixture
  local function module_of(case, dtype)
    local a = case.args
    local m = nn.InstanceNorm2d(get(case, 'x'):size(-3), { eps = a.eps, momentum = a.momentum, affine = a.affine,
      track_running_stats = a.track_running_stats, dtype = dtype })
    if a.affine then
      lunet.no_grad(function() m.weight:copy_(get(case, 'weight')); m.bias:copy_(get(case, 'bias')) end)
    end
    return m
  end
  it('matches torch: plain, affine, 3-d; tracked statistics in training, then eval', function()
    local n = 0
    for _, case in ipairs(cases) do
      if case.op == 'instance_norm' then
        n = n + 1
        for _, dtype in ipairs({ 'float32', 'float64' }) do
          local tol = dtype == 'float32' and 1e-5 or 1e-12
          local m = module_of(case, dtype)
          local x = get(case, 'x'):to(dtype):clone():requires_grad_()
          local out = m(x)
          assert.tensor_near(out, get(case, 'out'), tol)
          ;(out * get(case, 'dout'):to(dtype)):sum():backward()
          assert.tensor_near(x.grad, get(case, 'dx'), dtype == 'float32' and 1e-4 or 1e-10)
          if case.args.track_running_stats then
            assert.tensor_near(m.running_mean, get(case, 'running_mean'), tol)
            assert.tensor_near(m.running_var, get(case, 'running_var'), tol)
            assert.equal(0, m.num_batches_tracked:item())   -- (torch's InstanceNorm never counts)
            m:eval()
            assert.tensor_near(m(get(case, 'x2'):to(dtype)), get(case, 'out2'), tol)
          end
        end
      end
    end
    assert.equal(4, n)
  end)
  it('defaults, state_dict names as torch, float64 finite differences, printing', function()
    local m = nn.InstanceNorm2d(3)
    assert.equal(0, #m:parameters())
    assert.same({}, (function() local t = {} for k in pairs(m:state_dict()) do t[#t + 1] = k end return t end)())
    local mt = nn.InstanceNorm2d(3, { affine = true, track_running_stats = true })
    local keys = {}
    for k in pairs(mt:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.same({ 'bias', 'num_batches_tracked', 'running_mean', 'running_var', 'weight' }, keys)
    -- eval without tracking still normalises with the instance's own statistics
    m:eval()
    local y = m(lunet.randn(2, 3, 4, 4) * 3 + 2)
    assert.is_true(y:reshape(6, 16):mean(2):abs():max():item() < 1e-5)
    local function f(x, w, b) return F.instance_norm(x, nil, nil, w, b) end
    assert.is_true(gradcheck(f, { lunet.randn(2, 3, 2, 3):double():requires_grad_(),
      (lunet.randn(3) + 1):double():requires_grad_(), lunet.randn(3):double():requires_grad_() }))
    assert.equal('nn.InstanceNorm2d(3)\n0 parameters', tostring(m))
    assert.equal('nn.InstanceNorm2d(3, eps 0.001, affine, running stats)\n6 parameters',
      tostring(nn.InstanceNorm2d(3, 1e-3, 0.1, true, true)))
  end)
  it('errors', function()
    assert.matches('nn.InstanceNorm2d: num_features must be an integer >= 1', err(nn.InstanceNorm2d, 0))
    assert.matches("unknown option 'afine'", err(nn.InstanceNorm2d, 3, { afine = true }))
    assert.matches('momentum must be in %[0, 1%]', err(nn.InstanceNorm2d, 3, { momentum = 2 }))
    assert.matches('input has 4 channels, expected 3', err(nn.InstanceNorm2d(3), lunet.randn(2, 4, 3, 3)))
    assert.matches('expected a 3%-d %(C, H, W%) or 4%-d', err(nn.InstanceNorm2d(3), lunet.randn(2, 3)))
    assert.matches('more than 1 spatial element', err(nn.InstanceNorm2d(3), lunet.randn(2, 3, 1, 1)))
    assert.matches('instance_norm: weight must have 3 entries', err(F.instance_norm, lunet.randn(2, 3, 4), nil, nil, lunet.ones(4)))
    assert.matches('instance_norm: input must be %(N, C, ...%)', err(F.instance_norm, lunet.randn(2, 3)))
  end)
end)
