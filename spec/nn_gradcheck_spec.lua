-- Every layer's gradients against central finite differences in float64.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local function leaf(...) return lunet.randn(...):to('float64'):requires_grad_() end
local function check(f, inputs, opts)
  local ok, msg = gradcheck(f, inputs, opts)
  assert(ok, msg)
end

describe('nn gradcheck (float64)', function()
  lunet.manual_seed(2)

  it('conv2d: stride, padding, dilation, groups, same, no bias', function()
    local x, w, b = leaf(2, 4, 5, 6), leaf(6, 2, 3, 2), leaf(6)
    check(function(x, w, b) return F.conv2d(x, w, b, { stride = { 2, 1 }, padding = { 1, 0 }, groups = 2 }) end, { x, w, b })
    local w2 = leaf(3, 4, 2, 2)
    check(function(x, w) return F.conv2d(x, w, nil, { padding = 'same', dilation = { 1, 2 } }) end, { x, w2 })
    check(function(x, w) return F.conv2d(x, w, nil, { padding = 2, dilation = 2, stride = 2 }) end, { x, w2 })
  end)

  it('pooling', function()
    local x = leaf(1, 2, 7, 6)
    check(function(x) return F.max_pool2d(x, 3, { stride = 2, padding = 1 }) end, { x })
    check(function(x) return F.max_pool2d(x, 2, { ceil_mode = true }) end, { x })
    check(function(x) return F.avg_pool2d(x, 3, { stride = 2, padding = 1, count_include_pad = false }) end, { x })
    check(function(x) return F.avg_pool2d(x, { 2, 3 }, { ceil_mode = true }) end, { x })
    check(function(x) return F.adaptive_avg_pool2d(x, { 3, 4 }) end, { x })
    check(function(x) return F.pad(x, { 1, 2, 0, 1 }) end, { x })
    for _, mode in ipairs({ 'reflect', 'replicate', 'circular' }) do
      check(function(x) return F.pad(x, { 2, 1, 1, 2 }, mode) end, { x })
    end
    check(function(x) return F.pad(x, { 1, 1 }, { value = -2 }) end, { x })
  end)

  it('batch norm in training and eval', function()
    local x, w, b = leaf(3, 2, 2, 3), leaf(2), leaf(2)
    local rm, rv = lunet.zeros(2, { dtype = 'float64' }), lunet.ones(2, { dtype = 'float64' })
    check(function(x, w, b) return F.batch_norm(x, nil, nil, w, b, true, 0.1, 1e-5) end, { x, w, b })
    check(function(x, w, b) return F.batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5) end, { x, w, b })
    local x2 = leaf(4, 3)
    check(function(x) return F.batch_norm(x, nil, nil, nil, nil, true, 0.1, 1e-5) end, { x2 })
  end)

  it('batch norm fused with relu, in training and eval', function()
    local x, w, b = leaf(3, 2, 2, 3), leaf(2), leaf(2)
    local rm, rv = lunet.zeros(2, { dtype = 'float64' }), lunet.ones(2, { dtype = 'float64' })
    check(function(x, w, b) return F.batch_norm_relu(x, nil, nil, w, b, true, 0.1, 1e-5) end, { x, w, b })
    check(function(x, w, b) return F.batch_norm_relu(x, rm, rv, w, b, false, 0.1, 1e-5) end, { x, w, b })
    check(function(x) return F.batch_norm_relu(x, nil, nil, nil, nil, true, 0.1, 1e-5) end, { leaf(4, 3) })
  end)

  it('batch norm fused with a residual add and relu, in training and eval', function()
    local x, r, w, b = leaf(3, 2, 2, 3), leaf(3, 2, 2, 3), leaf(2), leaf(2)
    local rm, rv = lunet.zeros(2, { dtype = 'float64' }), lunet.ones(2, { dtype = 'float64' })
    check(function(x, r, w, b) return F.batch_norm_add_relu(x, r, nil, nil, w, b, true, 0.1, 1e-5) end, { x, r, w, b })
    check(function(x, r, w, b) return F.batch_norm_add_relu(x, r, rm, rv, w, b, false, 0.1, 1e-5) end, { x, r, w, b })
    -- the residual alone (no input gradient) and the input alone (a residual without one)
    local xc, rc = x:detach(), r:detach()
    check(function(r) return F.batch_norm_add_relu(xc, r, nil, nil, w:detach(), b:detach(), true, 0.1, 1e-5) end, { r })
    check(function(x) return F.batch_norm_add_relu(x, rc, nil, nil, nil, nil, true, 0.1, 1e-5) end, { x })
  end)

  it('softmax, log_softmax and the losses', function()
    local x = leaf(4, 5)
    check(function(x) return F.softmax(x, 2) end, { x })
    check(function(x) return F.log_softmax(x, 1) end, { x })
    local t = lunet.tensor({ 1, 5, 3, 3 }, { dtype = 'int64' })
    local w = lunet.tensor({ 1, 2, 0.5, 1, 3 }, { dtype = 'float64' })
    check(function(x) return F.cross_entropy(x, t) end, { x })
    check(function(x) return F.cross_entropy(x, t, { weight = w, label_smoothing = 0.2 }) end, { x })
    check(function(x) return F.cross_entropy(x, t, { reduction = 'none', ignore_index = 3, label_smoothing = 0.1 }) end, { x })
    check(function(x) return F.nll_loss(x, t, { reduction = 'sum', weight = w }) end, { x })
    local y = leaf(4, 5)
    check(function(x, y) return F.mse_loss(x, y) end, { x, y })
    local p = lunet.rand(4, 5):to('float64')
    check(function(x) return F.binary_cross_entropy_with_logits(x, p, { pos_weight = w }) end, { x })
  end)

  it('linear and activations', function()
    local x, w, b = leaf(3, 4), leaf(2, 4), leaf(2)
    check(function(x, w, b) return F.linear(x, w, b) end, { x, w, b })
    check(function(x, w, b) return F.linear(x:view(3, 1, 4), w, b) end, { x, w, b })
    -- a 2-d input is one 'linear' node (no transpose and addmm nodes); only
    -- the inputs that require grad get one, with or without a bias
    local fixed_w, fixed_x = w:detach(), x:detach()
    check(function(x) return F.linear(x, fixed_w) end, { x })
    check(function(w, b) return F.linear(fixed_x, w, b) end, { w, b })
    check(function(x, w) return F.linear(x:t():t(), w:t():contiguous():t()) end, { x, w })
    assert.equal('linear', F.linear(x, w, b).grad_fn.name)
    check(function(x) return F.leaky_relu(x, 0.1) end, { x })
    check(function(x) return F.elu(x, 0.7) end, { x })
    check(function(x) return F.gelu(x) end, { x })
    check(function(x) return F.gelu(x, 'tanh') end, { x })
    check(function(x)
      lunet.manual_seed(9)   -- the same mask on every evaluation
      return F.dropout(x, 0.4, true)
    end, { x })
  end)

  it('modules: a BasicBlock in float64 (eval and training)', function()
    local blk = nn.BasicBlock(2, 3, 2):to('float64')
    local x = leaf(2, 2, 4, 4)
    check(function(x) return blk(x) end, { x })
    blk:eval()
    local params = blk:parameters()
    check(function(x, w) return blk(x) end, { x, params[1] })
  end)
end)
