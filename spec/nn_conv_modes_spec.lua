-- nn.Conv1d/2d/3d's padding modes ('reflect', 'replicate', 'circular') and
-- the transposed convolutions' output_size against PyTorch 1.13: outputs
-- and float64 gradients of the input, weight and bias from
-- spec/fixtures/conv_modes.safetensors (tools/gen_conv_modes_fixtures.py);
-- F.pad of any rank; a sample alone (torch 1.13 pads only batches) against the batch's row;
-- the fused inference path stays off for a padding mode; printing; errors.
local lunet = require 'lunet'
local json = require 'lunet.json'
local fx = require 'support.fixtures'
local nn = lunet.nn

local here = debug.getinfo(1, 'S').source:match('^@(.*/)') or './'
local data, meta = lunet.load(here .. 'fixtures/conv_modes.safetensors')
local cases = json.decode(meta.cases)

local function module_of(case)
  local opts = { dtype = 'float64' }
  for k, v in pairs(case.opts) do opts[k] = v end
  local m = nn[case.module](case.cin, case.cout, case.k, opts)
  lunet.no_grad(function()
    m.weight:copy_(data[case.name .. '.weight'])
    m.bias:copy_(data[case.name .. '.bias'])
  end)
  return m
end

describe('convolution padding modes and output_size against PyTorch', function()
  for _, case in ipairs(cases) do
    if case.module == 'pad' then
      it(case.name, function()
        local x = data[case.name .. '.x']:clone():requires_grad_()
        local value = case.value ~= json.null and case.value or nil
        local out = nn.functional.pad(x, case.pad, case.mode, value)
        assert.same(data[case.name .. '.out']:size(), out:size())
        assert.is_true(fx.maxdiff(out, data[case.name .. '.out']) < 1e-12, case.name .. ' output')
        local loss = (out * data[case.name .. '.dout']):sum()
        loss:backward()
        assert.is_true(fx.maxdiff(x.grad, data[case.name .. '.dx']) < 1e-12, case.name .. ' dx')
      end)
    else it(case.name, function()
      local m = module_of(case)
      local x = data[case.name .. '.x']:clone():requires_grad_()
      local out = m(x, case.output_size ~= json.null and case.output_size or nil)
      assert.same(data[case.name .. '.out']:size(), out:size())
      assert.is_true(fx.maxdiff(out, data[case.name .. '.out']) < 1e-10, case.name .. ' output')
      local loss = (out * data[case.name .. '.dout']):sum()
      loss:backward()
      assert.is_true(fx.maxdiff(x.grad, data[case.name .. '.dx']) < 1e-10, case.name .. ' dx')
      assert.is_true(fx.maxdiff(m.weight.grad, data[case.name .. '.dweight']) < 1e-10, case.name .. ' dweight')
      assert.is_true(fx.maxdiff(m.bias.grad, data[case.name .. '.dbias']) < 1e-10, case.name .. ' dbias')
    end) end
  end

  it('a sample alone gives its row of the batch (modes and output_size)', function()
    local seen = 0
    for _, case in ipairs(cases) do if case.module ~= 'pad' then
      local m = module_of(case)
      local x = data[case.name .. '.x']
      local size = case.output_size ~= json.null and case.output_size or nil
      local row = lunet.no_grad(function() return m(x, size)[1] end)
      local alone = lunet.no_grad(function() return m(x[1], size) end)
      assert.same(row:size(), alone:size())
      assert.is_true(fx.maxdiff(row, alone) < 1e-12, case.name)
      seen = seen + 1
    end end
    assert.equal(27, seen)
    -- and with zero padding, functional forms too (F.conv2d, F.conv_transpose2d take (C, H, W) now)
    local x, w = lunet.randn(2, 3, 6, 6, { dtype = 'float64' }), lunet.randn(4, 3, 3, 3, { dtype = 'float64' })
    local F = nn.functional
    assert.is_true(fx.maxdiff(F.conv2d(x, w, nil, { padding = 1 })[2], F.conv2d(x[2], w, nil, { padding = 1 })) < 1e-12)
    local wt = lunet.randn(3, 2, 3, 3, { dtype = 'float64' })
    assert.is_true(fx.maxdiff(F.conv_transpose2d(x, wt, nil, { stride = 2 })[1],
      F.conv_transpose2d(x[1], wt, nil, { stride = 2 })) < 1e-12)
    local m = nn.Conv2d(3, 4, 3, { stride = 2, dtype = 'float64' })
    assert.same({ 4, 2, 2 }, m(x[1]):size())
  end)

  it('float32 matches float64 to float32 precision', function()
    local case = cases[1]
    local m = module_of(case)
    m:float()
    local out = m(data[case.name .. '.x']:float())
    assert.equal('float32', out.dtype)
    assert.is_true(fx.maxdiff(out, data[case.name .. '.out']) < 1e-4)
  end)

  it('conv -> batch norm fuses only with zero padding', function()
    local Conv2d = require 'lunet.nn.Conv2d'
    local bn = nn.BatchNorm2d(4):eval()
    assert.is_true(Conv2d.fusable(nn.Conv2d(3, 4, 3, { padding = 1 }), bn))
    assert.is_false(Conv2d.fusable(nn.Conv2d(3, 4, 3, { padding = 1, padding_mode = 'reflect' }), bn))
    local m = nn.Sequential { nn.Conv2d(3, 4, 3, { padding = 1, padding_mode = 'circular' }), bn }
    m:eval()
    local x = lunet.randn(2, 3, 5, 5)
    local want = bn(m[1](x))
    assert.is_true(fx.maxdiff(m(x), want) < 1e-5)
  end)

  it('prints the mode', function()
    assert.matches('^nn.Conv2d%(3 %-> 4, 3x3, pad 1, reflect%)',
      tostring(nn.Conv2d(3, 4, 3, { padding = 1, padding_mode = 'reflect' })))
    assert.matches('^nn.Conv1d%(3 %-> 4, 3, pad same, circular, no bias%)',
      tostring(nn.Conv1d(3, 4, 3, { padding = 'same', padding_mode = 'circular', bias = false })))
    assert.matches('^nn.Conv3d%(2 %-> 2, 3x3x3, pad 1x0x2, replicate%)',
      tostring(nn.Conv3d(2, 2, 3, { padding = { 1, 0, 2 }, padding_mode = 'replicate' })))
  end)

  it('errors', function()
    assert.matches("nn.Conv2d: padding_mode 'mirror' is not supported %('zeros', 'reflect', 'replicate' or 'circular'%)",
      fx.err_of(nn.Conv2d, 3, 4, 3, { padding_mode = 'mirror' }))
    assert.matches("nn.ConvTranspose3d: padding_mode 'reflect' is not supported %(only 'zeros'",
      fx.err_of(nn.ConvTranspose3d, 3, 4, 3, { padding_mode = 'reflect' }))
    -- reflect needs each pad below the dim's size: F.pad says so, by name
    local m = nn.Conv1d(1, 1, 3, { padding = 4, padding_mode = 'reflect' })
    assert.matches('pad', fx.err_of(m, lunet.randn(1, 1, 3)))
    local t = nn.ConvTranspose3d(2, 2, 3, { stride = 2 })
    assert.matches('nn.ConvTranspose3d: output_size 20 must be between 7 and 8 for an input of size 3',
      fx.err_of(t, lunet.randn(1, 2, 3, 3, 3), { 20, 7, 7 }), 1, true)
    assert.matches('nn.ConvTranspose3d: output_size must be {D, H, W} or {N, C, D, H, W}, got 2 values',
      fx.err_of(t, lunet.randn(1, 2, 3, 3, 3), { 7, 7 }), 1, true)
    assert.matches("nn.Conv3d: padding='same' is not supported for strided convolutions",
      fx.err_of(nn.Conv3d, 2, 2, 3, { padding = 'same', stride = { 1, 2, 1 } }), 1, true)
  end)
end)
