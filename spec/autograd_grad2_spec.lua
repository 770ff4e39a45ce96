-- Double backward (autograd.grad with create_graph) through the layers of a
-- ResNet and friends against PyTorch 1.13: a BasicBlock critic's WGAN-GP
-- penalty and its gradient wrt the weights (batch norms in training, whose
-- fused batch_norm_relu / batch_norm_add_relu nodes then run, and in eval,
-- where the fused conv+bn kernel must not be taken), a MAML outer gradient,
-- batch norm Hessian-vector products, and a few layers' second derivatives,
-- from spec/fixtures/autograd_grad2.safetensors
-- (tools/gen_autograd_grad2_fixtures.py); then float64 finite differences of
-- the gradient of each layer (gradgradcheck-style) and the plain backward
-- left as it was.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local gradgrad = require 'support.gradgrad'
local A = lunet.autograd
local AF = A.functional
local nn = lunet.nn
local F = nn.functional

local T = fx.load_fixture('autograd_grad2')
local function get(name, k) return T[name .. '.' .. k] end
local function leaf(name, k) return get(name, k):clone():requires_grad_() end
local function close(a, b, tol)
  assert.are.same(b:size(), a:size())
  local d = fx.maxdiff(a, b) / math.max(b:abs():max():item(), 1)
  assert.is_true(d < (tol or 1e-9), ('differs by %g'):format(d))
end

