-- The torch.nn names lunet lacked: nn.MaxUnpool1d/2d/3d, nn.FractionalMaxPool2d/3d,
-- nn.RReLU, nn.Softmax2d, nn.ConstantPad3d / ReflectionPad3d / ReplicationPad3d,
-- nn.CrossMapLRN2d, nn.NLLLoss2d, nn.AdaptiveLogSoftmaxWithLoss and F.gumbel_softmax,
-- F.pdist, the *_with_indices and upsample aliases: against PyTorch 1.13
-- (spec/fixtures/nn_gaps.safetensors, tools/gen_nn_gaps_fixtures.py) in float32
-- and float64 with float64 gradients, the random ones by their statistics,
-- float64 finite differences, and the errors.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local fx = require 'support.fixtures'
local nn = lunet.nn
local F = nn.functional

local T, cases = fx.load_fixture('nn_gaps')
local function get(case, k) return T[case.name .. '.' .. k] end
local function d(...) return lunet.randn(...):double():requires_grad_() end
local function null(v) if v == lunet.json_null or type(v) == 'userdata' then return nil end return v end

-- the case's op in lunet on x (and its other inputs)
local function run(case, x, dtype)
  local o, op = case.opts, case.op
  if op:match('^max_unpool') then
    local idx = get(case, 'idx')
    return F[op](x, idx, o.kernel_size, { stride = null(o.stride), padding = o.padding, output_size = null(o.output_size) })
  elseif op:match('^fractional') then
    return F[op](x, o.kernel_size, { output_size = null(o.output_size), output_ratio = null(o.output_ratio),
      _random_samples = get(case, 'u'):to(dtype) })
  elseif op == 'rrelu' then return F.rrelu(x, o.lower, o.upper)
  elseif op == 'pdist' then return F.pdist(x, o.p == 'inf' and math.huge or o.p)
  elseif op == 'pad3d' then
    local M = { constant = nn.ConstantPad3d, reflect = nn.ReflectionPad3d, replicate = nn.ReplicationPad3d }
    return M[o.mode](o.padding, o.mode == 'constant' and 0.5 or nil)(x)
  elseif op == 'softmax2d' then return nn.Softmax2d()(x)
  elseif op == 'upsample_bilinear' then return F.upsample_bilinear(x, o.size)
  elseif op == 'upsample_nearest' then return F.upsample_nearest(x, { scale_factor = o.scale_factor })
  elseif op == 'upsample' then return F.upsample(x, o.size, nil, o.mode)
  end
  error('unknown op ' .. op)
end

