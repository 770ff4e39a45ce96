-- lunet.nn.functional's pooling: max_pool2d, avg_pool2d, adaptive_avg_pool2d,
-- adaptive_max_pool2d (composed: index_select and max_pool2d), on the C kernels of lunet.h with their autograd recorders (lunet.autograd.
-- formulas.nn). Installed into F by lunet.nn.functional, which hands over its helpers.
local ffi = require 'ffi'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local C, is_table = core.C, core.is_table
local wrap, check = T.wrap, T.check
local factory = require 'lunet.factory'
local recorder = A.recorder
local raise = options.raise
local check_options, positional = options.check, options.positional

return function(F, h)
  local need, pair, new, kernel, shape_buf, NO_OPTS = h.need, h.pair, h.new, h.kernel, h.shape_buf, h.NO_OPTS

  local function pool_size(H, k, s, p, d, ceil_mode)
    local num = H + 2 * p - d * (k - 1) - 1
    local o = (ceil_mode and math.ceil(num / s) or math.floor(num / s)) + 1
    if ceil_mode and (o - 1) * s >= H + p then o = o - 1 end
    return o
  end

  local function pool_params(fn, x, k, opts)
    local kh, kw = pair(fn, k, 'kernel_size')
    local sh, sw = pair(fn, opts.stride, 'stride', { kh, kw })
    local ph, pw = pair(fn, opts.padding, 'padding', 0)
    local dh, dw = pair(fn, opts.dilation, 'dilation', 1)
    if ph > kh / 2 or pw > kw / 2 then
      raise(('%s: padding %dx%d must be at most half the kernel %dx%d'):format(fn, ph, pw, kh, kw))
    end
    local cnt = opts.count_include_pad
    if cnt == nil then cnt = true end
    local p = ffi.new('ln_pool2d_params', kh, kw, sh, sw, ph, pw, dh, dw, opts.ceil_mode and 1 or 0, cnt and 1 or 0)
    local H, W = tonumber(x.p.shape[2]), tonumber(x.p.shape[3])
    local OH, OW = pool_size(H, kh, sh, ph, dh, opts.ceil_mode), pool_size(W, kw, sw, pw, dw, opts.ceil_mode)
    if OH < 1 or OW < 1 then
      raise(('%s: input {%s} is too small for a %dx%d window'):format(fn, table.concat(x:size(), ','), kh, kw))
    end
    return p, OH, OW
  end

  local MAXPOOL_OPTS = { stride = 'number|table', padding = 'number|table', dilation = 'number|table',
    ceil_mode = 'boolean', return_indices = 'boolean' }
  local MAXPOOL_POSITIONAL = { 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices' }

  -- max_pool2d(x, kernel_size, {stride=kernel_size, padding=0, dilation=1,
  -- ceil_mode=false, return_indices=false}), or PyTorch's positional
  -- max_pool2d(x, k, stride, padding, dilation, ceil_mode, return_indices);
  -- indices (int64) are 1-based positions h*W+w+1 within each plane, as
  -- adaptive_max_pool2d's and Torch7's (the kernel's own are 0-based)
  local record_max_pool2d = recorder('max_pool2d')
  function F.max_pool2d(x, k, opts, padding, dilation, ceil_mode, return_indices)
    need('max_pool2d', x, 'input', 4)
    kernel('max_pool2d', 'ln_maxpool2d_forward')
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or padding ~= nil or dilation ~= nil
        or ceil_mode ~= nil or return_indices ~= nil then
      opts = positional('max_pool2d', MAXPOOL_POSITIONAL, opts, padding, dilation, ceil_mode, return_indices)
    end
    if opts == nil then opts = NO_OPTS else check_options('max_pool2d', opts, MAXPOOL_OPTS) end
    local p, OH, OW = pool_params('max_pool2d', x, k, opts)
    local N, Cc = tonumber(x.p.shape[0]), tonumber(x.p.shape[1])
    local out = new(x, N, Cc, OH, OW)
    shape_buf[0], shape_buf[1], shape_buf[2], shape_buf[3] = N, Cc, OH, OW
    local idx = wrap(C.ln_empty(4, shape_buf, C.LN_INT64, x.p.device_id))
    check(C.ln_maxpool2d_forward(out.p, idx.p, x.p, p))
    local ret = opts.return_indices and idx + 1
    -- (the node's own indices, freed with it: lunet.nn.eager)
    record_max_pool2d(out, x, A.records(x) and T.node_owned(idx) or idx, p)
    if ret then return out, ret end
    return out
  end

  local AVGPOOL_OPTS = { stride = 'number|table', padding = 'number|table', ceil_mode = 'boolean',
    count_include_pad = 'boolean' }
  local AVGPOOL_POSITIONAL = { 'stride', 'padding', 'ceil_mode', 'count_include_pad' }

  -- avg_pool2d(x, kernel_size, {stride=kernel_size, padding=0, ceil_mode=false, count_include_pad=true}),
  -- or PyTorch's positional avg_pool2d(x, k, stride, padding, ceil_mode, count_include_pad)
  local record_avg_pool2d = recorder('avg_pool2d')
  function F.avg_pool2d(x, k, opts, padding, ceil_mode, count_include_pad)
    need('avg_pool2d', x, 'input', 4)
    kernel('avg_pool2d', 'ln_avgpool2d_forward')
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or padding ~= nil or ceil_mode ~= nil
        or count_include_pad ~= nil then
      opts = positional('avg_pool2d', AVGPOOL_POSITIONAL, opts, padding, ceil_mode, count_include_pad)
    end
    if opts == nil then opts = NO_OPTS else check_options('avg_pool2d', opts, AVGPOOL_OPTS) end
    local p, OH, OW = pool_params('avg_pool2d', x, k, opts)
    local out = new(x, tonumber(x.p.shape[0]), tonumber(x.p.shape[1]), OH, OW)
    check(C.ln_avgpool2d_forward(out.p, x.p, p))
    record_avg_pool2d(out, x, p, tonumber(x.p.shape[2]), tonumber(x.p.shape[3]))
    return out
  end

  -- adaptive_avg_pool2d(x, output_size): a number or {oh, ow}
  local record_adaptive_avg_pool2d = recorder('adaptive_avg_pool2d')
  function F.adaptive_avg_pool2d(x, size)
    need('adaptive_avg_pool2d', x, 'input', 4)
    kernel('adaptive_avg_pool2d', 'ln_adaptive_avgpool2d_forward')
    local oh, ow = pair('adaptive_avg_pool2d', size, 'output_size')
    local n, c = tonumber(x.p.shape[0]), tonumber(x.p.shape[1])
    if n * c * oh * ow >= 2 ^ 62 then
      raise(('adaptive_avg_pool2d: output {%d,%d,%.17g,%.17g} is too large'):format(n, c, oh, ow))
    end
    local out = new(x, n, c, oh, ow)
    check(C.ln_adaptive_avgpool2d_forward(out.p, x.p))
    record_adaptive_avg_pool2d(out, x, tonumber(x.p.shape[2]), tonumber(x.p.shape[3]))
    return out
  end
  -- adaptive_max_pool2d's size of one dim: v an integer >= 1, or false/nil
  -- (PyTorch's None: the input's size n)
  local function adaptive_size(v, n)
    if v == nil or v == false then return n end
    if type(v) == 'number' and v % 1 == 0 and v >= 1 and v < 2 ^ 31 then return v end
  end

  -- The bins of torch's adaptive pooling of n inputs into o outputs: bin i is
  -- [floor(i*n/o), ceil((i+1)*n/o)). Returns the widest bin's size k and, when
  -- the bins are not n/o apart and even, a 1-based int64 index listing each
  -- bin's positions padded to k by repeating its last (a repeat, after the
  -- real positions, changes neither the max nor which position is first).
  local function adaptive_bins(n, o, device)
    if n % o == 0 then return n / o, nil end
    local k = 0
    for i = 0, o - 1 do k = math.max(k, math.ceil((i + 1) * n / o) - math.floor(i * n / o)) end
    local idx = {}
    for i = 0, o - 1 do
      local s, e = math.floor(i * n / o), math.ceil((i + 1) * n / o)
      for j = 0, k - 1 do idx[i * k + j + 1] = math.min(s + j, e - 1) + 1 end
    end
    return k, factory.tensor(idx, { dtype = 'int64', device = device })
  end

  -- adaptive_max_pool2d(x (N,C,H,W) or (C,H,W), output_size[, return_indices = false]):
  -- output_size a number or {oh, ow}, an entry false (or nil) keeping the
  -- input's size. Each bin's rows and columns are gathered to a regular grid
  -- of equal windows (index_select), which max_pool2d reduces: it runs, and
  -- differentiates, on every backend. Indices are 1-based positions h*W+w+1
  -- within each plane (int64): torch's plus one.
  function F.adaptive_max_pool2d(x, size, return_indices)
    need('adaptive_max_pool2d', x, 'input')
    local nd = x.p.ndim
    if nd ~= 3 and nd ~= 4 then
      raise(('adaptive_max_pool2d: input must be 3-d (C, H, W) or 4-d (N, C, H, W), got %d-d {%s}'):format(
        nd, table.concat(x:size(), ',')))
    end
    if return_indices ~= nil and type(return_indices) ~= 'boolean' then
      raise('adaptive_max_pool2d: return_indices must be a boolean, got ' .. tostring(return_indices))
    end
    local H, W = tonumber(x.p.shape[nd - 2]), tonumber(x.p.shape[nd - 1])
    local oh, ow
    if is_table(size) then
      -- {h, w}: an entry may be false ({5} alone is {5, nil}: one entry, an error as in PyTorch)
      local other = false
      for k in pairs(size) do if k ~= 1 and k ~= 2 then other = true end end
      if size[2] ~= nil and not other then oh, ow = adaptive_size(size[1], H), adaptive_size(size[2], W) end
    elseif type(size) == 'number' then oh, ow = adaptive_size(size, H), adaptive_size(size, W) end
    if not oh or not ow then
      local shown = tostring(size)
      if is_table(size) then shown = '{' .. tostring(size[1]) .. ', ' .. tostring(size[2]) .. '}' end
      raise(('adaptive_max_pool2d: output_size must be an integer >= 1 or {h, w} of them (false: the input\'s size), got %s')
        :format(shown))
    end
    if H < 1 or W < 1 or x.p.shape[nd - 3] < 1 then   -- (an empty batch is fine, as in PyTorch)
      raise(('adaptive_max_pool2d: input {%s} is empty'):format(table.concat(x:size(), ',')))
    end
    if not x:is_floating_point() then
      raise('adaptive_max_pool2d: input must be a floating-point tensor, got ' .. x.dtype)
    end
    local x4 = nd == 3 and x:unsqueeze(1) or x
    local kh, rows = adaptive_bins(H, oh, x.device)
    local kw, cols = adaptive_bins(W, ow, x.device)
    local g = x4
    if rows then g = g:index_select(3, rows) end
    if cols then g = g:index_select(4, cols) end
    local out, idx = F.max_pool2d(g, { kh, kw }, { return_indices = true })
    if nd == 3 then out = out:select(1, 1) end
    if not return_indices then return out end
    if rows or cols then
      -- idx counts (1-based) within the gathered (oh*kh, ow*kw) plane: map it back
      local r = rows and rows - 1 or factory.arange(0, H, { device = x.device })
      local c = cols and cols - 1 or factory.arange(0, W, { device = x.device })
      local map = (r * W):view(oh * kh, 1) + c:view(1, ow * kw) + 1
      idx = map:view(map:numel()):index_select(1, idx:view(idx:numel())):view(idx:size())
    end
    if nd == 3 then idx = idx:select(1, 1) end
    return out, idx
  end
end
