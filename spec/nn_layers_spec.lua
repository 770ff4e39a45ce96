-- Forward outputs and gradients of lunet.nn.functional against PyTorch
-- (spec/fixtures/nn_layers.safetensors, written by tools/gen_nn_fixtures.py):
-- float32 to 1e-5, float64 to 1e-9, including non-contiguous inputs.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local F = lunet.nn.functional

local fx, cases = fixtures.load_fixture('nn_layers')

local function get(case, k) return fx[case.name .. '.' .. k] end

-- the fixture's options less kernel_size (passed by position; an unknown option is an error)
local function pool_opts(o)
  local c = {}
  for k, v in pairs(o) do if k ~= 'kernel_size' then c[k] = v end end
  return c
end

-- run the case's op on inputs {x=..., w=..., ...} (already in the test dtype)
local function run(case, t)
  local o, op = case.opts, case.op
  if op == 'conv2d' then
    return F.conv2d(t.x, t.w, t.b, { stride = o.stride, padding = o.padding, dilation = o.dilation, groups = o.groups })
  elseif op == 'max_pool2d' then
    return F.max_pool2d(t.x, o.kernel_size, pool_opts(o))
  elseif op == 'avg_pool2d' then
    return F.avg_pool2d(t.x, o.kernel_size, pool_opts(o))
  elseif op == 'adaptive_avg_pool2d' then
    return F.adaptive_avg_pool2d(t.x, o.output_size)
  elseif op == 'batch_norm' then
    return F.batch_norm(t.x, t.running_mean, t.running_var, t.w, t.b, o.training, o.momentum, 1e-5)
  elseif op == 'linear' then
    return F.linear(t.x, t.w, t.b)
  elseif op == 'softmax' then return F.softmax(t.x, o.dim)
  elseif op == 'log_softmax' then return F.log_softmax(t.x, o.dim)
  elseif op == 'leaky_relu' then return F.leaky_relu(t.x, o.slope)
  elseif op == 'elu' then return F.elu(t.x, o.alpha)
  elseif op == 'gelu' then return F.gelu(t.x, o.approximate)
  elseif op == 'sigmoid' or op == 'tanh' or op == 'relu' then return t.x[op](t.x)
  elseif op == 'cross_entropy' then
    local opts = { weight = o.weight and t.weight or nil, reduction = o.reduction,
      ignore_index = o.ignore_index, label_smoothing = o.label_smoothing }
    if o.nll then return F.nll_loss(F.log_softmax(t.x, 2), t.target, opts) end
    return F.cross_entropy(t.x, t.target, opts)
  elseif op == 'mse_loss' then return F.mse_loss(t.x, t.y, { reduction = o.reduction })
  elseif op == 'bce_with_logits' then
    return F.binary_cross_entropy_with_logits(t.x, t.y, { reduction = o.reduction,
      pos_weight = o.pos_weight and t.pos_weight or nil, weight = o.weight and t.weight or nil })
  end
  error('unknown op ' .. op)
end

local grad_names = { 'x', 'w', 'b', 'y' }

local function check_case(case, dtype, tol, noncontig)
  local t = {}
  for _, k in ipairs({ 'x', 'w', 'b', 'y', 'target', 'weight', 'pos_weight', 'running_mean', 'running_var' }) do
    local v = get(case, k)
    if v then
      v = v:detach()
      if v:is_floating_point() then v = v:to(dtype) end
      if k == 'running_mean' or k == 'running_var' then v = v:clone() end
      t[k] = v
    end
  end
  if noncontig and t.x:dim() >= 2 then
    -- same values, transposed memory
    local d = t.x:dim()
    t.x = t.x:transpose(d - 1, d):contiguous():transpose(d - 1, d)
    assert.is_false(t.x:is_contiguous())
  end
  for _, k in ipairs(grad_names) do
    if t[k] and get(case, 'd' .. k) then t[k].requires_grad = true end
  end
  local out = run(case, t)
  assert.tensor_near(out, get(case, 'out'), tol)
  out:backward(get(case, 'dout'):to(dtype))
  for _, k in ipairs(grad_names) do
    local want = get(case, 'd' .. k)
    if want then
      assert.is_not_nil(t[k].grad, case.name .. ': no gradient for ' .. k)
      assert.tensor_near(t[k].grad, want, tol)
    end
  end
  if case.op == 'batch_norm' then
    assert.tensor_near(t.running_mean, get(case, 'running_mean_after'), tol)
    assert.tensor_near(t.running_var, get(case, 'running_var_after'), tol)
  end
end

-- a kernel that kern has not landed yet is a stub that errors "not implemented"
local function available(case)
  local ok, err = pcall(check_case, case, 'float64', 1e-9)
  if not ok and (tostring(err):find('not implemented', 1, true) or tostring(err):find('not in this liblunet', 1, true)) then return false end
  return true
end

describe('nn.functional vs PyTorch fixtures', function()
  it('has the fixture cases', function()
    assert.is_true(#cases >= 40)
  end)
  for _, case in ipairs(cases) do
    local pending_ = not available(case)
    if pending_ then
      pending(case.name .. ' (' .. case.op .. ': C kernel not built yet)')
    else
      it(case.name .. ' float32', function() check_case(case, 'float32', 1e-5) end)
      it(case.name .. ' float64', function() check_case(case, 'float64', 1e-9) end)
      if case.op ~= 'linear' and case.op ~= 'cross_entropy' and case.op ~= 'mse_loss' and case.op ~= 'bce_with_logits' then
        it(case.name .. ' non-contiguous input', function() check_case(case, 'float32', 1e-5, true) end)
      end
    end
  end
end)