describe('nn gaps against PyTorch 1.13', function()
  for _, case in ipairs(cases) do
    if get(case, 'dout') and case.op ~= 'asm' then
      for _, dtype in ipairs({ 'float32', 'float64' }) do
        it(case.name .. ' ' .. dtype, function()
          local tol = dtype == 'float32' and 2e-5 or 1e-12
          local x = get(case, 'x'):to(dtype):clone():requires_grad_()
          local out = run(case, x, dtype)
          assert.equal(dtype, out.dtype)
          assert.same(get(case, 'out'):size(), out:size())
          assert.is_true(fx.maxdiff(out, get(case, 'out')) <= tol * math.max(1, get(case, 'out'):abs():max():item()),
            case.name .. ' out ' .. fx.maxdiff(out, get(case, 'out')))
          ;(out * get(case, 'dout'):to(dtype)):sum():backward()
          assert.is_true(fx.maxdiff(x.grad, get(case, 'dx')) <= tol * 10, case.name .. ' dx ' .. fx.maxdiff(x.grad, get(case, 'dx')))
          if get(case, 'indices') then
            local o = case.opts
            local _, idx = F[case.op](x, o.kernel_size, { output_size = null(o.output_size),
              output_ratio = null(o.output_ratio), _random_samples = get(case, 'u'):to(dtype), return_indices = true })
            assert.equal('int64', idx.dtype)
            assert.same(get(case, 'indices'):totable(), idx:totable())
          end
        end)
      end
    end
  end

  it('CrossMapLRN2d: torch 1.13 values (sizes 3, 4, 5), its own gradient by finite differences', function()
    for _, size in ipairs({ 3, 4, 5 }) do
      local case = { name = 'crossmap' .. size }
      local m = nn.CrossMapLRN2d(size, 0.5, 0.75, 2)
      assert.is_true(fx.maxdiff(m(get(case, 'x'):double()), get(case, 'out')) < 1e-12)
      assert.is_true(fx.maxdiff(m(get(case, 'x')), get(case, 'out')) < 1e-5)
      assert.is_true(gradcheck(function(x) return m(x) end, { d(2, 6, 2, 3) }))
    end
    -- an odd size over few channels is LocalResponseNorm
    local x = lunet.randn(2, 3, 4, 4):double()
    assert.is_true(fx.maxdiff(nn.CrossMapLRN2d(5, 1e-2)(x), nn.LocalResponseNorm(5, 1e-2)(x)) < 1e-14)
    assert.matches('CrossMapLRN2d: size must be', fx.err_of(nn.CrossMapLRN2d, 0))
    assert.matches('CrossMapLRN2d: input must be 4%-d', fx.err_of(nn.CrossMapLRN2d(3), lunet.randn(3, 4, 4)))
    assert.matches('CrossMapLRN2d', tostring(nn.CrossMapLRN2d(3)))
  end)

  it('AdaptiveLogSoftmaxWithLoss: a torch state_dict, output, loss, log_prob, predict, gradients', function()
    local case = { name = 'asm' }
    for _, dtype in ipairs({ 'float64', 'float32' }) do
      local m = nn.AdaptiveLogSoftmaxWithLoss(16, 20, { 4, 10, 15 }, 2.0, true, { dtype = dtype })
      local sd = {}
      for k, v in pairs(T) do
        local key = k:match('^asm%.sd%.(.*)$')
        if key then sd[key] = v:to(dtype) end
      end
      m:load_state_dict(sd)
      local tol = dtype == 'float32' and 1e-5 or 1e-12
      local x = get(case, 'x'):to(dtype):clone():requires_grad_()
      local out, loss = m(x, get(case, 'target'))
      assert.is_true(fx.maxdiff(out, get(case, 'out')) < tol)
      assert.is_true(fx.maxdiff(loss, get(case, 'loss')) < tol)
      assert.same({}, loss:size())
      ;(out * get(case, 'dout'):to(dtype)):sum():add(loss):backward()
      assert.is_true(fx.maxdiff(x.grad, get(case, 'dx')) < tol * 10)
      for _, e in ipairs(m:named_parameters()) do
        assert.is_true(fx.maxdiff(e[2].grad, T['asm.d.' .. e[1]]) < tol * 10, e[1])
      end
      assert.is_true(fx.maxdiff(m:log_prob(x), get(case, 'log_prob')) < tol)
      assert.same(get(case, 'predict'):totable(), m:predict(x):totable())
      -- one row: a 0-d target
      local o1, l1 = m(x:select(1, 3), get(case, 'target')[3])
      assert.same({}, o1:size())
      assert.is_true(fx.maxdiff(o1, get(case, 'out1')) < tol and fx.maxdiff(l1, get(case, 'loss1')) < tol)
      assert.same({ 20 }, m:log_prob(x:select(1, 1)):size())
    end
    local m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, { 3, 6 })
    local keys = {}
    for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.same({ 'head.weight', 'tail.0.0.weight', 'tail.0.1.weight', 'tail.1.0.weight', 'tail.1.1.weight' }, keys)
    assert.same({ 2, 8 }, m.tail[1][1].weight:size())   -- 8 // 4
    assert.matches('cutoffs must be', fx.err_of(nn.AdaptiveLogSoftmaxWithLoss, 8, 10, { 6, 3 }))
    assert.matches('cutoffs must be', fx.err_of(nn.AdaptiveLogSoftmaxWithLoss, 8, 10, { 3, 10 }))
    assert.matches('target values must be in 1..10', fx.err_of(m, lunet.randn(2, 8), lunet.tensor({ 0, 3 }, { dtype = 'int64' })))
    assert.matches('target must be an int64', fx.err_of(m, lunet.randn(2, 8), lunet.tensor({ 1, 3 })))
    assert.matches('input has 3 rows', fx.err_of(m, lunet.randn(3, 8), lunet.tensor({ 1, 3 }, { dtype = 'int64' })))
    assert.matches("unknown option 'div'", fx.err_of(nn.AdaptiveLogSoftmaxWithLoss, 8, 10, { 3 }, { div = 2 }))
    assert.matches('AdaptiveLogSoftmaxWithLoss%(8 %-> 10', tostring(m))
  end)
end)

