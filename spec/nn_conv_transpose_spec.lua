-- nn.ConvTranspose2d and F.conv_transpose2d against PyTorch 1.13
-- (spec/fixtures/nn_conv_transpose.safetensors, written by
-- tools/gen_nn_conv_transpose_fixtures.py): forward and gradients in float32
-- to 1e-5 and float64 to 1e-9, as a module too; finite differences; repr,
-- init, training, no_grad, output_size and the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local fx, cases = fixtures.load_fixture('nn_conv_transpose')

local function get(case, k) return fx[case.name .. '.' .. k] end

local function fopts(o)
  return { stride = o.stride, padding = o.padding, output_padding = o.output_padding, groups = o.groups,
    dilation = o.dilation }
end

-- mode nil: F.conv_transpose2d; 'noncontig': the input transposed in memory;
-- 'module': an nn.ConvTranspose2d holding the fixture's weight and bias
local function check_case(case, dtype, tol, mode)
  local o = case.opts
  local t = {}
  for _, k in ipairs({ 'x', 'w', 'b' }) do
    local v = get(case, k)
    if v then t[k] = v:detach():to(dtype) end
  end
  if mode == 'noncontig' then
    t.x = t.x:transpose(3, 4):contiguous():transpose(3, 4)
    assert.is_false(t.x:is_contiguous())
  end
  t.x.requires_grad = true
  local out, grads
  if mode == 'module' then
    local m = nn.ConvTranspose2d(o.cin, o.cout, o.k, { stride = o.stride, padding = o.padding,
      output_padding = o.output_padding, groups = o.groups, dilation = o.dilation, bias = o.bias, dtype = dtype })
    assert.same(t.w:size(), m.weight:size())
    lunet.no_grad(function()
      m.weight:copy_(t.w)
      if t.b then m.bias:copy_(t.b) else assert.is_nil(m.bias) end
    end)
    out = m(t.x)
    grads = { x = t.x, w = m.weight, b = m.bias }
  else
    t.w.requires_grad = true
    if t.b then t.b.requires_grad = true end
    out = F.conv_transpose2d(t.x, t.w, t.b, fopts(o))
    grads = t
  end
  assert.same(get(case, 'out'):size(), out:size())
  assert.tensor_near(out, get(case, 'out'), tol)
  out:backward(get(case, 'dout'):to(dtype))
  for _, k in ipairs({ 'x', 'w', 'b' }) do
    local want = get(case, 'd' .. k)
    if want then
      assert.is_not_nil(grads[k].grad, case.name .. ': no gradient for ' .. k)
      assert.tensor_near(grads[k].grad, want, tol)
    end
  end
end

describe('conv_transpose2d vs PyTorch fixtures', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 10) end)
  for _, case in ipairs(cases) do
    it(case.name .. ' float32', function() check_case(case, 'float32', 1e-5) end)
    it(case.name .. ' float64', function() check_case(case, 'float64', 1e-9) end)
    it(case.name .. ' non-contiguous input', function() check_case(case, 'float32', 1e-5, 'noncontig') end)
    it(case.name .. ' as nn.ConvTranspose2d', function() check_case(case, 'float64', 1e-9, 'module') end)
  end

  it("PyTorch's positional form gives the same as the options", function()
    local case
    for _, c in ipairs(cases) do if c.name == 'ct_all' then case = c end end
    local o = case.opts
    local x, w, b = get(case, 'x'), get(case, 'w'), get(case, 'b')
    local y = F.conv_transpose2d(x, w, b, o.stride, o.padding, o.output_padding, o.groups, o.dilation)
    assert.tensor_near(y, get(case, 'out'), 1e-5)
    local m = nn.ConvTranspose2d(o.cin, o.cout, o.k, o.stride, o.padding, o.output_padding, o.groups, true, o.dilation)
    assert.same({ o.cin, o.cout / o.groups, o.k[1], o.k[2] }, m.weight:size())
    assert.same(o.output_padding, m.output_padding)
  end)
end)

describe('conv_transpose2d gradients against finite differences (float64)', function()
  local function leaf(...) return lunet.randn(...):to('float64'):requires_grad_() end
  local function check(f, inputs)
    local ok, msg = gradcheck(f, inputs)
    assert(ok, msg)
  end
  lunet.manual_seed(7)

  it('stride 2, padding, output_padding, groups 2, non-square kernel', function()
    local x, w, b = leaf(2, 4, 3, 3), leaf(4, 3, 3, 2), leaf(6)
    check(function(x, w, b)
      return F.conv_transpose2d(x, w, b, { stride = { 2, 1 }, padding = { 1, 0 }, output_padding = { 1, 0 }, groups = 2 })
    end, { x, w, b })
  end)

  it('dilation 2 with output_padding >= stride, no bias', function()
    local x, w = leaf(1, 2, 3, 4), leaf(2, 3, 2, 3)
    check(function(x, w)
      return F.conv_transpose2d(x, w, nil, { dilation = 2, padding = { 0, 1 }, output_padding = 1 })
    end, { x, w })
  end)
end)

