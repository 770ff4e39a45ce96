-- The ONNX shape, softmax and constant ops of lunet.onnx.load (see ops.lua):
-- Flatten, Reshape, Concat, Dropout, Identity, Softmax, LogSoftmax, Pad,
-- Resize, Constant, and the shape arithmetic torch's x.view(x.size(0), -1)
-- exports to (Shape, Gather, Unsqueeze, Slice on int64 tensors).
local lunet = require 'lunet'
local F = require 'lunet.nn.functional'

return function(ops, h)
  local take, fail, dim, outputs = h.take, h.fail, h.dim, h.outputs

  local function ints(t) return t:to('cpu'):long():reshape(-1):tolist() end

  function ops.Identity(where, attrs) take(where, attrs, {}); return function(x) return x end end

  -- inference: the identity (a mask output is refused)
  function ops.Dropout(where, attrs, nin, nout)
    take(where, attrs, { ratio = false, seed = false, is_test = false })
    outputs(where, nout, 1)
    return function(x, ratio, training)
      if training and training:item() ~= 0 then fail(where, 'training_mode is not supported') end
      return x
    end
  end

  function ops.Flatten(where, attrs)
    local a = take(where, attrs, { axis = 1 })
    return function(x)
      local r = x:dim()
      local axis = a.axis < 0 and a.axis + r or a.axis
      if axis < 0 or axis > r then fail(where, ('axis %d is out of range for rank %d'):format(a.axis, r)) end
      local lead = 1
      for i = 1, axis do lead = lead * x:size(i) end
      local rest = 1
      for i = axis + 1, r do rest = rest * x:size(i) end
      return x:reshape(lead, rest)
    end
  end

  function ops.Reshape(where, attrs)
    local a = take(where, attrs, { allowzero = 0 })
    return function(x, shape)
      local s = ints(shape)
      for i = 1, #s do
        if s[i] == 0 and a.allowzero == 0 then
          if i > x:dim() then fail(where, ('shape entry %d is 0 but the input has rank %d'):format(i, x:dim())) end
          s[i] = x:size(i)
        end
      end
      return x:reshape(s)
    end
  end

  function ops.Concat(where, attrs)
    local a = take(where, attrs, { axis = false })
    if not a.axis then fail(where, 'axis is required') end
    return function(...)
      local list = { ... }
      return lunet.cat(list, dim(a.axis, list[1]:dim()))
    end
  end

  for op, fn in pairs({ Softmax = F.softmax, LogSoftmax = F.log_softmax }) do
    ops[op] = function(where, attrs, nin, nout, opset)
      local a = take(where, attrs, { axis = opset >= 13 and -1 or 1 })
      return function(x)
        local d = dim(a.axis, x:dim())
        -- (before opset 13 the op flattened dims axis.. into one)
        if opset < 13 and d ~= x:dim() then fail(where, 'opset < 13 with axis other than the last is not supported') end
        return fn(x, d)
      end
    end
  end

  local PAD_MODES = { constant = 'constant', reflect = 'reflect', edge = 'replicate' }
  function ops.Pad(where, attrs, nin, nout, opset)
    if opset < 11 then fail(where, 'Pad before opset 11 (pads as an attribute) is not supported') end
    local a = take(where, attrs, { mode = 'constant' })
    local mode = PAD_MODES[a.mode]
    if not mode then fail(where, ('mode %s is not supported'):format(a.mode)) end
    return function(x, pads, value, axes)
      if axes then fail(where, 'the axes input is not supported') end
      local p, r = ints(pads), x:dim()
      if #p ~= 2 * r then fail(where, ('pads has %d values for rank %d'):format(#p, r)) end
      local list = h.pad_list(p, r)
      while #list > 0 and list[#list] == 0 and list[#list - 1] == 0 do list[#list] = nil; list[#list] = nil end
      if #list == 0 then return x end
      if mode == 'constant' then return F.pad(x, list, 'constant', value and value:item() or 0) end
      return F.pad(x, list, mode)
    end
  end

  -- the Resize modes torch exports for nn.Upsample / F.interpolate, on
  -- (N, C, L), (N, C, H, W) and (N, C, D, H, W) inputs
  local LINEAR = { [3] = 'linear', [4] = 'bilinear', [5] = 'trilinear' }
  function ops.Resize(where, attrs, nin, nout, opset)
    if opset < 11 then fail(where, 'Resize before opset 11 is not supported') end
    local a = take(where, attrs, { coordinate_transformation_mode = 'half_pixel', cubic_coeff_a = -0.75,
      exclude_outside = 0, extrapolation_value = 0, mode = 'nearest', nearest_mode = 'round_prefer_floor' })
    local ctm, mode = a.coordinate_transformation_mode, a.mode
    local linear, align
    if mode == 'nearest' and ctm == 'asymmetric' and a.nearest_mode == 'floor' then linear = false
    elseif mode == 'linear' and (ctm == 'half_pixel' or ctm == 'pytorch_half_pixel') then linear, align = true, false
    elseif mode == 'linear' and ctm == 'align_corners' then linear, align = true, true
    else
      fail(where, ('mode %s with coordinate_transformation_mode %s%s is not supported'):format(mode, ctm,
        mode == 'nearest' and ' and nearest_mode ' .. a.nearest_mode or ''))
    end
    return function(x, roi, scales, sizes)
      local r = x:dim()
      if not LINEAR[r] then fail(where, ('a %d-d input is not supported (3-d to 5-d: N, C and 1 to 3 spatial dims)'):format(r)) end
      local o = { mode = linear and LINEAR[r] or 'nearest', align_corners = align }
      local out = {}
      if sizes and sizes:numel() > 0 then
        local s = ints(sizes)
        if #s ~= r then fail(where, ('sizes has %d values for rank %d'):format(#s, r)) end
        if s[1] ~= x:size(1) or s[2] ~= x:size(2) then fail(where, 'resizing the batch or channel dim is not supported') end
        o.size = { unpack(s, 3) }
        out = o.size
      elseif scales and scales:numel() > 0 then
        local s = scales:double():tolist()
        if #s ~= r then fail(where, ('scales has %d values for rank %d'):format(#s, r)) end
        if s[1] ~= 1 or s[2] ~= 1 then fail(where, 'scales on the batch or channel dim are not supported') end
        o.scale_factor = { unpack(s, 3) }
        for i = 3, r do out[i - 2] = math.floor(x:size(i) * s[i]) end
      else
        fail(where, 'needs scales or sizes')
      end
      if ctm == 'pytorch_half_pixel' then
        -- (an output of length 1 samples the first input, as align_corners
        -- does; torch's half pixel rule would sample the middle)
        local ones = 0
        for _, n in ipairs(out) do if n == 1 then ones = ones + 1 end end
        if ones == #out then o.align_corners = true
        elseif ones > 0 then fail(where, 'pytorch_half_pixel with some, not all, output lengths 1 is not supported') end
      end
      if not linear then o.align_corners = nil end
      return F.interpolate(x, o)
    end
  end

  function ops.Constant(where, attrs, nin, nout)
    local a = take(where, attrs, { value = false, value_float = false, value_int = false, value_floats = false,
      value_ints = false })
    local v = a.value
    if a.value_float then v = lunet.tensor(a.value_float) end
    if a.value_int then v = lunet.tensor(a.value_int, { dtype = 'int64' }) end
    if a.value_floats then v = lunet.tensor(a.value_floats) end
    if a.value_ints then v = lunet.tensor(a.value_ints, { dtype = 'int64' }) end
    if not v then fail(where, 'needs a value') end
    return function() return v end
  end

  function ops.Shape(where, attrs)
    take(where, attrs, {})
    return function(x) return lunet.tensor(x:size(), { dtype = 'int64' }):reshape(x:dim()) end
  end

  function ops.Gather(where, attrs)
    local a = take(where, attrs, { axis = 0 })
    return function(x, idx)
      local d = dim(a.axis, x:dim())
      local i = idx:long()
      i = i + (i:lt(0):long() * x:size(d))   -- (negative indices count from the end)
      local flat = x:index_select(d, (i + 1):reshape(-1))
      local shape = {}
      for k = 1, d - 1 do shape[#shape + 1] = x:size(k) end
      for k = 1, i:dim() do shape[#shape + 1] = i:size(k) end
      for k = d + 1, x:dim() do shape[#shape + 1] = x:size(k) end
      return flat:reshape(shape)
    end
  end

  function ops.Unsqueeze(where, attrs, nin, nout, opset)
    local a = take(where, attrs, { axes = false })
    return function(x, axes)
      local list = axes and ints(axes) or a.axes
      if not list then fail(where, 'needs axes') end
      local r = x:dim() + #list
      local norm = {}
      for i, v in ipairs(list) do norm[i] = v < 0 and v + r or v end
      table.sort(norm)
      for _, v in ipairs(norm) do x = x:unsqueeze(v + 1) end
      return x
    end
  end

  function ops.Slice(where, attrs, nin, nout, opset)
    if opset < 10 then fail(where, 'Slice before opset 10 is not supported') end
    take(where, attrs, {})
    return function(x, starts, ends, axes, steps)
      local s, e = ints(starts), ints(ends)
      local ax = axes and ints(axes) or nil
      local st = steps and ints(steps) or nil
      for i = 1, #s do
        local d = dim(ax and ax[i] or i - 1, x:dim())
        local n = x:size(d)
        if st and st[i] ~= 1 then fail(where, 'steps other than 1 are not supported') end
        local b, f = s[i], e[i]
        if b < 0 then b = b + n end
        if f < 0 then f = f + n end
        b, f = math.max(0, math.min(b, n)), math.max(0, math.min(f, n))
        x = x:narrow(d, b + 1, math.max(f - b, 0))
      end
      return x
    end
  end
end