describe('max_unpool', function()
  it('inverts max_pool (1-based indices) in every rank, module form, gradcheck', function()
    local x = lunet.randn(2, 3, 6, 6)
    local y, i = F.max_pool2d(x, 2, { return_indices = true })
    local u = nn.MaxUnpool2d(2)(y, i)
    assert.same(x:size(), u:size())
    assert.is_true(fx.maxdiff(u:view(2, 3, 36):gather(3, i:view(2, 3, 9)):view(2, 3, 3, 3), y) == 0)
    local y1, i1 = nn.MaxPool1d(3, { stride = 2, return_indices = true })(lunet.randn(2, 7))
    assert.same({ 2, 7 }, nn.MaxUnpool1d(3, 2)(y1, i1, { 7 }):size())
    assert.is_true(gradcheck(function(v) return F.max_unpool2d(v, i:narrow(1, 1, 1), 2) end, { d(1, 3, 3, 3) }))
    -- non-contiguous input
    local yt = y:transpose(3, 4)
    assert.is_true(fx.maxdiff(F.max_unpool2d(yt, i:transpose(3, 4), 2), F.max_unpool2d(yt:contiguous(), i:transpose(3, 4):contiguous(), 2)) == 0)
    -- empty batch
    assert.same({ 0, 2, 4, 4 }, F.max_unpool2d(lunet.zeros(0, 2, 2, 2), lunet.ones(0, 2, 2, 2, { dtype = 'int64' }), 2):size())
    assert.matches('MaxUnpool2d%(kernel_size 2', tostring(nn.MaxUnpool2d(2)))
  end)
  it('errors', function()
    local y, i = F.max_pool2d(lunet.randn(1, 1, 4, 4), 2, { return_indices = true })
    assert.matches('max_unpool2d: indices must be int64', fx.err_of(F.max_unpool2d, y, i:float(), 2))
    assert.matches('max_unpool2d: indices {1,1,2,1} must have', fx.err_of(F.max_unpool2d, y, i:narrow(4, 1, 1), 2))
    assert.matches('max_unpool2d: index 17 is out of range', fx.err_of(F.max_unpool2d, y, i * 0 + 17, 2))
    assert.matches('max_unpool2d: index 0 is out of range', fx.err_of(F.max_unpool2d, y, i * 0, 2))
    assert.matches('output_size entry 1 must be an integer between 2 and 6', fx.err_of(F.max_unpool2d, y, i, 2, { output_size = { 6, 4 } }))
    assert.matches('output_size must have 2 or 4 entries', fx.err_of(F.max_unpool2d, y, i, 2, { output_size = { 4 } }))
    assert.matches('max_unpool3d: input must be', fx.err_of(F.max_unpool3d, y:select(1, 1), i:select(1, 1), 2))
    assert.matches("unknown option 'strides'", fx.err_of(F.max_unpool2d, y, i, 2, { strides = 2 }))
    assert.matches("nn.MaxUnpool2d: kernel_size must be", fx.err_of(nn.MaxUnpool2d, 0))
  end)
end)

describe('fractional_max_pool', function()
  it('draws windows from lunet RNG: reproducible by seed, sizes, gradcheck', function()
    local x = lunet.randn(2, 3, 9, 9)
    lunet.manual_seed(5); local a, ia = F.fractional_max_pool2d(x, 2, { output_ratio = 0.5, return_indices = true })
    lunet.manual_seed(5); local b = nn.FractionalMaxPool2d(2, { output_ratio = 0.5 })(x)
    assert.same({ 2, 3, 4, 4 }, a:size())
    assert.is_true(fx.maxdiff(a, b) == 0)
    -- the values are the input's at the indices
    assert.is_true(fx.maxdiff(x:view(2, 3, 81):gather(3, ia:view(2, 3, 16)):view(2, 3, 4, 4), a) == 0)
    local u = lunet.rand(1, 2, 3, { dtype = 'float64' })
    assert.is_true(gradcheck(function(v) return F.fractional_max_pool3d(v, 2, 3, nil, false, u) end, { d(1, 2, 6, 5, 6) }))
    local m = nn.FractionalMaxPool3d({ 2, 2, 2 }, { 3, 3, 3 }, nil, true)
    local o, idx = m(lunet.randn(2, 6, 6, 6))
    assert.same({ 2, 3, 3, 3 }, o:size()); assert.same({ 2, 3, 3, 3 }, idx:size())
    local v2, i2 = F.fractional_max_pool2d_with_indices(x, 3, 4)
    assert.same({ 2, 3, 4, 4 }, i2:size())
    assert.matches('FractionalMaxPool2d%(kernel_size 2, output_ratio 0.5', tostring(nn.FractionalMaxPool2d(2, nil, 0.5)))
  end)
  it('errors', function()
    local x = lunet.randn(1, 2, 5, 5)
    assert.matches('fractional_max_pool2d: requires output_size or output_ratio', fx.err_of(F.fractional_max_pool2d, x, 2))
    assert.matches('too large for input size 5', fx.err_of(F.fractional_max_pool2d, x, 2, 5))
    assert.matches('must be <', fx.err_of(F.fractional_max_pool3d, lunet.randn(1, 1, 5, 5, 5), 2, 4))
    assert.matches('_random_samples must be {1,2,2}', fx.err_of(F.fractional_max_pool2d, x, 2, 3, nil, false, lunet.rand(1, 2, 3)))
    assert.matches('nn.FractionalMaxPool2d: takes one of', fx.err_of(nn.FractionalMaxPool2d, 2))
    assert.matches('nn.FractionalMaxPool2d: takes one of', fx.err_of(nn.FractionalMaxPool2d, 2, 3, 0.5))
    assert.matches('output_ratio must be in %(0, 1%)', fx.err_of(nn.FractionalMaxPool2d, 2, nil, 1.5))
    assert.matches('input must be a floating%-point', fx.err_of(F.fractional_max_pool2d, x:long(), 2, 3))
    assert.matches("unknown option 'ratio'", fx.err_of(F.fractional_max_pool2d, x, 2, { ratio = 0.5 }))
  end)
end)

