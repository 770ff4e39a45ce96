-- nn.functional.one_hot (1-based labels), nn.functional.bilinear and
-- nn.Bilinear, nn.utils (clip_grad_value_, parameters_to_vector,
-- vector_to_parameters, clip_grad_norm_) against PyTorch 1.13
-- (spec/fixtures/nn_utils.safetensors, written by
-- tools/gen_nn_utils_fixtures.py): values, dtypes, shapes and float64
-- gradients; gradchecks; round trips; the inputs they refuse.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional
local err_of = fixtures.err_of

local fx, cases = fixtures.load_fixture('nn_utils')
local function get(case, k) return fx[case.name .. '.' .. k] end
local function of_op(op)
  local out = {}
  for _, c in ipairs(cases) do if c.op == op then out[#out + 1] = c end end
  return out
end
local function errs(pat, f, ...) assert.matches(pat, err_of(f, ...), 1, true) end

describe('nn.functional.one_hot', function()
  it('matches torch 1.13: int64, label k sets column k (torch: label k-1, column k-1)', function()
    local cs = of_op('one_hot')
    assert.equals(6, #cs)
    for _, c in ipairs(cs) do
      local t, want = get(c, 't'), get(c, 'out')
      for _, out in ipairs({ F.one_hot(t, c.opts.num_classes), F.one_hot(t, { num_classes = c.opts.num_classes }) }) do
        assert.equals('int64', out.dtype)
        assert.same(want:size(), out:size(), c.name)
        assert.tensor_near(out, want, 0)
      end
    end
  end)

  it('takes int32 labels and -1 (PyTorch\'s default) as the largest label; records nothing', function()
    local t = lunet.tensor({ 3, 1, 2 }, { dtype = 'int32' })
    local out = F.one_hot(t, -1)
    assert.equals('int64', out.dtype)
    assert.same({ { 0, 0, 1 }, { 1, 0, 0 }, { 0, 1, 0 } }, out:totable())
    assert.same({ 3, 5 }, F.one_hot(t:long(), 5):size())
    assert.is_false(out.requires_grad)
  end)

  it('refuses labels < 1 or > num_classes, other dtypes, bad num_classes, empty input without num_classes', function()
    local t = lunet.tensor({ 1, 2, 3 }, { dtype = 'int64' })
    errs('one_hot: class labels are 1-based and must be >= 1, got 0', F.one_hot, lunet.tensor({ 1, 0 }, { dtype = 'int64' }))
    errs('one_hot: class label 3 is larger than num_classes (2)', F.one_hot, t, 2)
    errs('one_hot: input must be an int64 tensor of 1-based class labels, got float32', F.one_hot, t:float())
    errs('one_hot: input must be an int64 tensor of 1-based class labels, got bool', F.one_hot, t:gt(1))
    errs('one_hot: input must be a tensor, got table', F.one_hot, { 1, 2 })
    errs('one_hot: num_classes must be an integer >= 1 (or -1: the largest label), got 0', F.one_hot, t, 0)
    errs('one_hot: num_classes must be an integer >= 1 (or -1: the largest label), got 2.5', F.one_hot, t, 2.5)
    errs("one_hot: option 'num_classes' must be a number, got string", F.one_hot, t, 'x')
    errs("one_hot: unknown option 'classes'", F.one_hot, t, { classes = 3 })
    errs('one_hot: cannot infer the number of classes from an empty tensor', F.one_hot, lunet.zeros(0):long())
  end)
end)

describe('nn.functional.bilinear vs PyTorch 1.13 fixtures', function()
  local function check_case(case, dtype, tol, how)
    local t, grads = {}, {}
    for _, k in ipairs({ 'x1', 'x2', 'w', 'b' }) do
      local v = get(case, k)
      if v then
        t[k] = v:detach():to(dtype)
        if how == 'noncontig' and t[k]:dim() >= 2 then
          local d = t[k]:dim()
          t[k] = t[k]:transpose(d - 1, d):contiguous():transpose(d - 1, d)
        end
        t[k].requires_grad = true
        grads[k] = t[k]
      end
    end
    local out
    if how == 'module' then
      local m = nn.Bilinear(t.w:size(2), t.w:size(3), t.w:size(1), { bias = t.b ~= nil, dtype = dtype })
      lunet.no_grad(function()
        m.weight:copy_(t.w)
        if t.b then m.bias:copy_(t.b) end
      end)
      grads.w, grads.b = m.weight, m.bias
      out = m(t.x1, t.x2)
    else
      out = F.bilinear(t.x1, t.x2, t.w, t.b)
    end
    assert.equals(dtype, out.dtype)
    assert.tensor_near(out, get(case, 'out'), tol)
    out:backward(get(case, 'dout'):to(dtype))
    for k, v in pairs(grads) do
      assert.is_not_nil(v.grad, case.name .. ': no gradient for ' .. k)
      assert.tensor_near(v.grad, get(case, 'd' .. k), tol)
    end
  end
  local cs = of_op('bilinear')
  it('has the fixture cases', function() assert.equals(7, #cs) end)
  for _, case in ipairs(cs) do
    it(case.name .. ' float32', function() check_case(case, 'float32', 1e-5) end)
    it(case.name .. ' float64', function() check_case(case, 'float64', 1e-10) end)
    it(case.name .. ' non-contiguous', function() check_case(case, 'float64', 1e-10, 'noncontig') end)
    it(case.name .. ' as nn.Bilinear', function() check_case(case, 'float64', 1e-10, 'module') end)
  end

  it('gradcheck (float64), with and without bias, batched and 1-d', function()
    lunet.manual_seed(5)
    local function leaf(...) local t = lunet.randn(...):double(); t.requires_grad = true; return t end
    local sets = {
      { leaf(3, 4), leaf(3, 2), leaf(5, 4, 2), leaf(5) },
      { leaf(2, 3, 4), leaf(2, 3, 3), leaf(2, 4, 3) },
      { leaf(4), leaf(3), leaf(2, 4, 3), leaf(2) },
    }
    for _, s in ipairs(sets) do
      local ok, msg = gradcheck(function(...) return F.bilinear(...) end, s)
      assert(ok, msg)
    end
  end)

  it('refuses mismatched shapes, dtypes and non-tensors, naming them', function()
    local x1, x2, w, b = lunet.randn(4, 3), lunet.randn(4, 5), lunet.randn(2, 3, 5), lunet.randn(2)
    errs('bilinear: input1 must be a tensor, got nil', F.bilinear, nil, x2, w)
    errs('bilinear: weight must be 3-d, got 2-d {3,5}', F.bilinear, x1, x2, lunet.randn(3, 5))
    errs('bilinear: bias must be 1-d, got 2-d {1,2}', F.bilinear, x1, x2, w, b:view(1, 2))
    errs('bilinear: input1 has 5 features, weight expects 3', F.bilinear, x2, x2, w)
    errs('bilinear: input2 has 3 features, weight expects 5', F.bilinear, x1, x1, w)
    errs('bilinear: bias has 3 elements, weight has 2 outputs', F.bilinear, x1, x2, w, lunet.randn(3))
    errs('bilinear: input1 {4,3} and input2 {3,5} differ in their batch dims', F.bilinear, x1, lunet.randn(3, 5), w)
    errs('bilinear: input1 and input2 must have the same number of dims (at least 1), got {4,3} and {1,4,5}',
      F.bilinear, x1, lunet.randn(1, 4, 5), w)
    errs('bilinear: input1 and input2 must have the same number of dims (at least 1), got {} and {}',
      F.bilinear, lunet.tensor(1), lunet.tensor(1), w)
    errs('bilinear: all tensors must have the same dtype, got input1 float32 and weight float64', F.bilinear, x1, x2, w:double())
    errs('bilinear: input1 must be a floating-point tensor, got int64', F.bilinear, x1:long(), x2:long(), w:long())
  end)
end)

describe('nn.Bilinear', function()
  it('has torch\'s parameters, names, init bounds and options', function()
    lunet.manual_seed(1)
    local m = nn.Bilinear(4, 3, 5)
    assert.same({ 5, 4, 3 }, m.weight:size())
    assert.same({ 5 }, m.bias:size())
    local sd = m:state_dict()
    assert.is_not_nil(sd.weight); assert.is_not_nil(sd.bias)
    assert.is_true(m.weight:abs():max():item() <= 0.5)   -- 1/sqrt(4)
    assert.is_true(m.bias:abs():max():item() <= 0.5)
    assert.is_true(m.weight:abs():max():item() > 0.3)    -- spread over the range, not all zero
    assert.equals(2, #m:parameters())
    assert.equals('4, 3 -> 5', m:extra_repr()); assert.matches('nn.Bilinear(4, 3 -> 5)', tostring(m), 1, true)
    local nb = nn.Bilinear(4, 3, 5, false)
    assert.is_nil(nb.bias)
    assert.equals(1, #nb:parameters())
    assert.equals('4, 3 -> 5, no bias', nb:extra_repr())
    assert.equals('float64', nn.Bilinear(2, 2, 2, { dtype = 'float64' }).weight.dtype)
    local y = m(lunet.randn(7, 4), lunet.randn(7, 3))
    assert.same({ 7, 5 }, y:size())
  end)

  it('refuses bad sizes and options', function()
    errs('nn.Bilinear: in1_features must be an integer >= 1, got 0', nn.Bilinear, 0, 3, 2)
    errs('nn.Bilinear: out_features must be an integer >= 0, got 1.5', nn.Bilinear, 2, 3, 1.5)
    errs('nn.Bilinear: expected (in1_features, in2_features, out_features[, bias][, opts])', nn.Bilinear, 2, 3)
    errs("nn.Bilinear: unknown option 'bais'", nn.Bilinear, 2, 3, 4, { bais = false })
    errs('bilinear: input2 has 4 features, weight expects 3', nn.Bilinear(2, 3, 4), lunet.randn(1, 2), lunet.randn(1, 4))
  end)
end)

describe('nn.utils.clip_grad_value_', function()
  it('matches torch 1.13 (inf clamped, NaN kept, params without grads skipped)', function()
    local cs = of_op('clip_grad_value_')
    assert.equals(4, #cs)
    for _, c in ipairs(cs) do
      local ps = {}
      for i = 1, c.opts.n do
        local g = get(c, 'g' .. i)
        ps[i] = lunet.zeros(g:size(), { dtype = g.dtype })
        ps[i].grad = g:clone()
      end
      ps[#ps + 1] = lunet.zeros(2)
      assert.is_nil(nn.utils.clip_grad_value_(ps, c.opts.clip_value))
      for i = 1, c.opts.n do assert.tensor_near(ps[i].grad, get(c, 'r' .. i), 0) end
      assert.is_nil(ps[#ps].grad)
    end
  end)

  it('is optim.clip_grad_value_, takes one tensor, and refuses bad clip values', function()
    assert.equals(lunet.optim.clip_grad_value_, nn.utils.clip_grad_value_)
    assert.equals(lunet.optim.clip_grad_norm_, nn.utils.clip_grad_norm_)
    local p = lunet.zeros(3)
    p.grad = lunet.tensor({ -3, 0.5, 9 })
    nn.utils.clip_grad_value_(p, 1)
    assert.same({ -1, 0.5, 1 }, p.grad:totable())
    errs('clip_grad_value: clip_value must be a number >= 0, got -1', nn.utils.clip_grad_value_, p, -1)
    errs('clip_grad_value: clip_value must be a number >= 0, got nan', nn.utils.clip_grad_value_, p, 0 / 0)
    errs('clip_grad_value: clip_value must be a number >= 0, got x', nn.utils.clip_grad_value_, p, 'x')
    errs('clip_grad_value: params must be a tensor or a list of tensors, got string', nn.utils.clip_grad_value_, 'x', 1)
    errs('clip_grad_value: param 2 is a number, expected a tensor', nn.utils.clip_grad_value_, { p, 3 }, 1)
    errs('clip_grad_value: takes (params, clip_value), got more arguments', nn.utils.clip_grad_value_, p, 1, 2)
  end)
end)

describe('nn.utils.parameters_to_vector and vector_to_parameters', function()
  it('parameters_to_vector matches torch 1.13 and is differentiable', function()
    local c = of_op('parameters_to_vector')[1]
    local ps = {}
    for i = 1, c.opts.n do ps[i] = get(c, 'p' .. i):double(); ps[i].requires_grad = true end
    local v = nn.utils.parameters_to_vector(ps)
    assert.tensor_near(v, get(c, 'out'), 1e-12)
    local w = lunet.arange(v:numel()):double()
    ;(v * w):sum():backward()
    local at = 0
    for _, p in ipairs(ps) do
      local n = p:numel()
      assert.tensor_near(p.grad, w:narrow(1, at + 1, n):reshape(p:size()), 0)
      at = at + n
    end
  end)

  it('round-trips a model\'s parameters; vector_to_parameters copies without recording', function()
    local m = nn.Sequential(nn.Linear(3, 4), nn.Bilinear(4, 2, 3))
    local params = m:parameters()
    local v = nn.utils.parameters_to_vector(params)
    assert.equals(12 + 4 + 24 + 3, v:numel())
    local v2 = (v * 2):detach()
    v2.requires_grad = true
    nn.utils.vector_to_parameters(v2 * 1, params)
    assert.tensor_near(nn.utils.parameters_to_vector(params), v2, 0)
    for _, p in ipairs(params) do
      assert.is_true(p.requires_grad)
      assert.is_nil(p.grad_fn)
    end
    -- the params keep their own storage: changing vec afterwards leaves them
    local before = params[1]:clone()
    local v3 = v:clone()
    nn.utils.vector_to_parameters(v3, params)
    v3:fill_(7)
    assert.tensor_near(params[1], v:narrow(1, 1, 12):view(4, 3), 0)
    assert.is_false(params[1]:equal(before))
    -- a longer vec: the rest is ignored (as torch); a float64 vec keeps float32 params
    nn.utils.vector_to_parameters(lunet.ones(v:numel() + 5, { dtype = 'float64' }), params)
    assert.equals('float32', params[1].dtype)
    assert.tensor_near(nn.utils.parameters_to_vector(params), lunet.ones(v:numel()), 0)
  end)

  it('refuse non-tensors, wrong vector shapes, too short a vector, an empty list', function()
    local ps = { lunet.zeros(2, 3), lunet.zeros(4) }
    errs('parameters_to_vector: expected a non-empty list of parameters', nn.utils.parameters_to_vector, {})
    errs('parameters_to_vector: parameters must be a tensor or a list of tensors, got number', nn.utils.parameters_to_vector, 3)
    errs('parameters_to_vector: parameter 2 is a string, expected a tensor', nn.utils.parameters_to_vector, { ps[1], 'x' })
    errs('vector_to_parameters: vec must be a tensor, got table', nn.utils.vector_to_parameters, { 1, 2 }, ps)
    errs('vector_to_parameters: vec must be 1-d, got 2-d {2,5}', nn.utils.vector_to_parameters, lunet.zeros(2, 5), ps)
    errs('vector_to_parameters: vec has 9 elements, the parameters 10', nn.utils.vector_to_parameters, lunet.zeros(9), ps)
    assert.same({ 6 }, nn.utils.parameters_to_vector(ps[1]):size())
  end)

  it('refuse parameters on two devices, as torch', function()
    lunet.set_cpu_devices(2)
    finally(function() lunet.set_cpu_devices(1) end)
    local ps = { lunet.zeros(2), lunet.zeros(3, { device = 'cpu:1' }) }
    errs('parameters_to_vector: found two parameters on different devices (cpu:0 and cpu:1, parameter 2)',
      nn.utils.parameters_to_vector, ps)
    errs('vector_to_parameters: found two parameters on different devices (cpu:0 and cpu:1, parameter 2)',
      nn.utils.vector_to_parameters, lunet.zeros(5), ps)
  end)
end)