describe('double backward against torch', function()
  -- nn.BasicBlock(2, 4, 2) with the case's weights -> mean over H, W -> linear
  local BLOCK = { conv1 = { 'conv1', 'weight' }, bn1w = { 'bn1', 'weight' }, bn1b = { 'bn1', 'bias' },
    conv2 = { 'conv2', 'weight' }, bn2w = { 'bn2', 'weight' }, bn2b = { 'bn2', 'bias' } }
  local function resblock(name, training)
    local blk = nn.BasicBlock(2, 4, 2, { dtype = 'float64' })
    local P = {}
    for k, where in pairs(BLOCK) do
      P[k] = leaf(name, k)
      blk[where[1]][where[2]] = P[k]
    end
    local sconv, sbn = blk.shortcut[1], blk.shortcut[2]
    P.sconv, P.sbnw, P.sbnb = leaf(name, 'sconv'), leaf(name, 'sbnw'), leaf(name, 'sbnb')
    sconv.weight, sbn.weight, sbn.bias = P.sconv, P.sbnw, P.sbnb
    P.lw, P.lb = leaf(name, 'lw'), leaf(name, 'lb')
    if not training then
      blk:eval()
      for i, bn in ipairs({ blk.bn1, blk.bn2, sbn }) do
        bn.running_mean, bn.running_var = get(name, 'stat' .. 2 * i - 1):clone(), get(name, 'stat' .. 2 * i):clone()
      end
    end
    return blk, P
  end

  for _, training in ipairs({ true, false }) do
    local name = training and 'resblock_gp_train' or 'resblock_gp_eval'
    it(name .. ': a BasicBlock critic\'s gradient penalty and its gradient wrt the weights', function()
      local blk, P = resblock(name, training)
      local x = leaf(name, 'x')
      local d = F.linear(blk(x):mean({ 3, 4 }), P.lw, P.lb)
      close(d, get(name, 'd'))
      local gx = A.grad(d:sum(), x, { create_graph = true })[1]
      close(gx, get(name, 'gx'))
      local gp = (gx:reshape(3, -1):norm(2, 2) - 1):pow(2):mean()
      close(gp, get(name, 'gp'))
      local keys = { 'conv1', 'bn1w', 'bn1b', 'conv2', 'bn2w', 'bn2b', 'sconv', 'sbnw', 'sbnb', 'lw' }
      local ins = {}
      for i, k in ipairs(keys) do ins[i] = P[k] end
      local ds = A.grad(gp, ins, { allow_unused = true })
      for i, k in ipairs(keys) do
        local want = get(name, 'd' .. k)
        close(ds[i] or want:mul(0), want)   -- (unused: torch's None, written as zeros)
      end
    end)
  end

  it('maml: an inner SGD step through conv, batch norm, depthwise conv; the outer gradient', function()
    local n = 'maml'
    local P = {}
    for i = 1, 7 do P[i] = leaf(n, 'p' .. i) end
    local function net(x, p)
      local h = F.conv2d(x, p[1], p[2], { padding = 1 })
      h = F.batch_norm_relu(h, nil, nil, p[3], p[4], true)
      h = F.conv2d(h, p[5], nil, { padding = 1, groups = 4 })
      return F.linear(F.adaptive_avg_pool2d(h, 1):flatten(2), p[6], p[7])
    end
    local inner = F.cross_entropy(net(get(n, 'xa'), P), get(n, 'ya'))
    local gs = A.grad(inner, P, { create_graph = true })
    local fast = {}
    for i = 1, 7 do
      close(gs[i], get(n, 'g' .. i))
      fast[i] = P[i] - gs[i] * 0.5
    end
    local outer = F.cross_entropy(net(get(n, 'xb'), fast), get(n, 'yb'))
    close(outer, get(n, 'outer'))
    local ds = A.grad(outer, P)
    for i = 1, 7 do close(ds[i], get(n, 'd' .. i)) end
  end)

  it('batch norm in training mode: Hessian-vector products', function()
    local n = 'bn_hvp'
    local c = get(n, 'c')
    local f = function(x, w, b) return (F.batch_norm(x, nil, nil, w, b, true):tanh() * c):sum() end
    local _, hv = AF.hvp(f, { get(n, 'x'), get(n, 'w'), get(n, 'b') }, { get(n, 'v1'), get(n, 'v2'), get(n, 'v3') })
    close(hv[1], get(n, 'hv1')); close(hv[2], get(n, 'hv2')); close(hv[3], get(n, 'hv3'))
    n = 'bn_hvp_2d'
    c = get(n, 'c')
    local f2 = function(x) return (F.batch_norm(x, nil, nil, nil, nil, true, 0.1, 1e-3):tanh() * c):sum() end
    local _, hv2 = AF.hvp(f2, get(n, 'x'), get(n, 'v'))
    close(hv2, get(n, 'hv'))
  end)

  it('layers: group_norm, layer_norm, gelu, elu, bilinear interpolate, adaptive_max_pool2d, grouped conv_transpose2d, instance_norm', function()
    local n = 'layers_gg'
    local layers = {
      group_norm = function(x) return F.group_norm(x, 2, lunet.linspace(0.5, 1.5, 4, { dtype = 'float64' })) end,
      layer_norm = function(x) return F.layer_norm(x, { 3, 3 }) end,
      gelu_tanh_elu = function(x) return F.gelu(x, 'tanh') + F.elu(x * 2) + F.gelu(x) end,
      interpolate_bilinear = function(x) return F.interpolate(x * x, { size = { 4, 5 }, mode = 'bilinear', align_corners = false }) end,
      adaptive_max_pool2d = function(x) return F.adaptive_max_pool2d(x * x * x, { 2, 2 }):pow(2) end,
      conv_transpose2d_groups = function(x)
        local w = lunet.linspace(-1, 1, 16, { dtype = 'float64' }):reshape(4, 1, 2, 2)
        return F.conv_transpose2d(x, w, nil, { stride = 2, groups = 2 }):tanh()
      end,
      instance_norm = function(x) return F.instance_norm(x * x) end,
    }
    for name, f in pairs(layers) do
      local x = leaf(n, 'x')
      local y = f(x)
      local c = lunet.linspace(-1, 1, y:numel(), { dtype = 'float64' }):reshape(y:size())
      local g = A.grad((y * c):sum(), x, { create_graph = true })[1]
      close(g, get(n, name .. '.g'))
      local d = A.grad((g * g):sum(), x)[1]
      local ok, e = pcall(close, d, get(n, name .. '.d'))
      assert(ok, name .. ': ' .. tostring(e))
    end
  end)
end)

-- second derivatives against finite differences of the first: gradcheck of
-- x -> d sum(f(x) * w) / d(inputs) (create_graph), as torch's gradgradcheck
describe('double backward of each layer (finite differences of the gradient)', function()
  lunet.manual_seed(11)
  local function r(...) return lunet.randn({ ... }, { dtype = 'float64' }):requires_grad_() end
  local function const(...) return lunet.randn({ ... }, { dtype = 'float64' }) end
  local x3, x4, x5 = r(2, 3, 4), r(2, 2, 3, 4), r(1, 2, 3, 4, 4)
  local t01 = lunet.rand({ 2, 3, 4 }, { dtype = 'float64' })
  local rm, rv = const(2) * 0.1, lunet.rand({ 2 }, { dtype = 'float64' }) + 0.5
  local ids = lunet.tensor({ { 1, 3 }, { 3, 2 } }, { dtype = 'int64' })
  local cases = {
    { 'batch_norm training, affine', function(a, w, b) return F.batch_norm(a, nil, nil, w, b, true) end, { x4, r(2), r(2) } },
    { 'batch_norm training, (N, C), no affine', function(a) return F.batch_norm(a, nil, nil, nil, nil, true):pow(2) end, { r(4, 3) } },
    { 'batch_norm training, non-contiguous input', function(a) return F.batch_norm(a:transpose(1, 3), nil, nil, nil, nil, true) end, { r(3, 2, 2) } },
    { 'batch_norm eval', function(a, w, b) return F.batch_norm(a * a, rm, rv, w, b, false):pow(2) end, { x4, r(2), r(2) } },
    { 'batch_norm_relu training', function(a, w, b) return F.batch_norm_relu(a, nil, nil, w, b, true) end, { x4, r(2), r(2) } },
    { 'batch_norm_relu eval', function(a, w) return F.batch_norm_relu(a * a, rm, rv, w, nil, false):pow(2) end, { x4, r(2) } },
    { 'batch_norm_add_relu training', function(a, res, w, b) return F.batch_norm_add_relu(a, res, nil, nil, w, b, true) end, { x4, r(2, 2, 3, 4), r(2), r(2) } },
    { 'layer_norm, group_norm, instance_norm', function(a, w, b) return F.layer_norm(a, { 4 }, w, b):sum(3) + F.group_norm(a * a, 3):sum(3) + F.instance_norm(a:pow(3)):sum(3) end, { x3, r(4), r(4) } },
    { 'embedding', function(w) return F.embedding(ids, w):pow(2) end, { r(4, 3) } },
    { 'gelu (both), elu, selu, celu', function(a) return F.gelu(a) + F.gelu(a, 'tanh') + F.elu(a) + F.selu(a) + F.celu(a, 0.7) end, { x3 } },
    { 'leaky_relu, hardtanh, relu6', function(a) return F.leaky_relu(a:pow(3), 0.1) + F.hardtanh(a:pow(3)) + F.relu6(a:pow(3) * 4) end, { x3 } },
    { 'silu, mish, softplus, logsigmoid', function(a) return F.silu(a) + F.mish(a) + F.softplus(a, 2, 1) + F.logsigmoid(a) end, { x3 } },
    { 'hardswish, hardsigmoid', function(a) return F.hardswish(a:pow(3) * 4) + F.hardsigmoid(a:pow(3) * 4) end, { x3 } },
    { 'softmax, log_softmax along dims 1 and 3', function(a) return F.softmax(a, 1) + F.log_softmax(a, 3) end, { x3 } },
    { 'dropout (the mask is kept)', function(a) lunet.manual_seed(3); return F.dropout(a * a, 0.5, true) end, { x3 } },
    { 'conv1d, conv_transpose1d', function(a, w, wt) return F.conv1d(a, w, nil, { padding = 1 }):sum(3) + F.conv_transpose1d(a, wt, nil, { stride = 2 }):sum(3) end, { x3, r(2, 3, 2), r(3, 2, 2) } },
    { 'conv3d stride, padding', function(a, w) return F.conv3d(a, w, nil, { padding = 1, stride = 2 }) end, { x5, r(2, 2, 2, 2, 2) } },
    { 'conv_transpose3d (fold), conv1d groups', function(a, w, b, wb) return F.conv_transpose3d(a, w, nil, { stride = 2 }):pow(2):sum() + F.conv1d(b, wb, nil, { groups = 2, padding = 1 }):pow(2):sum() end, { r(1, 2, 2, 2, 2), r(2, 2, 2, 2, 2), r(2, 4, 5), r(4, 2, 2) } },
    { 'fold, unfold', function(a, b) return F.fold(a * a, { 3, 4 }, 2):pow(2):sum() + F.unfold(b * b, 2):pow(2):sum() end, { r(1, 8, 6), r(1, 2, 3, 4) } },
    { 'conv2d groups 2, stride, dilation', function(a, w, b) return F.conv2d(a, w, b, { groups = 2, stride = { 1, 2 }, dilation = { 2, 1 }, padding = 1 }) end, { r(2, 4, 4, 5), r(4, 2, 2, 2), r(4) } },
    { 'depthwise conv2d', function(a, w) return F.conv2d(a, w, nil, { groups = 2, padding = 1 }):pow(2) end, { x4, r(2, 1, 3, 3) } },
    { 'conv_transpose2d groups 2, output_padding', function(a, w) return F.conv_transpose2d(a, w, nil, { groups = 2, stride = 2, padding = 1, output_padding = 1 }) end, { r(1, 4, 2, 3), r(4, 3, 2, 2) } },
    { 'max_pool1d, max_pool3d', function(a, b) return F.max_pool1d(a:pow(3), 2):pow(2):sum() + F.max_pool3d(b:pow(3), 2):pow(2):sum() end, { x3, x5 } },
    { 'avg_pool1d, avg_pool3d', function(a, b) return F.avg_pool1d(a * a, 2):pow(2):sum() + F.avg_pool3d(b * b, 2):pow(2):sum() end, { x3, x5 } },
    { 'adaptive pools 1d, 3d; adaptive max 2d', function(a, b, c)
      return F.adaptive_avg_pool1d(a * a, 3):pow(2):sum() + F.adaptive_max_pool1d(a:pow(3), 3):pow(2):sum()
        + F.adaptive_avg_pool3d(b * b, 2):pow(2):sum() + F.adaptive_max_pool3d(b:pow(3), 2):pow(2):sum()
        + F.adaptive_max_pool2d(c:pow(3), 2):pow(2):sum()
    end, { x3, x5, x4 } },
    { 'interpolate nearest, bilinear, bicubic, linear, trilinear', function(a, b, c)
      return F.interpolate(b * b, { size = 5, mode = 'linear' }):pow(2):sum()
        + F.interpolate(c * c, { size = { 3, 4, 5 }, mode = 'trilinear' }):pow(2):sum()
        + F.interpolate(a * a, { size = { 4, 5 }, mode = 'bicubic' }):pow(2):sum()
        + F.interpolate(a * a, { scale_factor = 2, mode = 'nearest' }):pow(2):sum()
        + F.interpolate(a * a, { size = { 5, 7 }, mode = 'bilinear' }):pow(2):sum()
        + F.interpolate(a * a, { size = { 5, 7 }, mode = 'bilinear', align_corners = true }):pow(2):sum()
    end, { x4, r(1, 2, 3), r(1, 1, 2, 3, 3) } },
    { 'binary_cross_entropy (with logits)', function(a) return F.binary_cross_entropy(a:sigmoid(), t01) + F.binary_cross_entropy_with_logits(a, t01, { reduction = 'none' }) end, { x3 } },
    { 'smooth_l1, huber, kl_div', function(a, b) return F.smooth_l1_loss(a * a, b, { reduction = 'none' }) + F.huber_loss(a * a, b, { reduction = 'none' }) + F.kl_div(a * a, b:sigmoid(), { reduction = 'batchmean' }) end, { x3, r(2, 3, 4) } },
    { 'cosine_similarity', function(a, b) return F.cosine_similarity(a, b) end, { x3, r(2, 3, 4) } },
  }
  gradgrad.each(it, cases)

  it('an empty batch through the grouped conv2d double backward', function()
    local x = lunet.zeros({ 0, 4, 3, 3 }, { dtype = 'float64' }):requires_grad_()
    local w = r(4, 2, 2, 2)
    local g = A.grad(F.conv2d(x, w, nil, { groups = 2 }):pow(2):sum(), w, { create_graph = true })[1]
    close(g, lunet.zeros({ 4, 2, 2, 2 }, { dtype = 'float64' }))
    local gx = A.grad(F.conv_transpose2d(x, w, nil, { groups = 2 }):pow(2):sum(), w, { create_graph = true })[1]
    close(gx, lunet.zeros({ 4, 2, 2, 2 }, { dtype = 'float64' }))
  end)
end)

describe('double backward: the plain path and the pieces under it', function()
  it('an in-place op whose later argument requires grad is recorded (scatter_add_, index_add_)', function()
    local src = lunet.randn({ 2, 3 }, { dtype = 'float64' }):requires_grad_()
    local idx = lunet.tensor({ { 1, 2, 1 }, { 3, 3, 1 } }, { dtype = 'int64' })
    local z = lunet.zeros({ 2, 3 }, { dtype = 'float64' }):scatter_add_(2, idx, src)
    assert.is_true(z.requires_grad)
    local v = lunet.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = 'float64' })
    close(A.grad((z * v):sum(), src)[1], v:gather(2, idx))
    local z2 = lunet.zeros({ 4, 3 }, { dtype = 'float64' }):index_add_(1, lunet.tensor({ 2, 2 }, { dtype = 'int64' }), src)
    assert.is_true(z2.requires_grad)
    close(A.grad(z2:sum(), src)[1], lunet.ones({ 2, 3 }, { dtype = 'float64' }))
  end)

  it('the plain backward of batch norm and grouped conv2d records nothing', function()
    local x = lunet.randn({ 2, 4, 3, 3 }, { dtype = 'float64' }):requires_grad_()
    local w = lunet.randn({ 4, 2, 2, 2 }, { dtype = 'float64' }):requires_grad_()
    local bw = lunet.ones({ 4 }, { dtype = 'float64' }):requires_grad_()
    F.batch_norm_relu(F.conv2d(x, w, nil, { groups = 2 }), nil, nil, bw, nil, true):sum():backward()
    assert.is_false(x.grad.requires_grad); assert.is_false(w.grad.requires_grad); assert.is_false(bw.grad.requires_grad)
  end)

  it('an eval BasicBlock with an input that requires grad runs the differentiable composition', function()
    local blk = nn.BasicBlock(2, 2, 1, { dtype = 'float64' }):eval()
    local x = lunet.randn({ 1, 2, 4, 4 }, { dtype = 'float64' })
    local y0 = blk(x)   -- (nothing requires grad: the fused kernel)
    local xr = x:clone():requires_grad_()
    local y = blk(xr)
    close(y, y0)
    local g = A.grad(y:pow(2):sum(), xr, { create_graph = true })[1]
    assert.is_true(g.requires_grad)
    local h = A.grad(g:pow(2):sum(), blk.conv1.weight)[1]
    assert.are.same({ 2, 2, 3, 3 }, h:size())
  end)
end)