describe('rrelu', function()
  it('training: slopes uniform in [lower, upper], the gradient is the slope; eval is the mean slope', function()
    lunet.manual_seed(1)
    local x = (-lunet.rand(20000, { dtype = 'float64' }) - 0.5):requires_grad_()
    local y = F.rrelu(x, 0.1, 0.3, true)
    y:sum():backward()
    local slope = y:detach() / x:detach()
    assert.is_true(slope:min():item() >= 0.1 and slope:max():item() <= 0.3)
    assert.is_true(math.abs(slope:mean():item() - 0.2) < 0.003)
    assert.is_true(math.abs(slope:var():item() - 0.04 / 12) < 3e-4)
    assert.is_true(fx.maxdiff(x.grad, slope) < 1e-12)
    local p = lunet.tensor({ 1, 2, 3 }, { dtype = 'float64' })
    assert.same({ 1, 2, 3 }, F.rrelu(p, { training = true }):totable())
    local m = nn.RReLU(0.1, 0.3)
    assert.is_true(fx.maxdiff(m:eval()(lunet.tensor({ -1, 2 })), lunet.tensor({ -0.2, 2 })) < 1e-7)
    local z = lunet.tensor({ -1, -2, 4 })
    F.rrelu_(z)
    assert.is_true(fx.maxdiff(z, lunet.tensor({ -(1 / 8 + 1 / 3) / 2, -(1 / 8 + 1 / 3), 4 })) < 1e-6)
    assert.matches('rrelu: lower %(0.5%) must be <= upper', fx.err_of(F.rrelu, lunet.randn(3), 0.5, 0.2))
    assert.matches("unknown option 'low'", fx.err_of(nn.RReLU, { low = 0.1 }))
    assert.matches('RReLU%(lower 0.125', tostring(nn.RReLU()))
  end)
end)

describe('gumbel_softmax', function()
  it('samples the softmax of the logits; hard is one-hot with the soft gradient', function()
    lunet.manual_seed(2)
    local logits = lunet.tensor({ 1, 0, -1, 2 }, { dtype = 'float64' })
    local n = 20000
    local y = F.gumbel_softmax(logits:view(1, 4):expand(n, 4):contiguous(), { hard = true })
    assert.is_true(fx.maxdiff(y:sum(2), lunet.ones(n, { dtype = 'float64' })) == 0)
    local freq = y:mean(1)
    assert.is_true(fx.maxdiff(freq, logits:softmax(1)) < 0.015)
    local s = F.gumbel_softmax(lunet.randn(3, 5), 0.5)
    assert.is_true(fx.maxdiff(s:sum(2), lunet.ones(3)) < 1e-6)
    -- straight through: hard - soft:detach() + soft passes the soft sample's gradient
    local l = d(2, 3)
    local w = lunet.randn(2, 3, { dtype = 'float64' })
    lunet.manual_seed(3); local h = F.gumbel_softmax(l, { hard = true, dim = 2 }); (h * w):sum():backward()
    local g_hard = l.grad:clone(); l.grad = nil
    lunet.manual_seed(3); local soft = F.gumbel_softmax(l, { dim = 2 }); (soft * w):sum():backward()
    assert.is_true(fx.maxdiff(g_hard, l.grad) < 1e-15)
    assert.same({ 1, 1 }, h:sum(2):totable())
    -- dim 1
    assert.is_true(fx.maxdiff(F.gumbel_softmax(lunet.randn(3, 2), { dim = 1 }):sum(1), lunet.ones(2)) < 1e-6)
    assert.matches("gumbel_softmax: unknown option 'temperature'", fx.err_of(F.gumbel_softmax, lunet.randn(2), { temperature = 1 }))
    assert.matches('gumbel_softmax: dim 3 out of range', fx.err_of(F.gumbel_softmax, lunet.randn(2, 2), { dim = 3 }))
  end)
end)

