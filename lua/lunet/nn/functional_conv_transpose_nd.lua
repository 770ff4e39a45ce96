-- lunet.nn.functional's conv_transpose1d and conv_transpose3d, as PyTorch
-- 1.13's, composed from conv_transpose2d (the same kernels, autograd and
-- backends). Weight (in, out/groups, k...) as torch's state_dict.
--  1-d: conv_transpose2d on the input with a unit height.
--  3-d: the depth taps are folded into conv_transpose2d's output channels
--    (weight read as (in, out/groups * kD, kH, kW)): one call gives every
--    input plane's contribution to every tap; fold (col2im, its overlaps
--    summed) then adds each tap's planes at their output depth.
-- Installed into F by lunet.nn.functional, which hands over its helpers.
local is_table = require('lunet.core').is_table
local factory = require 'lunet.factory'
local options = require 'lunet.options'
local raise, check_options, positional = options.raise, options.check, options.positional
local single, triple = options.single, options.triple
local NO = setmetatable({}, { __newindex = function() error('functional: internal table is read-only', 2) end })

local OPTS = { stride = 'number|table', padding = 'number|table', output_padding = 'number|table',
  groups = 'number', dilation = 'number|table' }
-- torch.nn.functional.conv_transposeNd(input, weight, bias, stride, padding, output_padding, groups, dilation)
local POSITIONAL = { 'stride', 'padding', 'output_padding', 'groups', 'dilation' }

