-- The activations nn.SiLU, Hardswish, Hardsigmoid, ReLU6, Softplus, Mish,
-- PReLU and the losses nn.L1Loss, SmoothL1Loss, HuberLoss, BCELoss,
-- KLDivLoss against PyTorch 1.13 (spec/fixtures/nn_act_loss.safetensors,
-- written by tools/gen_nn_act_loss_fixtures.py): outputs and gradients,
-- float32 to 1e-5 and float64 to 1e-9, the kinks included (relu6 at 0 and 6,
-- |d| == beta, BCE at probabilities 0 and 1, ...), through nn.functional and
-- through the modules; then the options and inputs they refuse.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local nn = lunet.nn
local F = nn.functional

local fx, cases = fixtures.load_fixture('nn_act_loss')

local function get(case, k) return fx[case.name .. '.' .. k] end

-- the case through nn.functional
local function run_functional(case, t)
  local o, op = case.opts, case.op
  if op == 'softplus' then return F.softplus(t.x, o.beta, o.threshold)
  elseif op == 'prelu' then return F.prelu(t.x, t.w)
  elseif op == 'l1_loss' then return F.l1_loss(t.x, t.y, { reduction = o.reduction })
  elseif op == 'smooth_l1_loss' then return F.smooth_l1_loss(t.x, t.y, { reduction = o.reduction, beta = o.beta })
  elseif op == 'huber_loss' then return F.huber_loss(t.x, t.y, { reduction = o.reduction, delta = o.delta })
  elseif op == 'binary_cross_entropy' then
    return F.binary_cross_entropy(t.x, t.y, { reduction = o.reduction, weight = t.w })
  elseif op == 'kl_div' then return F.kl_div(t.x, t.y, { reduction = o.reduction, log_target = o.log_target })
  end
  return F[op](t.x)
end

-- the same case through its module
local modules = {
  silu = 'SiLU', hardswish = 'Hardswish', hardsigmoid = 'Hardsigmoid', relu6 = 'ReLU6', mish = 'Mish',
  softplus = 'Softplus', prelu = 'PReLU', l1_loss = 'L1Loss', smooth_l1_loss = 'SmoothL1Loss',
  huber_loss = 'HuberLoss', binary_cross_entropy = 'BCELoss', kl_div = 'KLDivLoss',
}
local function run_module(case, t)
  local o, op = case.opts, case.op
  local M = nn[modules[op]]
  if op == 'softplus' then return M(o.beta, o.threshold)(t.x), nil
  elseif op == 'prelu' then
    local m = M(t.w:numel(), { dtype = t.x.dtype })
    lunet.no_grad(function() m.weight:copy_(t.w) end)
    return m(t.x), m
  elseif op == 'l1_loss' then return M({ reduction = o.reduction })(t.x, t.y)
  elseif op == 'smooth_l1_loss' then return M({ reduction = o.reduction, beta = o.beta })(t.x, t.y)
  elseif op == 'huber_loss' then return M({ reduction = o.reduction, delta = o.delta })(t.x, t.y)
  elseif op == 'binary_cross_entropy' then return M({ reduction = o.reduction, weight = t.w })(t.x, t.y)
  elseif op == 'kl_div' then return M({ reduction = o.reduction, log_target = o.log_target })(t.x, t.y)
  end
  return M()(t.x)
end

local function check_case(case, dtype, tol, how)
  local t = {}
  for _, k in ipairs({ 'x', 'y', 'w' }) do
    local v = get(case, k)
    if v then t[k] = v:detach():to(dtype) end
  end
  if how == 'noncontig' and t.x:dim() >= 2 then
    local d = t.x:dim()
    t.x = t.x:transpose(d - 1, d):contiguous():transpose(d - 1, d)
    if t.y then t.y = t.y:transpose(d - 1, d):contiguous():transpose(d - 1, d) end
    assert.is_false(t.x:is_contiguous())
  end
  local grads = { x = t.x }
  t.x.requires_grad = true
  if get(case, 'dy') then t.y.requires_grad = true; grads.y = t.y end
  local out, m
  if how == 'module' then out, m = run_module(case, t) else out = run_functional(case, t) end
  if case.op == 'prelu' then
    if m then grads.w = m.weight else t.w.requires_grad = true; grads.w = t.w; out = run_functional(case, t) end
  end
  assert.tensor_near(out, get(case, 'out'), tol)
  out:backward(get(case, 'dout'):to(dtype))
  for k, v in pairs(grads) do
    local want = get(case, 'd' .. k)
    assert.is_not_nil(v.grad, case.name .. ': no gradient for ' .. k)
    assert.tensor_near(v.grad, want, tol)
  end
