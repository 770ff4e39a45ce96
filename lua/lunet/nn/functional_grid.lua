-- lunet.nn.functional's grid_sample and affine_grid (spatial transformer
-- networks), as PyTorch 1.13's. grid_sample runs the C kernels of lunet.h
-- (ln_grid_sample_forward/backward: one pass computes each point's taps and
-- reads every channel with them) with their autograd formula. The same
-- sampling composed from tensor ops is kept as F._grid_sample_composed: the
-- source coordinates (unnormalized, padded by clamping or reflecting), their
-- integer corners (2 or 4 per dim) and weights, one gather per corner from the
-- input flattened to (N, C, D*H*W); autograd differentiates it, so it gives
-- the kernel's backward its own backward (create_graph: lunet.autograd.double)
-- and the specs a second opinion. affine_grid is a base grid times theta.
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local autograd = require 'lunet.autograd'
local options = require 'lunet.options'
local is_table, typename, C = core.is_table, core.typename, core.C
local wrap, check = T.wrap, T.check
local raise, check_options = options.raise, options.check

return function(F, h)
  local need, kernel, shape_buf, NO_OPTS = h.need, h.kernel, h.shape_buf, h.NO_OPTS
  local lunet = function() return require 'lunet' end

  -- torch's grid_sampler_unnormalize: [-1, 1] to pixel coordinates
  local function unnormalize(g, size, align)
    if align then return (g + 1) * ((size - 1) / 2) end
    return ((g + 1) * size - 1) / 2
  end
  -- torch's reflect_coordinates as a triangle wave (its gradient's sign too)
  local function reflect(c, twice_low, twice_high)
    if twice_low == twice_high then return c * 0 end
    local lo, span = twice_low / 2, (twice_high - twice_low) / 2
    local d = c - lo   -- (d mod 2 span through floor: remainder has no gradient here)
    local t = d - (d:detach() / (2 * span)):floor() * (2 * span)
    return (t - span):abs():neg() + (lo + span)
  end
  local function pad(c, size, padding, align)
    if padding == 'border' then return c:clamp(0, size - 1) end
    if padding == 'reflection' then
      c = align and reflect(c, 0, 2 * (size - 1)) or reflect(c, -1, 2 * size - 1)
      return c:clamp(0, size - 1)
    end
    return c
  end

  local A = -0.75   -- (PyTorch's bicubic coefficient)
  local function cc1(t) return ((t * (A + 2)) - (A + 3)) * t * t + 1 end
  local function cc2(t) return ((t * A - 5 * A) * t + 8 * A) * t - 4 * A end

  local GRID_OPTS = { mode = 'string', padding_mode = 'string', align_corners = 'boolean' }
  local PADDINGS = { zeros = true, border = true, reflection = true }
  local MODE_ID = { bilinear = C.LN_GRID_BILINEAR, nearest = C.LN_GRID_NEAREST, bicubic = C.LN_GRID_BICUBIC }
  local PAD_ID = { zeros = C.LN_GRID_ZEROS, border = C.LN_GRID_BORDER, reflection = C.LN_GRID_REFLECTION }
  local record_grid_sample = autograd.recorder('grid_sample')

  -- grid_sample(x (N, C, H, W), grid (N, Ho, Wo, 2)[, {mode = 'bilinear' | 'nearest' | 'bicubic',
  -- padding_mode = 'zeros' | 'border' | 'reflection', align_corners = false}]), or 5-d x
  -- (N, C, D, H, W) with grid (N, Do, Ho, Wo, 3) ('bilinear' is then trilinear):
  -- grid[..., 1] is x (along W), [..., 2] y, [..., 3] z, in [-1, 1]
  -- the checked arguments: mode, padding_mode, align_corners
  local function grid_args(x, grid, opts)
    opts = opts or NO_OPTS
    check_options('grid_sample', opts, GRID_OPTS)
    need('grid_sample', x, 'input')
    need('grid_sample', grid, 'grid')
    local mode, padding = opts.mode or 'bilinear', opts.padding_mode or 'zeros'
    local align = opts.align_corners or false
    local nd = x:dim()
    if nd ~= 4 and nd ~= 5 then raise(('grid_sample: input must be 4-d or 5-d, got %d-d'):format(nd)) end
    local sd = nd - 2
    if grid:dim() ~= nd or grid:size(nd) ~= sd or grid:size(1) ~= x:size(1) then
      raise(('grid_sample: grid must be (N, %s%d) for %d-d input with N = %d, got {%s}'):format(
        sd == 2 and 'Ho, Wo, ' or 'Do, Ho, Wo, ', sd, nd, x:size(1), table.concat(grid:size(), ', ')))
    end
    if mode ~= 'bilinear' and mode ~= 'nearest' and mode ~= 'bicubic' then
      raise(("grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got '%s'"):format(mode))
    end
    if not PADDINGS[padding] then
      raise(("grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got '%s'"):format(padding))
    end
    if mode == 'bicubic' and nd ~= 4 then raise("grid_sample: mode 'bicubic' needs 4-d input") end
    if not x:is_floating_point() or grid.dtype ~= x.dtype then
      raise(('grid_sample: input and grid must have the same floating-point dtype, got %s and %s'):format(x.dtype, grid.dtype))
    end
    for i = 3, nd do
      if x:size(i) < 1 then raise('grid_sample: input must have non-empty spatial dims') end
    end
    return mode, padding, align
  end

  function F.grid_sample(x, grid, opts)
    local mode, padding, align = grid_args(x, grid, opts)
    local nd = x.p.ndim
    kernel('grid_sample', 'ln_grid_sample_forward')
    local n = 2
    shape_buf[0], shape_buf[1] = x.p.shape[0], x.p.shape[1]
    for i = 1, nd - 2 do n = n + 1; shape_buf[n - 1] = grid.p.shape[i] end
    local out = wrap(C.ln_empty(nd, shape_buf, x.p.dtype_id, x.p.device_id))
    local m, p, ac = MODE_ID[mode], PAD_ID[padding], align and 1 or 0
    check(C.ln_grid_sample_forward(out.p, x.p, grid.p, m, p, ac))
    return record_grid_sample(out, x, grid, nil, m, p, ac)
  end

  -- the same sampling from tensor ops
  function F._grid_sample_composed(x, grid, opts)
    local mode, padding, align = grid_args(x, grid, opts)
    local nd = x:dim()
    local sd = nd - 2
    local N, Cc = x:size(1), x:size(2)
    local outs, M = {}, 1
    for i = 2, nd - 1 do outs[#outs + 1] = grid:size(i); M = M * grid:size(i) end
    local sizes = {}   -- of grid component k: W, H[, D]
    for k = 1, sd do sizes[k] = x:size(nd + 1 - k) end
    local P = 1
    for k = 1, sd do P = P * sizes[k] end
    local flat = x:reshape(N, Cc, P)

    -- the value at integer corner coordinates cs (per component, (N, 1, M),
    -- no gradient), zero outside the input
    local function at(cs)
      local lin, inside = nil, nil
      local stride = 1
      for k = 1, sd do
        local c = cs[k]
        local ok = c:ge(0):logical_and(c:le(sizes[k] - 1))
        inside = inside and inside:logical_and(ok) or ok
        local term = c:clamp(0, sizes[k] - 1) * stride
        lin = lin and lin + term or term
        stride = stride * sizes[k]
      end
      local v = flat:gather(3, (lin + 1):to('int64'):expand(N, Cc, M))
      return v, inside:to(x.dtype)
    end

    local coords = {}
    for k = 1, sd do
      local g = grid:select(nd, k):reshape(N, 1, M)
      local c = unnormalize(g, sizes[k], align)
      coords[k] = mode == 'bicubic' and c or pad(c, sizes[k], padding, align)
    end
    local out
    if mode == 'nearest' then
      local cs = {}
      for k = 1, sd do cs[k] = coords[k]:detach():round() end
      local v, inside = at(cs)
      out = v * inside
    elseif mode == 'bilinear' then
      local base, t = {}, {}
      for k = 1, sd do
        base[k] = coords[k]:detach():floor()
        t[k] = coords[k] - base[k]
      end
      for corner = 0, 2 ^ sd - 1 do
        local cs, w = {}, nil
        for k = 1, sd do
          local bit = math.floor(corner / 2 ^ (k - 1)) % 2
          cs[k] = bit == 1 and base[k] + 1 or base[k]
          local wk = bit == 1 and t[k] or 1 - t[k]
          w = w and w * wk or wk
        end
        local v, inside = at(cs)
        local term = v * (w * inside)
        out = out and out + term or term
      end
    else   -- bicubic: 4 x 4 taps, each padded as an integer coordinate (as torch)
      local base, w = {}, {}
      for k = 1, 2 do
        base[k] = coords[k]:detach():floor()
        local t = coords[k] - base[k]
        w[k] = { cc2(t + 1), cc1(t), cc1(1 - t), cc2(2 - t) }
      end
      for j = 1, 4 do
        local cy = pad(base[2] + (j - 2), sizes[2], padding, align)
        for i = 1, 4 do
          local cx = pad(base[1] + (i - 2), sizes[1], padding, align)
          local v, inside = at({ cx, cy })
          local term = v * (w[1][i] * w[2][j] * inside)
          out = out and out + term or term
        end
      end
    end
    return out:view(N, Cc, unpack(outs))
  end

  -- -1 to 1 in n steps, as torch's linspace_from_neg_one (0 for n = 1)
  local function steps(n, align, dtype)
    if n <= 1 then return lunet().zeros(math.max(n, 0), { dtype = dtype }) end
    local r = lunet().linspace(-1, 1, n, { dtype = dtype })
    return align and r or r * ((n - 1) / n)
  end

  -- affine_grid(theta (N, 2, 3), size {N, C, H, W}[, {align_corners = false}]) -> (N, H, W, 2),
  -- or theta (N, 3, 4) and size {N, C, D, H, W} -> (N, D, H, W, 3): the sampling grid of
  -- grid_sample for the affine maps theta of the output's normalized coordinates
  function F.affine_grid(theta, size, opts)
    opts = opts or NO_OPTS
    check_options('affine_grid', opts, { align_corners = 'boolean' })
    need('affine_grid', theta, 'theta')
    local align = opts.align_corners or false
    if not is_table(size) or (#size ~= 4 and #size ~= 5) then
      raise('affine_grid: size must be {N, C, H, W} or {N, C, D, H, W}, got ' ..
        (is_table(size) and #size .. ' values' or typename(size)))
    end
    for i = 1, #size do
      if type(size[i]) ~= 'number' or size[i] < 0 or size[i] % 1 ~= 0 then
        raise('affine_grid: size must be non-negative integers, got ' .. tostring(size[i]))
      end
    end
    local sd, N = #size - 2, size[1]
    if not theta:is_floating_point() or theta:dim() ~= 3 or theta:size(1) ~= N or theta:size(2) ~= sd
      or theta:size(3) ~= sd + 1 then
      raise(('affine_grid: theta must be a floating-point (N, %d, %d) tensor with N = %d for size {%s}, got %s {%s}'):format(
        sd, sd + 1, N, table.concat(size, ', '), theta.dtype, table.concat(theta:size(), ', ')))
    end
    local dt = theta.dtype
    local spatial = { unpack(size, 3) }   -- D, H, W or H, W
    local full = { unpack(spatial) }
    full[sd + 1] = 1
    local parts = {}
    for k = 1, sd do   -- component k varies along spatial dim sd + 1 - k
      local d = sd + 1 - k
      local shape = {}
      for i = 1, sd do shape[i] = i == d and spatial[i] or 1 end
      shape[sd + 1] = 1
      local s = steps(spatial[d], align, dt)
      if theta.device ~= 'cpu:0' then s = s:to(theta.device) end
      parts[k] = s:view(shape):expand(full)
    end
    parts[sd + 1] = lunet().ones(full, { dtype = dt, device = theta.device })
    local base = lunet().cat(parts, sd + 1):reshape(1, -1, sd + 1)
    local P = base:size(2)
    local g = base:expand(N, P, sd + 1):bmm(theta:transpose(2, 3))
    local oshape = { N, unpack(spatial) }
    oshape[sd + 2] = sd
    return g:view(oshape)
  end
end