return function(F, h)
  local need = h.need

  local function args(fn, opts, ...)
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or select('#', ...) > 0 then
      opts = positional(fn, POSITIONAL, opts, ...)
    end
    return opts and check_options(fn, opts, OPTS) or NO
  end
  local function size_of(t) return '{' .. table.concat(t:size(), ',') .. '}' end

  -- the checks both share: x's rank, w's, channels, groups, bias, output_padding;
  -- returns the output channels
  local function check(fn, x, w, b, nd, g, s, d, op, what)
    need(fn, x, 'input')
    if x.p.ndim ~= nd and x.p.ndim ~= nd + 1 then
      raise(('%s: input must be %d-d (C, %s) or %d-d (N, C, %s), got %d-d %s'):format(fn, nd, what, nd + 1, what,
        x.p.ndim, size_of(x)))
    end
    if not x:is_floating_point() then raise(('%s: input must be a floating-point tensor, got %s'):format(fn, x.dtype)) end
    need(fn, w, 'weight', nd + 1)
    local Cin = x:size(x:dim() - nd + 1)
    if Cin ~= w:size(1) then
      raise(('%s: input %s has %d channels, weight %s expects %d (weight is (in_channels, out_channels/groups, %s))')
        :format(fn, size_of(x), Cin, size_of(w), w:size(1), what))
    end
    if Cin % g ~= 0 then raise(('%s: input channels %d are not divisible by groups %d'):format(fn, Cin, g)) end
    local Cout = w:size(2) * g
    if b ~= nil then
      need(fn, b, 'bias', 1)
      if b:size(1) ~= Cout then raise(('%s: bias has %d elements, the output %d channels'):format(fn, b:size(1), Cout)) end
    end
    for i = 1, #s do
      if not (op[i] < s[i] or op[i] < d[i]) then
        raise(('%s: output_padding must be smaller than stride or dilation, got output_padding %s, stride %s, dilation %s')
          :format(fn, table.concat(op, 'x'), table.concat(s, 'x'), table.concat(d, 'x')))
      end
    end
    return Cout
  end
  local function out_len(fn, x, L, s, p, d, k, op)
    local o = (L - 1) * s - 2 * p + d * (k - 1) + op + 1
    if o < 1 then raise(('%s: input %s gives an empty output (length %d: padding %d too large)'):format(fn,
      size_of(x), o, p)) end
    return o
  end

  -- conv_transpose1d(x (N,Cin,L) or (Cin,L), w (Cin,Cout/groups,K), b (Cout) or nil,
  --   {stride = 1, padding = 0, output_padding = 0, groups = 1, dilation = 1}),
  -- or PyTorch's positional conv_transpose1d(x, w, b, stride, padding, output_padding, groups, dilation)
  -- -> (N, Cout, (L-1)*stride - 2*padding + dilation*(K-1) + output_padding + 1)
  function F.conv_transpose1d(x, w, b, opts, ...)
    local fn = 'conv_transpose1d'
    opts = args(fn, opts, ...)
    local s = single(fn, 'stride', opts.stride, 1) or 1
    local p = single(fn, 'padding', opts.padding, 0) or 0
    local op = single(fn, 'output_padding', opts.output_padding, 0) or 0
    local d = single(fn, 'dilation', opts.dilation, 1) or 1
    local g = single(fn, 'groups', opts.groups, 1) or 1
    check(fn, x, w, b, 2, g, { s }, { d }, { op }, 'L')
    out_len(fn, x, x:size(x:dim()), s, p, d, w:size(3), op)
    local batched = x:dim() == 3
    local x4 = (batched and x or x:unsqueeze(1)):unsqueeze(3)
    local y = F.conv_transpose2d(x4, w:unsqueeze(3), b, { stride = { 1, s }, padding = { 0, p },
      output_padding = { 0, op }, groups = g, dilation = { 1, d } }):select(3, 1)
    return batched and y or y:select(1, 1)
  end

  -- conv_transpose3d(x (N,Cin,D,H,W) or (Cin,D,H,W), w (Cin,Cout/groups,kD,kH,kW), b (Cout) or nil,
  --   {stride = 1, padding = 0, output_padding = 0, groups = 1, dilation = 1}), each a number
  -- or {d, h, w}, or PyTorch's positional form
  function F.conv_transpose3d(x, w, b, opts, ...)
    local fn = 'conv_transpose3d'
    opts = args(fn, opts, ...)
    local s = { triple(fn, 'stride', opts.stride or 1, 1) }
    local p = { triple(fn, 'padding', opts.padding or 0, 0) }
    local op = { triple(fn, 'output_padding', opts.output_padding or 0, 0) }
    local d = { triple(fn, 'dilation', opts.dilation or 1, 1) }
    local g = single(fn, 'groups', opts.groups, 1) or 1
    local Cout = check(fn, x, w, b, 4, g, s, d, op, 'D, H, W')
    local batched = x:dim() == 5
    local x5 = batched and x or x:unsqueeze(1)
    local N, Cin, D, H, W = x5:size(1), x5:size(2), x5:size(3), x5:size(4), x5:size(5)
    local kD = w:size(3)
    local OD = out_len(fn, x, D, s[1], p[1], d[1], kD, op[1])
    local OH = out_len(fn, x, H, s[2], p[2], d[2], w:size(4), op[2])
    local OW = out_len(fn, x, W, s[3], p[3], d[3], w:size(5), op[3])
    if D * H * W == 0 then raise(('%s: input %s has an empty depth, height or width'):format(fn, size_of(x))) end
    if N == 0 then   -- (an empty batch, as torch's)
      local z = factory.zeros({ 0, Cout, OD, OH, OW }, { dtype = x.dtype, device = x.device })
      return batched and z or z:select(1, 1)
    end
    -- every plane through every tap: (N*D, Cout*kD, OH, OW), channels in (group, out, tap) order
    local planes = x5:permute(1, 3, 2, 4, 5):reshape(N * D, Cin, H, W)
    local y = F.conv_transpose2d(planes, w:reshape(Cin, w:size(2) * kD, w:size(4), w:size(5)), nil,
      { stride = { s[2], s[3] }, padding = { p[2], p[3] }, output_padding = { op[2], op[3] },
        groups = g, dilation = { d[2], d[3] } })
    -- tap kd of plane i lands at depth i*sD + kd*dD of the unpadded output: fold's
    -- columns, one block per input plane, (H, W) carried in fold's channels
    local full = (D - 1) * s[1] + d[1] * (kD - 1) + 1
    local cols = y:view(N, D, Cout, kD, OH * OW):permute(1, 3, 5, 4, 2):reshape(N, Cout * OH * OW * kD, D)
    local z = F.fold(cols, { full, 1 }, { kD, 1 }, { stride = { s[1], 1 }, dilation = { d[1], 1 } })
    z = z:view(N, Cout, OH, OW, full):permute(1, 2, 5, 3, 4)
    -- padding crops p planes at the front; output_padding may reach past the end (zeros)
    local past = p[1] + OD - full
    if past > 0 then
      z = z:reshape(N, Cout, full, OH * OW)
      z = F.pad(z, { 0, 0, 0, past }):view(N, Cout, full + past, OH, OW)
    end
    z = z:narrow(3, p[1] + 1, OD)
    if b ~= nil then z = z + b:view(1, Cout, 1, 1, 1) end
    z = z:contiguous()
    return batched and z or z:select(1, 1)
  end
end
