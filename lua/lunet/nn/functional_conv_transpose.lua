-- lunet.nn.functional's conv_transpose2d, as PyTorch 1.13's. A transposed
-- convolution is the input gradient of the convolution that maps its output
-- back to its input (same weight, stride, padding, dilation, groups), so it
-- runs on conv2d's C kernels: the forward is ln_conv2d_backward's input
-- gradient, the backward (lunet.autograd.formulas.nn's conv_transpose2d) is
-- conv2d's forward for the input gradient and conv2d's weight gradient with
-- input and output gradient swapped. Installed into F by
-- lunet.nn.functional, which hands over its helpers.
local ffi = require 'ffi'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local C, is_table = core.C, core.is_table
local wrap = T.wrap
local raise = options.raise
local recorder = A.recorder

local FN = 'conv_transpose2d'
local OPTS = { stride = 'number|table', padding = 'number|table', output_padding = 'number|table',
  groups = 'number', dilation = 'number|table' }
-- torch.nn.functional.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
local POSITIONAL = { 'stride', 'padding', 'output_padding', 'groups', 'dilation' }
local NO_OPTS = {}
-- (the C parameters are int32: a larger geometry would wrap around)
local INT_MAX = 2 ^ 31 - 1

return function(F, h)
  local need, pair, new, kernel = h.need, h.pair, h.new, h.kernel

  local function shape(t) return '{' .. table.concat(t:size(), ',') .. '}' end
  local function two(a, b) return a == b and tostring(a) or ('{%d, %d}'):format(a, b) end

  -- an integer pair >= 0 (F's pair checks only the geometry it knows by name)
  local function output_padding(v)
    local a, b = pair(FN, v, 'output_padding', 0)
    if not (type(a) == 'number' and type(b) == 'number' and a % 1 == 0 and b % 1 == 0 and a >= 0 and b >= 0) then
      raise(('%s: output_padding must be integers >= 0, got %s'):format(FN,
        is_table(v) and ('{' .. tostring(a) .. ', ' .. tostring(b) .. '}') or tostring(v)))
    end
    return a, b
  end

  -- checks x, w, b and opts; returns the ln_conv2d_params of the
  -- convolution from the output back to x, the output's shape, and the rows
  -- and columns (KH, KW) of it that the kernel computes: all of it unless
  -- output_padding >= stride (allowed when below dilation), whose extra rows
  -- and columns get no input contribution and would change that
  -- convolution's output size
  local function setup(x, w, b, opts)
    need(FN, x, 'input', 4)
    need(FN, w, 'weight', 4)
    if b ~= nil then need(FN, b, 'bias', 1) end
    if opts == nil then opts = NO_OPTS else options.check(FN, opts, OPTS) end
    local sh, sw = pair(FN, opts.stride, 'stride', 1)
    local ph, pw = pair(FN, opts.padding, 'padding', 0)
    local dh, dw = pair(FN, opts.dilation, 'dilation', 1)
    local oph, opw = output_padding(opts.output_padding)
    local groups = opts.groups or 1
    if type(groups) ~= 'number' or groups % 1 ~= 0 or groups < 1 or groups > INT_MAX then
      raise(('%s: groups must be an integer >= 1, got %s'):format(FN, tostring(groups)))
    end
    for _, v in ipairs({ sh, sw, ph, pw, dh, dw, oph, opw }) do
      if v > INT_MAX then raise(('%s: stride, padding, dilation and output_padding must be below 2^31, got %d'):format(FN, v)) end
    end
    if not (oph < sh or oph < dh) or not (opw < sw or opw < dw) then
      raise(('%s: output_padding must be smaller than stride or dilation, got output_padding %s, stride %s, dilation %s')
        :format(FN, two(oph, opw), two(sh, sw), two(dh, dw)))
    end
    if x.p.dtype_id ~= w.p.dtype_id or b and b.p.dtype_id ~= x.p.dtype_id then
      raise(('%s: input (%s), weight (%s)%s must have the same dtype'):format(FN, x.dtype, w.dtype,
        b and (' and bias (' .. b.dtype .. ')') or ''))
    end
    if x.p.device_id ~= w.p.device_id or b and b.p.device_id ~= x.p.device_id then
      raise(('%s: input (%s), weight (%s)%s must be on the same device'):format(FN, x.device, w.device,
        b and (' and bias (' .. b.device .. ')') or ''))
    end
    local N, Cin, H, W = tonumber(x.p.shape[0]), tonumber(x.p.shape[1]), tonumber(x.p.shape[2]), tonumber(x.p.shape[3])
    local wc, cg, kh, kw = tonumber(w.p.shape[0]), tonumber(w.p.shape[1]), tonumber(w.p.shape[2]), tonumber(w.p.shape[3])
    if Cin ~= wc then
      raise(('%s: input %s has %d channels, weight %s expects %d (weight is (in_channels, out_channels/groups, kH, kW))')
        :format(FN, shape(x), Cin, shape(w), wc))
    end
    if Cin % groups ~= 0 then
      raise(('%s: input channels %d are not divisible by groups %d'):format(FN, Cin, groups))
    end
    if cg < 1 or kh < 1 or kw < 1 or Cin < 1 then raise(('%s: weight %s has an empty dim'):format(FN, shape(w))) end
    if H < 1 or W < 1 then raise(('%s: input %s has an empty height or width'):format(FN, shape(x))) end
    local Cout = cg * groups
    if b and tonumber(b.p.shape[0]) ~= Cout then
      raise(('%s: bias has %d elements, the output %d channels'):format(FN, tonumber(b.p.shape[0]), Cout))
    end
    local OH = (H - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    local OW = (W - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    if OH < 1 or OW < 1 then
      raise(('%s: input %s gives an empty output %dx%d (padding %s too large for the %dx%d kernel)'):format(
        FN, shape(x), OH, OW, two(ph, pw), kh, kw))
    end
    if OH > INT_MAX or OW > INT_MAX then raise(('%s: output %.0fx%.0f is too large'):format(FN, OH, OW)) end
    local KH, KW = oph < sh and OH or OH - oph, opw < sw and OW or OW - opw
    return ffi.new('ln_conv2d_params', sh, sw, ph, pw, dh, dw, groups), N, Cout, OH, OW, KH, KW
  end

  local function run(rc)
    if rc ~= 0 then raise(FN .. ': ' .. (core.last_error():gsub('^conv2d[%w_]*: ', ''))) end
  end

  local bias_shape = ffi.new('int64_t[4]')

  -- conv_transpose2d(x (N,Cin,H,W), w (Cin,Cout/groups,KH,KW), b (Cout) or nil,
  --   {stride = 1, padding = 0, output_padding = 0, groups = 1, dilation = 1}),
  -- or PyTorch's positional conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation)
  -- -> (N, Cout, (H-1)*stride - 2*padding + dilation*(KH-1) + output_padding + 1, likewise W)
  local record = recorder('conv_transpose2d')
  function F.conv_transpose2d(x, w, b, opts, ...)
    if T.is_tensor(x) and x.p.ndim == 3 then   -- (an unbatched (C, H, W), as torch's)
      return F.conv_transpose2d(x:unsqueeze(1), w, b, opts, ...):squeeze(1)
    end
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or select('#', ...) > 0 then
      opts = options.positional(FN, POSITIONAL, opts, ...)
    end
    kernel(FN, 'ln_conv2d_backward')
    local params, N, Cout, OH, OW, KH, KW = setup(x, w, b, opts)
    local out = new(x, N, Cout, OH, OW)
    local din = out
    if KH ~= OH or KW ~= OW then
      run(C.ln_fill_(out.p, 0))
      din = new(x, N, Cout, KH, KW)
    end
    -- din is also passed as the convolution's input: with only the input
    -- gradient asked for, ln_conv2d_backward reads that input's shape, not
    -- its values (an extra tensor of the output's size saved)
    run(C.ln_conv2d_backward(din.p, nil, nil, x.p, din.p, w.p, params))
    if din ~= out then
      local narrow = A.raw.narrow
      run(C.ln_copy_(narrow(narrow(out, 3, 1, KH), 4, 1, KW).p, din.p))
    end
    if b then
      bias_shape[0], bias_shape[1], bias_shape[2], bias_shape[3] = 1, Cout, 1, 1
      local bv = wrap(C.ln_reshape(b.p, 4, bias_shape))
      run(C.ln_binary_(C.LN_ADD, out.p, bv.p))
    end
    record(out, x, w, b, params, KH, KW)
    return out
  end
end