describe('nn.ConvTranspose2d', function()
  it('prints as nn.Conv2d does: the options that differ from their defaults', function()
    assert.equal('nn.ConvTranspose2d(16 -> 8, 3x3)', nn.ConvTranspose2d(16, 8, 3):repr())
    assert.equal('nn.ConvTranspose2d(4 -> 6, 3x2, stride 2, pad 1x0, output_padding 1, dilation 2, groups 2, no bias)',
      nn.ConvTranspose2d(4, 6, { 3, 2 }, { stride = 2, padding = { 1, 0 }, output_padding = 1, dilation = 2,
        groups = 2, bias = false }):repr())
    local s = tostring(nn.ConvTranspose2d(2, 3, 2))
    assert.matches('nn.ConvTranspose2d(2 -> 3, 2x2)\n27 parameters', s, 1, true)   -- 2*3*2*2 + 3
  end)

  it("has PyTorch's weight shape and default init (fan_in from weight dim 2 * kH * kW)", function()
    lunet.manual_seed(3)
    local m = nn.ConvTranspose2d(16, 2, 3)
    assert.same({ 16, 2, 3, 3 }, m.weight:size())
    assert.same({ 2 }, m.bias:size())
    -- kaiming_uniform(a = sqrt(5)) and the bias: bound 1/sqrt(fan_in), fan_in = 2 * 3 * 3 (not 16 * 3 * 3)
    local bound = 1 / math.sqrt(18)
    local wmax = m.weight:abs():max():item()
    assert.is_true(wmax <= bound and wmax > 0.8 * bound, tostring(wmax))
    assert.is_true(m.bias:abs():max():item() <= bound)
    assert.is_true(m.weight.requires_grad and m.bias.requires_grad)
    local g = nn.ConvTranspose2d(4, 6, 2, { groups = 2, bias = false })
    assert.same({ 4, 3, 2, 2 }, g.weight:size())
    assert.is_nil(g.bias)
  end)

  it('trains inside nn.Sequential with SGD; parameters, state_dict', function()
    lunet.manual_seed(11)
    local net = nn.Sequential(nn.Conv2d(1, 4, 3, { stride = 2, padding = 1 }), nn.ReLU(),
      nn.ConvTranspose2d(4, 1, 3, { stride = 2, padding = 1, output_padding = 1 }))
    local ct = net:get(3)
    local params = ct:parameters()
    assert.equal(2, #params)
    assert.equal(ct.weight, params[1])
    assert.equal(ct.bias, params[2])
    local names = {}
    for i, e in ipairs(net:named_parameters()) do names[i] = e[1] end
    assert.same({ '0.weight', '0.bias', '2.weight', '2.bias' }, names)
    local x = lunet.randn(4, 1, 8, 8)
    local target = x * 0.5
    local opt = lunet.optim.SGD(net:parameters(), { lr = 0.05, momentum = 0.9 })
    local losses = {}
    for i = 1, 16 do   -- (8 steps gave 0.65-0.83 of the first loss, by seed)
      opt:zero_grad()
      local y = net(x)
      assert.same({ 4, 1, 8, 8 }, y:size())
      local loss = F.mse_loss(y, target)
      loss:backward()
      assert.is_not_nil(ct.weight.grad)
      opt:step()
      losses[i] = loss:item()
    end
    assert.is_true(losses[16] < 0.7 * losses[1], losses[1] .. ' -> ' .. losses[16])
    local sd = net:state_dict()
    assert.same({ 4, 1, 3, 3 }, sd['2.weight']:size())
    local copy = nn.Sequential(nn.Conv2d(1, 4, 3, { stride = 2, padding = 1 }), nn.ReLU(),
      nn.ConvTranspose2d(4, 1, 3, { stride = 2, padding = 1, output_padding = 1 }))
    copy:load_state_dict(sd)
    assert.tensor_near(copy(x), net(x), 0)
  end)

  it('records nothing under lunet.no_grad; the output needs no gradient when nothing does', function()
    local m = nn.ConvTranspose2d(3, 2, 3, { stride = 2 })
    local x = lunet.randn(1, 3, 4, 4)
    local y = lunet.no_grad(function() return m(x) end)
    assert.is_false(y.requires_grad)
    assert.is_true(m(x).requires_grad)
    local w, b = m.weight:detach(), m.bias:detach()
    assert.is_false(F.conv_transpose2d(x, w, b, { stride = 2 }).requires_grad)
    assert.tensor_near(F.conv_transpose2d(x, w, b, { stride = 2 }), y, 0)
  end)

  it("output_size picks the output_padding, as PyTorch's forward(input, output_size)", function()
    local m = nn.ConvTranspose2d(2, 3, 3, { stride = 3, padding = 1 })
    local x = lunet.randn(2, 2, 4, 5)
    assert.same({ 2, 3, 10, 13 }, m(x):size())
    local y = m(x, { 12, 14 })
    assert.same({ 2, 3, 12, 14 }, y:size())
    assert.tensor_near(y, F.conv_transpose2d(x, m.weight, m.bias, { stride = 3, padding = 1, output_padding = { 2, 1 } }), 0)
    assert.same({ 2, 3, 11, 13 }, m(x, { 2, 3, 11, 13 }):size())
    local ok, err = pcall(m, x, { 13, 13 })
    assert.is_false(ok)
    assert.matches('nn.ConvTranspose2d: output_size 13 must be between 10 and 12', err, 1, true)
  end)

  it('output_padding adds rows and columns that get only the bias', function()
    local x = lunet.ones(1, 1, 2, 2)
    local w = lunet.ones(1, 1, 2, 2)
    local b = lunet.tensor({ 0.5 })
    local y = F.conv_transpose2d(x, w, b, { dilation = 3, output_padding = 2 })   -- (2-1) + 3*(2-1) + 2 + 1 = 7
    assert.same({ 1, 1, 7, 7 }, y:size())
    assert.same({ 1.5, 1.5, 0.5, 1.5, 1.5, 0.5, 0.5 }, y[1][1][1]:totable())
    assert.same({ 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5 }, y[1][1][7]:totable())
  end)
end)

describe('conv_transpose2d errors', function()
  -- (a constructor called in a return statement is a tail call: its error
  -- then has no caller line, hence the locals below)
  local function err(f, ...)
    local ok, e = pcall(f, ...)
    assert.is_false(ok)
    return tostring(e)
  end

  it('wrong input channels, at the caller line', function()
    local m = nn.ConvTranspose2d(3, 2, 3)
    local e = err(function() return m(lunet.randn(1, 4, 5, 5)) end)
    assert.matches('conv_transpose2d: input {1,4,5,5} has 4 channels, weight {3,2,3,3} expects 3', e, 1, true)
    assert.matches('nn_conv_transpose_spec.lua', e)
    e = err(function() return F.conv_transpose2d(lunet.randn(3, 5), m.weight) end)
    assert.matches('conv_transpose2d: input must be 4-d, got 2-d {3,5}', e, 1, true)
    assert.matches('conv_transpose2d: bias has 3 elements, the output 2 channels',
      err(F.conv_transpose2d, lunet.randn(1, 3, 5, 5), m.weight, lunet.randn(3)), 1, true)
    assert.matches('conv_transpose2d: input (float64), weight (float32) must have the same dtype',
      err(F.conv_transpose2d, lunet.randn(1, 3, 5, 5):double(), m.weight), 1, true)
  end)

  it('output_padding not below stride or dilation', function()
    local e = err(function() local m = nn.ConvTranspose2d(3, 2, 3, { stride = 2, output_padding = 2 }); return m end)
    assert.matches('nn.ConvTranspose2d: output_padding 2 must be smaller than stride 2 or dilation 1', e, 1, true)
    assert.matches('nn_conv_transpose_spec.lua', e)
    e = err(function() return F.conv_transpose2d(lunet.randn(1, 1, 3, 3), lunet.randn(1, 1, 2, 2), nil,
      { stride = { 2, 1 }, output_padding = { 1, 1 } }) end)
    assert.matches('conv_transpose2d: output_padding must be smaller than stride or dilation, got output_padding 1, '
      .. 'stride {2, 1}, dilation 1', e, 1, true)
    assert.matches('nn_conv_transpose_spec.lua', e)
    assert.matches('nn.ConvTranspose2d: output_padding must be an integer >= 0',
      err(nn.ConvTranspose2d, 3, 2, 3, { stride = 2, output_padding = -1 }), 1, true)
  end)

  it('non-integer sizes', function()
    local e = err(function() local m = nn.ConvTranspose2d(3.5, 2, 3); return m end)
    assert.matches('nn.ConvTranspose2d: in_channels must be an integer >= 1, got 3.5', e, 1, true)
    assert.matches('nn_conv_transpose_spec.lua', e)
    assert.matches('nn.ConvTranspose2d: out_channels must be an integer >= 1, got 0', err(nn.ConvTranspose2d, 3, 0, 3), 1, true)
    assert.matches('nn.ConvTranspose2d: kernel_size must be an integer >= 1 or {h, w} of them, got {3, 1.5}',
      err(nn.ConvTranspose2d, 3, 2, { 3, 1.5 }), 1, true)
    assert.matches('nn.ConvTranspose2d: stride must be an integer >= 1', err(nn.ConvTranspose2d, 3, 2, 3, { stride = 0.5 }), 1, true)
    assert.matches('nn.ConvTranspose2d: in_channels 3 and out_channels 4 must be divisible by groups 2',
      err(nn.ConvTranspose2d, 3, 4, 3, { groups = 2 }), 1, true)
    assert.matches('conv_transpose2d: stride must be integers >= 1, got 1.5',
      err(F.conv_transpose2d, lunet.randn(1, 1, 3, 3), lunet.randn(1, 1, 2, 2), nil, { stride = 1.5 }), 1, true)
    assert.matches('conv_transpose2d: output_padding must be integers >= 0, got {0, 0.5}',
      err(F.conv_transpose2d, lunet.randn(1, 1, 3, 3), lunet.randn(1, 1, 2, 2), nil, { output_padding = { 0, 0.5 } }), 1, true)
    assert.matches('conv_transpose2d: groups must be an integer >= 1, got 1.5',
      err(F.conv_transpose2d, lunet.randn(1, 2, 3, 3), lunet.randn(2, 1, 2, 2), nil, { groups = 1.5 }), 1, true)
  end)

  it('unknown options, padding strings and padding_mode refused', function()
    local e = err(function() local m = nn.ConvTranspose2d(3, 2, 3, { output_pad = 1 }); return m end)
    assert.matches("nn.ConvTranspose2d: unknown option 'output_pad' (did you mean 'output_padding'?)", e, 1, true)
    assert.matches('nn_conv_transpose_spec.lua', e)
    assert.matches("conv_transpose2d: unknown option 'strides' (did you mean 'stride'?)",
      err(F.conv_transpose2d, lunet.randn(1, 1, 3, 3), lunet.randn(1, 1, 2, 2), nil, { strides = 2 }), 1, true)
    assert.matches("nn.ConvTranspose2d: option 'padding' must be a number or table, got string",
      err(nn.ConvTranspose2d, 3, 2, 3, { padding = 'same' }), 1, true)
    assert.matches("nn.ConvTranspose2d: padding_mode 'reflect' is not supported",
      err(nn.ConvTranspose2d, 3, 2, 3, { padding_mode = 'reflect' }), 1, true)
    assert.matches('conv_transpose2d: input {1,1,1,1} gives an empty output 0x0',
      err(F.conv_transpose2d, lunet.randn(1, 1, 1, 1), lunet.randn(1, 1, 2, 2), nil, { padding = 1 }), 1, true)
  end)

  it('any two values after the required arguments: built, run, or an error naming it (never a raw Lua one)', function()
    local vals = { 0, 1, -1, 2, 2.5, 1e300, 0 / 0, 'x', 'same', true, false, {}, { 1 }, { 1, 2 }, { 2, 0.5 },
      { a = 1 }, { padding = 'x' }, { stride = {} }, { stride = 2 }, { output_padding = 1 }, function() end, lunet.zeros(1) }
    local RAW = { 'attempt to ', 'bad argument #', 'cannot convert', 'table index is nil' }
    local x, w, b = lunet.randn(1, 2, 3, 3), lunet.randn(2, 2, 2, 2), lunet.randn(2)
    local calls, bad = 0, {}
    local function judge(what, name, ok, e)
      calls = calls + 1
      if ok then return end
      e = tostring(e)
      for _, r in ipairs(RAW) do if e:find(r, 1, true) then bad[#bad + 1] = what .. ': ' .. e; return end end
      -- (a forward's errors name the functional form, as nn.Conv2d's name conv2d)
      if not e:find(name, 1, true) and not (what == 'forward' and e:find('conv_transpose2d: ', 1, true)) then
        bad[#bad + 1] = what .. ': ' .. e
      end
    end
    for i = 1, #vals + 1 do
      for j = 1, #vals + 1 do
        local a, c = vals[i], vals[j]
        judge('ctor', 'nn.ConvTranspose2d: ', pcall(nn.ConvTranspose2d, 2, 2, 2, a, c))
        judge('F', 'conv_transpose2d: ', pcall(F.conv_transpose2d, x, w, b, a, c))
        judge('F x', 'conv_transpose2d: ', pcall(F.conv_transpose2d, a, c, b))
        judge('forward', 'ConvTranspose2d: ', pcall(nn.ConvTranspose2d(2, 2, 2, { stride = 2 }), a, c))
      end
    end
    assert.is_true(calls > 2000)
    assert.same({}, bad)
  end)
end)
