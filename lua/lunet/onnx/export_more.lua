-- More emitters of lunet.onnx.export (see export_emit.lua): 1-d and 3-d
-- pools, Upsample in every mode torch exports (Resize), the activations
-- torch 1.13 decomposes at opset 13 (Hardswish, Hardsigmoid, SiLU, GELU,
-- Mish), PReLU, Softplus, LayerNorm (ReduceMean ... as torch writes it),
-- Embedding (Gather, of the 1-based indices less 1), AdaptiveMaxPool2d(1),
-- and lunet.models' AlexNet, VGG, SqueezeNet and MobileNetV2.
local lunet = require 'lunet'
local options = require 'lunet.options'

return function(M, E, h)
  local node, init, constant, key, float = M.node, h.init, h.constant, h.key, h.float
  local function fail(msg) options.fail('onnx.export', msg) end
  local function list(v, nd)
    local out = {}
    for i = 1, nd do out[i] = type(v) == 'table' and v[i] or v end
    return out
  end

  -- pools of nd spatial dims (the 2-d ones are in export_layers.lua)
  local function max_pool(nd)
    return function(ctx, m, path, xn, x)
      if m.return_indices then fail(('%s at %s: return_indices is not supported'):format(m.__name, path:sub(2))) end
      local k, s, p, d = list(m.kernel_size, nd), list(m.stride, nd), list(m.padding, nd), list(m.dilation or 1, nd)
      local pads = {}
      for i = 1, nd do pads[i], pads[i + nd] = p[i], p[i] end
      local attrs = { ceil_mode = m.ceil_mode and 1 or 0, kernel_shape = k, pads = pads, strides = s }
      for i = 1, nd do if d[i] ~= 1 then attrs.dilations = d end end
      return node(ctx, 'MaxPool', path, { xn }, attrs), m(x)
    end
  end
  -- (torch pads explicitly when the padding counts, as for 2-d)
  local function avg_pool(nd)
    return function(ctx, m, path, xn, x)
      local k, s, p = list(m.kernel_size, nd), list(m.stride, nd), list(m.padding, nd)
      local attrs = { ceil_mode = m.ceil_mode and 1 or 0, kernel_shape = k, strides = s, pads = {} }
      local pads = {}
      for i = 1, nd do pads[i], pads[i + nd], attrs.pads[i], attrs.pads[i + nd] = p[i], p[i], 0, 0 end
      if m.count_include_pad then
        local full = { 0, 0 }
        for i = 1, nd do full[#full + 1] = p[i] end
        full[#full + 1], full[#full + 2] = 0, 0
        for i = 1, nd do full[#full + 1] = p[i] end
        xn = node(ctx, 'Pad', path, { xn, constant(ctx, path, lunet.tensor(full, { dtype = 'int64' })) },
          { mode = 'constant' })
      else
        attrs.pads = pads
      end
      return node(ctx, 'AveragePool', path, { xn }, attrs), m(x)
    end
  end
  E['nn.MaxPool1d'], E['nn.MaxPool3d'] = max_pool(1), max_pool(3)
  E['nn.AvgPool1d'], E['nn.AvgPool3d'] = avg_pool(1), avg_pool(3)

  E['nn.AdaptiveMaxPool2d'] = function(ctx, m, path, xn, x)
    local y = m(x)
    if m.return_indices or y:size(-1) ~= 1 or y:size(-2) ~= 1 then
      fail(('nn.AdaptiveMaxPool2d at %s: only output size 1 without indices is supported'):format(path:sub(2)))
    end
    local k = { x:size(-2), x:size(-1) }
    return node(ctx, 'MaxPool', path, { xn }, { kernel_shape = k, pads = { 0, 0, 0, 0 }, strides = k }), y
  end

  local RESIZE = { nearest = 'nearest', linear = 'linear', bilinear = 'linear', trilinear = 'linear' }
  E['nn.Upsample'] = function(ctx, m, path, xn, x)
    local mode = RESIZE[m.mode]
    if not mode then fail(('%s at %s: mode %s is not supported'):format(m.__name, path:sub(2), m.mode)) end
    local y, r = m(x), x:dim()
    local attrs = { coordinate_transformation_mode = mode == 'nearest' and 'asymmetric'
      or (m.align_corners and 'align_corners' or 'half_pixel'), cubic_coeff_a = float(-0.75), mode = mode,
      nearest_mode = 'floor' }
    if m.scale_factor then
      local s = { 1, 1 }
      for i = 3, r do s[i] = type(m.scale_factor) == 'table' and m.scale_factor[i - 2] or m.scale_factor end
      return node(ctx, 'Resize', path, { xn, '', constant(ctx, path, lunet.tensor(s)) }, attrs), y
    end
    -- (a size: the input's N and C, then the size, as torch writes it)
    local sizes = {}
    for i = 3, r do sizes[i - 2] = y:size(i) end
    local shape = node(ctx, 'Shape', path, { xn }, {})
    local function c(v) return constant(ctx, path, lunet.tensor(v, { dtype = 'int64' })) end
    local nc = node(ctx, 'Slice', path, { shape, c({ 0 }), c({ 2 }), c({ 0 }) }, {})
    local full = node(ctx, 'Concat', path, { nc, c(sizes) }, { axis = 0 })
    return node(ctx, 'Resize', path, { xn, '', '', full }, attrs), y
  end

  -- chains of nodes on xn: step(op, inputs) with '$' for the running value
  local function chain(ctx, path, xn, steps)
    local cur = xn
    for _, st in ipairs(steps) do
      local ins = {}
      for i, v in ipairs(st[2]) do
        if v == '$' then ins[i] = cur elseif v == 'x' then ins[i] = xn
        elseif type(v) == 'number' then ins[i] = constant(ctx, path, lunet.tensor(v)) else ins[i] = v end
      end
      cur = node(ctx, st[1], path, ins, st[3] or {})
    end
    return cur
  end

  local sixth = { alpha = float(1 / 6) }
  E['nn.Hardsigmoid'] = function(ctx, m, path, xn, x) return chain(ctx, path, xn, { { 'HardSigmoid', { '$' }, sixth } }), m(x) end
  E['nn.Hardswish'] = function(ctx, m, path, xn, x)
    return chain(ctx, path, xn, { { 'HardSigmoid', { '$' }, sixth }, { 'Mul', { 'x', '$' } } }), m(x)
  end
  E['nn.SiLU'] = function(ctx, m, path, xn, x) return chain(ctx, path, xn, { { 'Sigmoid', { '$' } }, { 'Mul', { 'x', '$' } } }), m(x) end
  E['nn.Mish'] = function(ctx, m, path, xn, x)
    return chain(ctx, path, xn, { { 'Softplus', { '$' } }, { 'Tanh', { '$' } }, { 'Mul', { 'x', '$' } } }), m(x)
  end
  E['nn.GELU'] = function(ctx, m, path, xn, x)
    if m.approximate == 'tanh' then
      -- 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      return chain(ctx, path, xn, { { 'Mul', { 'x', 'x' } }, { 'Mul', { 'x', '$' } }, { 'Mul', { '$', 0.044715 } },
        { 'Add', { 'x', '$' } }, { 'Mul', { '$', math.sqrt(2 / math.pi) } }, { 'Tanh', { '$' } },
        { 'Add', { '$', 1 } }, { 'Mul', { 'x', '$' } }, { 'Mul', { '$', 0.5 } } }), m(x)
    end
    return chain(ctx, path, xn, { { 'Div', { '$', math.sqrt(2) } }, { 'Erf', { '$' } }, { 'Add', { '$', 1 } },
      { 'Mul', { 'x', '$' } }, { 'Mul', { '$', 0.5 } } }), m(x)
  end
  E['nn.Softplus'] = function(ctx, m, path, xn, x)
    if m.beta ~= 1 then fail(('nn.Softplus at %s: beta other than 1 is not supported'):format(path:sub(2))) end
    return chain(ctx, path, xn, { { 'Softplus', { '$' } } }), m(x)
  end
  E['nn.PReLU'] = function(ctx, m, path, xn, x)
    local w = m.weight:detach()
    if w:numel() > 1 then
      local shape = { w:numel() }
      for i = 3, x:dim() do shape[i - 1] = 1 end
      w = w:reshape(shape)
    end
    return node(ctx, 'PRelu', path, { xn, init(ctx, key(path, 'weight'), w) }, {}), m(x)
  end

  -- (x - mean) / sqrt(var + eps) * w + b over the last dims, as torch writes it
  E['nn.LayerNorm'] = function(ctx, m, path, xn, x)
    local axes = {}
    for i = #m.normalized_shape, 1, -1 do axes[#axes + 1] = -i end
    local mean = node(ctx, 'ReduceMean', path, { xn }, { axes = axes })
    local d = node(ctx, 'Sub', path, { xn, mean }, {})
    local v = chain(ctx, path, d, { { 'Pow', { '$', 2 } }, { 'ReduceMean', { '$' }, { axes = axes } },
      { 'Add', { '$', m.eps } }, { 'Sqrt', { '$' } } })
    local out = node(ctx, 'Div', path, { d, v }, {})
    if m.weight then out = node(ctx, 'Mul', path, { out, init(ctx, key(path, 'weight'), m.weight:detach()) }, {}) end
    if m.bias then out = node(ctx, 'Add', path, { out, init(ctx, key(path, 'bias'), m.bias:detach()) }, {}) end
    return out, m(x)
  end

  E['nn.Embedding'] = function(ctx, m, path, xn, x)
    if m.max_norm then fail(('nn.Embedding at %s: max_norm is not supported'):format(path:sub(2))) end
    -- (lunet's indices are 1-based, ONNX's 0-based: the file takes lunet's)
    local one = constant(ctx, path, lunet.tensor(1, { dtype = x.dtype }))
    local idx = node(ctx, 'Sub', path, { xn, one }, {})
    return node(ctx, 'Gather', path, { init(ctx, key(path, 'weight'), m.weight:detach()), idx }, {}), m(x)
  end

  -- lunet.models whose forward is a few lines of Lua: the same walk by hand
  -- (models.DenseNet has its own :onnx_export methods: models/densenet.lua)
  local function flatten(ctx, path, xn, x) return node(ctx, 'Flatten', path .. '/flatten', { xn }, { axis = 1 }), x:flatten(2) end
  local function pooled_classifier(ctx, m, path, xn, x, pool)
    xn, x = M.module(ctx, m.features, path .. '/features', xn, x)
    if pool then xn, x = M.module(ctx, m[pool], path .. '/' .. pool, xn, x)
    else xn, x = node(ctx, 'GlobalAveragePool', path, { xn }, {}), x:mean({ 3, 4 }, true) end
    xn, x = flatten(ctx, path, xn, x)
    return M.module(ctx, m.classifier, path .. '/classifier', xn, x)
  end
  E['models.AlexNet'] = function(ctx, m, path, xn, x) return pooled_classifier(ctx, m, path, xn, x, 'avgpool') end
  E['models.VGG'] = E['models.AlexNet']
  E['models.MobileNetV2'] = function(ctx, m, path, xn, x) return pooled_classifier(ctx, m, path, xn, x) end
  E['models.SqueezeNet'] = function(ctx, m, path, xn, x)
    xn, x = M.module(ctx, m.features, path .. '/features', xn, x)
    xn, x = M.module(ctx, m.classifier, path .. '/classifier', xn, x)
    return flatten(ctx, path, xn, x)
  end
  E['models.InvertedResidual'] = function(ctx, m, path, xn, x)
    local yn, y = M.module(ctx, m.conv, path .. '/conv', xn, x)
    if not m.use_res_connect then return yn, y end
    return node(ctx, 'Add', path, { xn, yn }, {}), x + y
  end
  E['models.Fire'] = function(ctx, m, path, xn, x)
    local sn, s = M.module(ctx, m.squeeze, path .. '/squeeze', xn, x)
    sn, s = M.module(ctx, m.squeeze_activation, path .. '/squeeze_activation', sn, s)
    local an, a = M.module(ctx, m.expand1x1, path .. '/expand1x1', sn, s)
    an, a = M.module(ctx, m.expand1x1_activation, path .. '/expand1x1_activation', an, a)
    local bn, b = M.module(ctx, m.expand3x3, path .. '/expand3x3', sn, s)
    bn, b = M.module(ctx, m.expand3x3_activation, path .. '/expand3x3_activation', bn, b)
    return node(ctx, 'Concat', path, { an, bn }, { axis = 1 }), lunet.cat({ a, b }, 2)
  end
end
