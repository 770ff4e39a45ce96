-- The layer emitters of lunet.onnx.export (see export_emit.lua): linear,
-- batch norm, activations, pools, flatten, softmax, dropout, upsampling, the
-- ResNet blocks and models.ResNet. Each writes what torch 1.13's exporter
-- writes for the torch module (eval mode, opset 13).
local lunet = require 'lunet'
local options = require 'lunet.options'

return function(M, E, h)
  local node, init, constant, key, pair, float = M.node, h.init, h.constant, h.key, h.pair, h.float
  local function fail(msg) options.fail('onnx.export', msg) end

  E['nn.Linear'] = function(ctx, m, path, xn, x)
    local y = m(x)
    if x:dim() == 2 then
      local w = init(ctx, key(path, 'weight'), m.weight:detach())
      local b = m.bias and init(ctx, key(path, 'bias'), m.bias:detach())
      return node(ctx, 'Gemm', path, { xn, w, b }, { alpha = float(1), beta = float(1), transB = 1 }), y
    end
    -- (other ranks: torch's MatMul on the transposed weight, then Add)
    local wt = init(ctx, key(path, 'weight_t'), m.weight:detach():t():contiguous())
    local out = node(ctx, 'MatMul', path, { xn, wt }, {})
    if m.bias then out = node(ctx, 'Add', path, { out, init(ctx, key(path, 'bias'), m.bias:detach()) }, {}) end
    return out, y
  end

  local function batch_norm(ctx, m, path, xn, x)
    if not (m.track_running_stats and m.running_mean) then
      fail(('%s at %s: a batch norm without running statistics cannot be exported'):format(m.__name, path:sub(2)))
    end
    local c = m.num_features
    local w = init(ctx, key(path, 'weight'), m.weight and m.weight:detach() or lunet.ones(c))
    local b = init(ctx, key(path, 'bias'), m.bias and m.bias:detach() or lunet.zeros(c))
    local mean = init(ctx, key(path, 'running_mean'), m.running_mean)
    local var = init(ctx, key(path, 'running_var'), m.running_var)
    return node(ctx, 'BatchNormalization', path, { xn, w, b, mean, var },
      { epsilon = float(m.eps), momentum = float(1 - (m.momentum or 0.1)) }), m(x)
  end
  E['nn.BatchNorm1d'], E['nn.BatchNorm2d'], E['nn.BatchNorm3d'] = batch_norm, batch_norm, batch_norm

  local function simple(op, attrs)
    return function(ctx, m, path, xn, x) return node(ctx, op, path, { xn }, attrs and attrs(m) or {}), m(x) end
  end
  E['nn.ReLU'], E['nn.Sigmoid'], E['nn.Tanh'] = simple('Relu'), simple('Sigmoid'), simple('Tanh')
  E['nn.LeakyReLU'] = simple('LeakyRelu', function(m) return { alpha = float(m.negative_slope) } end)
  E['nn.ELU'] = simple('Elu', function(m) return { alpha = float(m.alpha) } end)
  local function clip(lo, hi)
    return function(ctx, m, path, xn, x)
      local a = constant(ctx, path, lunet.tensor(lo(m)))
      local b = constant(ctx, path, lunet.tensor(hi(m)))
      return node(ctx, 'Clip', path, { xn, a, b }, {}), m(x)
    end
  end
  E['nn.ReLU6'] = clip(function() return 0 end, function() return 6 end)
  E['nn.Hardtanh'] = clip(function(m) return m.min_val end, function(m) return m.max_val end)

  local function identity(ctx, m, path, xn, x) return xn, x end
  for _, n in ipairs({ 'nn.Identity', 'nn.Dropout', 'nn.Dropout1d', 'nn.Dropout2d', 'nn.Dropout3d', 'nn.AlphaDropout',
    'nn.FeatureAlphaDropout' }) do
    E[n] = identity
  end

  E['nn.MaxPool2d'] = function(ctx, m, path, xn, x)
    local o = m.opts
    if o.return_indices then fail(('nn.MaxPool2d at %s: return_indices is not supported'):format(path:sub(2))) end
    local k = pair(m.kernel_size)
    local s, p, d = pair(o.stride or k), pair(o.padding or 0), pair(o.dilation or 1)
    local attrs = { ceil_mode = o.ceil_mode and 1 or 0, kernel_shape = k, pads = { p[1], p[2], p[1], p[2] }, strides = s }
    if d[1] ~= 1 or d[2] ~= 1 then attrs.dilations = d end
    return node(ctx, 'MaxPool', path, { xn }, attrs), m(x)
  end

  -- torch 1.13 pads explicitly (a Pad node, even of zeros) when the padding
  -- counts towards the average, and pools with pads 0
  E['nn.AvgPool2d'] = function(ctx, m, path, xn, x)
    local o = m.opts
    local k = pair(m.kernel_size)
    local s, p = pair(o.stride or k), pair(o.padding or 0)
    local attrs = { ceil_mode = o.ceil_mode and 1 or 0, kernel_shape = k, strides = s }
    if o.count_include_pad ~= false then
      local pads = constant(ctx, path, lunet.tensor({ 0, 0, p[1], p[2], 0, 0, p[1], p[2] }, { dtype = 'int64' }))
      xn = node(ctx, 'Pad', path, { xn, pads }, { mode = 'constant' })
      attrs.pads = { 0, 0, 0, 0 }
    else
      attrs.pads = { p[1], p[2], p[1], p[2] }
    end
    return node(ctx, 'AveragePool', path, { xn }, attrs), m(x)
  end

  E['nn.AdaptiveAvgPool2d'] = function(ctx, m, path, xn, x)
    local y = m(x)
    local oh, ow = y:size(-2), y:size(-1)
    local H, W = x:size(-2), x:size(-1)
    if oh == 1 and ow == 1 then return node(ctx, 'GlobalAveragePool', path, { xn }, {}), y end
    if H % oh ~= 0 or W % ow ~= 0 then
      fail(('nn.AdaptiveAvgPool2d at %s: output size %dx%d does not divide the input %dx%d'):format(path:sub(2), oh,
        ow, H, W))
    end
    local k = { H / oh, W / ow }
    return node(ctx, 'AveragePool', path, { xn }, { ceil_mode = 0, kernel_shape = k, pads = { 0, 0, 0, 0 },
      strides = k }), y
  end

  E['nn.Flatten'] = function(ctx, m, path, xn, x)
    local y, r = m(x), x:dim()
    local s, e = m.start_dim, m.end_dim
    if s < 0 then s = s + r + 1 end
    if e < 0 then e = e + r + 1 end
    if s == 2 and e == r then return node(ctx, 'Flatten', path, { xn }, { axis = 1 }), y end
    -- (other dims: a Reshape keeping the leading dims with 0)
    local shape = {}
    for i = 1, y:dim() do shape[i] = i < s and 0 or (i == s and -1 or y:size(i)) end
    local c = constant(ctx, path, lunet.tensor(shape, { dtype = 'int64' }))
    return node(ctx, 'Reshape', path, { xn, c }, {}), y
  end

  local function softmax(op)
    return function(ctx, m, path, xn, x)
      local d = m.dim
      return node(ctx, op, path, { xn }, { axis = d > 0 and d - 1 or d }), m(x)
    end
  end
  E['nn.Softmax'], E['nn.LogSoftmax'] = softmax('Softmax'), softmax('LogSoftmax')

  E['nn.Upsample'] = function(ctx, m, path, xn, x)
    if m.mode ~= 'nearest' or not m.scale_factor or x:dim() ~= 4 then
      fail(('nn.Upsample at %s: only mode nearest with a scale_factor on 4-d input is supported'):format(path:sub(2)))
    end
    local sf = pair(m.scale_factor)
    local scales = constant(ctx, path, lunet.tensor({ 1, 1, sf[1], sf[2] }))
    return node(ctx, 'Resize', path, { xn, '', scales }, { coordinate_transformation_mode = 'asymmetric',
      cubic_coeff_a = float(-0.75), mode = 'nearest', nearest_mode = 'floor' }), m(x)
  end

  -- conv -> bn folded when possible, else both
  local function conv_bn(ctx, c, bn, path, cname, bname, xn, x)
    if getmetatable(c) == require('lunet.nn.Conv2d') and h.bn_usable(bn) then
      return h.conv(ctx, c, path .. '/' .. cname, xn, x, bn)
    end
    xn, x = M.module(ctx, c, path .. '/' .. cname, xn, x)
    return M.module(ctx, bn, path .. '/' .. bname, xn, x)
  end

  -- out = relu(bn_n(conv_n(... relu(bn1(conv1(x))))) + shortcut(x))
  local function block(names, short)
    return function(ctx, m, path, xn, x)
      local y = m(x)
      local on, o = xn, x
      for i, pair_ in ipairs(names) do
        on, o = conv_bn(ctx, m[pair_[1]], m[pair_[2]], path, pair_[1], pair_[2], on, o)
        if i < #names then on, o = node(ctx, 'Relu', path .. '/relu', { on }, {}), o:relu() end
      end
      local sn = xn
      if m[short] then sn = M.module(ctx, m[short], path .. '/' .. short, xn, x) end
      local sum = node(ctx, 'Add', path, { on, sn }, {})
      return node(ctx, 'Relu', path .. '/relu', { sum }, {}), y
    end
  end
  E['nn.BasicBlock'] = block({ { 'conv1', 'bn1' }, { 'conv2', 'bn2' } }, 'shortcut')
  E['models.BasicBlock'] = block({ { 'conv1', 'bn1' }, { 'conv2', 'bn2' } }, 'downsample')
  E['models.Bottleneck'] = block({ { 'conv1', 'bn1' }, { 'conv2', 'bn2' }, { 'conv3', 'bn3' } }, 'downsample')
  E['models.ResNet'] = function(ctx, m, path, xn, x) return M.module(ctx, m:sequential(), path, xn, x) end
end