describe('pdist and the aliases', function()
  it('pdist: empty and one row, non-contiguous, gradcheck, errors', function()
    assert.same({ 0 }, F.pdist(lunet.randn(1, 3)):size())
    local x = lunet.randn(4, 5, { dtype = 'float64' })
    assert.is_true(fx.maxdiff(F.pdist(x:t():contiguous():t()), F.pdist(x)) == 0)
    assert.is_true(fx.maxdiff(F.pdist(x, 2):narrow(1, 1, 3), lunet.cdist(x, x):select(1, 1):narrow(1, 2, 3)) < 1e-12)
    assert.is_true(gradcheck(function(v) return F.pdist(v, 1.5) end, { d(4, 3) }))
    assert.matches('pdist: input must be 2%-d', fx.err_of(F.pdist, lunet.randn(2, 2, 2)))
    assert.matches('pdist: p must be a number >= 0', fx.err_of(F.pdist, lunet.randn(2, 2), -1))
  end)
  it('max_pool*_with_indices, adaptive_max_pool*_with_indices, fractional ones', function()
    local x = lunet.randn(2, 3, 6, 6)
    local a, ia = F.max_pool2d(x, 3, { stride = 2, return_indices = true })
    local b, ib = F.max_pool2d_with_indices(x, 3, 2)
    assert.is_true(fx.maxdiff(a, b) == 0); assert.same(ia:totable(), ib:totable())
    local _, ic = F.max_pool2d_with_indices(x, 3, { stride = 2 })
    assert.same(ia:totable(), ic:totable())
    local _, i1 = F.max_pool1d_with_indices(x:select(1, 1), 2)
    assert.same({ 3, 6, 3 }, i1:size())
    local _, j = F.adaptive_max_pool2d_with_indices(x, 4)
    local _, j2 = F.adaptive_max_pool2d(x, 4, true)
    assert.same(j2:totable(), j:totable())
    assert.same({ 2, 3, 2 }, select(2, F.adaptive_max_pool1d_with_indices(x:select(4, 1), 2)):size())
    assert.same({ 2, 2, 2, 2 }, select(2, F.adaptive_max_pool3d_with_indices(x, 2)):size())
    assert.matches('max_pool3d', fx.err_of(F.max_pool3d_with_indices, lunet.randn(1, 1, 4, 4, 4), 2))
  end)
  it('upsample: interpolate under its deprecated names; Softmax2d, NLLLoss2d, 3-d pads', function()
    local x = lunet.randn(1, 2, 3, 4)
    assert.is_true(fx.maxdiff(F.upsample(x, { scale_factor = 2, mode = 'bilinear' }),
      F.interpolate(x, { scale_factor = 2, mode = 'bilinear' })) == 0)
    assert.is_true(fx.maxdiff(F.upsample(x, 5), F.interpolate(x, { size = 5 })) == 0)
    assert.matches("upsample: unknown option 'antialias'", fx.err_of(F.upsample, x, { size = 5, antialias = true }))
    assert.matches('upsample_bilinear: unknown option', fx.err_of(F.upsample_bilinear, x, { size = 5, mode = 'nearest' }))
    assert.matches('nn.Softmax2d: input must be 3%-d', fx.err_of(nn.Softmax2d(), lunet.randn(2, 3)))
    local lp, t = lunet.randn(2, 3, 2, 2):log_softmax(2), lunet.randint(1, 4, { 2, 2, 2 })
    assert.is_true(fx.maxdiff(nn.NLLLoss2d()(lp, t), nn.NLLLoss()(lp, t)) == 0)
    assert.matches("nn.NLLLoss2d: unknown option 'weights'", fx.err_of(nn.NLLLoss2d, { weights = 1 }))
    assert.matches('ReflectionPad3d: input must be %(N, C, D, H, W%)', fx.err_of(nn.ReflectionPad3d(1), lunet.randn(2, 2, 2)))
    assert.matches('padding must be a number or {left, right, top, bottom, front, back}', fx.err_of(nn.ReplicationPad3d, { 1, 1 }))
    assert.same({ 1, 4, 4, 4 }, nn.ReplicationPad3d(1)(lunet.randn(1, 2, 2, 2)):size())
    assert.matches('ConstantPad3d%({1, 1, 1, 1, 1, 1}, value 2', tostring(nn.ConstantPad3d(1, 2)))
  end)
end)