end

describe('activations and losses vs PyTorch 1.13 fixtures', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 35) end)
  for _, case in ipairs(cases) do
    it(case.name .. ' float32', function() check_case(case, 'float32', 1e-5) end)
    it(case.name .. ' float64', function() check_case(case, 'float64', 1e-9) end)
    it(case.name .. ' non-contiguous', function() check_case(case, 'float32', 1e-5, 'noncontig') end)
    it(case.name .. ' as nn.' .. modules[case.op], function() check_case(case, 'float64', 1e-9, 'module') end)
  end
end)

describe('activations and losses: the rest', function()
  local function errs(pat, f, ...)
    local ok, e = pcall(f, ...)
    assert.is_false(ok)
    assert.matches(pat, tostring(e), 1, true)
  end

  it('nn.PReLU: a parameter of num_parameters values, init 0.25 by default', function()
    local m = nn.PReLU()
    assert.same({ 1 }, m.weight:size())
    assert.tensor_near(m.weight, { 0.25 }, 0)
    assert.equals(1, #m:parameters())
    local m3 = nn.PReLU(3, 0.1)
    assert.tensor_near(m3.weight, { 0.1, 0.1, 0.1 }, 1e-7)
    assert.equals(nn.PReLU{ num_parameters = 2, init = 0.5 }.weight:numel(), 2)
    assert.equals(3, m3:num_parameters())   -- (Module's count, not shadowed)
    lunet.no_grad(function() m3.weight:fill_(0.7) end)
    m3:reset_parameters()
    assert.tensor_near(m3.weight, { 0.1, 0.1, 0.1 }, 1e-7)
    -- trains: one SGD step moves the weight
    local x = lunet.tensor({ { -1, 2, -3 }, { -2, -1, 1 } })
    local y = m3(x):sum()
    y:backward()
    assert.tensor_near(m3.weight.grad, { -3, -1, -3 }, 1e-6)
  end)

  it('prelu refuses a weight that fits neither 1 nor the channels', function()
    errs('weight has 3 values, the input 4 channels (dim 2)', F.prelu, lunet.randn(2, 4), lunet.randn(3))
    errs('weight has 3 values, the input 1 channel', F.prelu, lunet.randn(5), lunet.randn(3))
    errs('weight must be a scalar or 1-d tensor', F.prelu, lunet.randn(2, 4), lunet.randn(2, 2))
    errs('num_parameters must be an integer >= 1', nn.PReLU, 0)
    errs('num_parameters must be an integer >= 1', nn.PReLU, 2.5)
    -- a 0-d input with one weight, as PyTorch
    assert.near(-0.5, F.prelu(lunet.tensor(-2), lunet.tensor({ 0.25 })):item(), 1e-7)
  end)

  it('losses take reduction as MSELoss does, and KLDivLoss batchmean', function()
    for _, L in ipairs({ 'L1Loss', 'SmoothL1Loss', 'HuberLoss', 'BCELoss', 'KLDivLoss' }) do
      errs("reduction must be 'none', 'mean'", nn[L], { reduction = 'avg' })
      errs('unknown option', nn[L], { reductoin = 'sum' })
    end
    errs("'batchmean'", nn.KLDivLoss, { reduction = 'avg' })
    errs("reduction must be 'none', 'mean' or 'sum'", nn.L1Loss, { reduction = 'batchmean' })
    errs("reduction must be", F.l1_loss, lunet.randn(3), lunet.randn(3), { reduction = 'batchmean' })
    assert.equals("reduction 'sum'", nn.L1Loss({ reduction = 'sum' }):extra_repr())
    -- batchmean: the sum over the batch size (dim 1); on a 0-d input the sum
    local x, t = lunet.randn(4, 3):log_softmax(2), lunet.randn(4, 3):softmax(2)
    local s = F.kl_div(x, t, { reduction = 'sum' }):item()
    assert.near(s / 4, nn.KLDivLoss({ reduction = 'batchmean' })(x, t):item(), 1e-6)
    assert.near(F.kl_div(lunet.tensor(-1), lunet.tensor(0.5), { reduction = 'batchmean' }):item(), 0.1534, 1e-4)
  end)

  it('beta, delta and the loss inputs are checked', function()
    errs('beta must be >= 0', nn.SmoothL1Loss, { beta = -1 })
    errs('beta must be >= 0', nn.SmoothL1Loss, { beta = 0 / 0 })
    errs('delta must be > 0', nn.HuberLoss, { delta = 0 })
    errs('beta must be a number >= 0', F.smooth_l1_loss, lunet.randn(2), lunet.randn(2), { beta = -0.5 })
    errs('delta must be a number > 0', F.huber_loss, lunet.randn(2), lunet.randn(2), { delta = -1 })
    errs('must have the same shape', F.l1_loss, lunet.randn(2, 3), lunet.randn(3, 2))
    errs('must have the same shape', nn.KLDivLoss(), lunet.randn(2, 3), lunet.randn(2))
    errs('floating-point', F.l1_loss, lunet.tensor({ 1, 2 }, { dtype = 'int64' }), lunet.randn(2))
    errs('floating-point', F.silu, lunet.tensor({ 1, 2 }, { dtype = 'int64' }))
    errs('must be a tensor', F.mish, 3)
  end)

  it('BCELoss takes probabilities only, and a weight that broadcasts', function()
    local y = lunet.tensor({ 0, 1, 1 })
    errs('all elements of input should be between 0 and 1', F.binary_cross_entropy, lunet.tensor({ 0.5, 1.5, 0.2 }), y)
    errs('between 0 and 1', nn.BCELoss(), lunet.tensor({ -0.1, 0.5, 0.2 }), y)
    errs('between 0 and 1', nn.BCELoss(), lunet.tensor({ 0 / 0, 0.5, 0.2 }), y)
    errs('weight {2} does not broadcast to the input {3}', F.binary_cross_entropy, lunet.tensor({ 0.5, 0.5, 0.2 }), y,
      { weight = lunet.ones(2) })
    -- the logs clamped at -100: a certain wrong answer costs 100, not inf
    assert.near(100, F.binary_cross_entropy(lunet.tensor({ 0 }), lunet.tensor({ 1 })):item(), 1e-5)
    assert.near(100, F.binary_cross_entropy(lunet.tensor({ 1 }), lunet.tensor({ 0 })):item(), 1e-5)
    -- matches BCEWithLogitsLoss on sigmoid(logits)
    local z, t = lunet.randn(4, 5), lunet.rand(4, 5)
    assert.near(nn.BCEWithLogitsLoss()(z, t):item(), nn.BCELoss()(z:sigmoid(), t):item(), 1e-5)
  end)

  it('the layers take their options by position or in a table, and say them', function()
    local sp = nn.Softplus(2, 10)
    assert.equals(2, sp.beta); assert.equals(10, sp.threshold)
    assert.equals(0.5, nn.Softplus{ beta = 0.5 }.beta)
    assert.equals('beta 1, threshold 20', nn.Softplus():extra_repr())
    errs('unknown option', nn.Softplus, { alpha = 1 })
    for _, n in ipairs({ 'SiLU', 'Hardswish', 'Hardsigmoid', 'ReLU6', 'Mish' }) do
      nn[n](true); nn[n]{ inplace = false }
      errs('unknown option', nn[n], { beta = 1 })
    end
    assert.equals('num_parameters 3', nn.PReLU(3):extra_repr())
    assert.equals("reduction 'batchmean', log_target", nn.KLDivLoss{ reduction = 'batchmean', log_target = true }:extra_repr())
  end)

  it('inputs that need no gradient give outputs that have none; a Sequential trains through them', function()
    local x = lunet.randn(3, 4)
    assert.is_nil(F.silu(x).grad_fn)
    assert.is_false(F.l1_loss(x, x * 2).requires_grad)
    lunet.manual_seed(1)
    local model = nn.Sequential(nn.Linear(4, 6), nn.SiLU(), nn.Linear(6, 6), nn.Hardswish(), nn.Linear(6, 6),
      nn.Mish(), nn.PReLU(), nn.Linear(6, 6), nn.Softplus(), nn.Linear(6, 6), nn.ReLU6(), nn.Linear(6, 1),
      nn.Hardsigmoid())
    local opt = lunet.optim.SGD(model:parameters(), { lr = 0.5 })
    local y = (x:sum(2, true):gt(0)):to('float32')
    local first, last
    for _ = 1, 60 do
      opt:zero_grad()
      local loss = nn.BCELoss()(model(x):clamp(1e-6, 1 - 1e-6), y) + nn.SmoothL1Loss()(model(x), y)
      loss:backward()
      opt:step()
      first = first or loss:item()
      last = loss:item()
    end
    assert.is_true(last < first)
  end)
end)
