-- lunet.nn.functional's sliding blocks and channel-wise reshaping: unfold
-- (im2col), fold (col2im, unfold's adjoint: overlaps summed), normalize,
-- local_response_norm, channel_shuffle, as PyTorch 1.13's (dims 1-based).
-- unfold is one index_select of the padded planes (differentiable through
-- it); fold is one scatter_add, its node's backward that same index_select.
-- Installed into F by lunet.nn.functional, which hands over its helpers.
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local factory = require 'lunet.factory'
local options = require 'lunet.options'
local eager = require 'lunet.nn.eager'
local raise, check_options, positional = options.raise, options.check, options.positional

return function(F, h)
  local need, pair, NO_OPTS = h.need, h.pair, h.NO_OPTS

  -- the options of f(x, a, b, c, d): an options table anywhere after the
  -- positional values (positional reads its last argument as the table: the
  -- trailing nils are left out)
  local function args_of(fn, names, known, a, b, c, d)
    local o
    if d ~= nil then o = positional(fn, names, a, b, c, d)
    elseif c ~= nil then o = positional(fn, names, a, b, c)
    elseif b ~= nil then o = positional(fn, names, a, b)
    elseif a ~= nil then o = positional(fn, names, a) end
    return check_options(fn, o, known) or NO_OPTS
  end

  local function floating(fn, x)
    if not x:is_floating_point() then raise(('%s: input must be a floating-point tensor, got %s'):format(fn, x.dtype)) end
  end

  -- ---- unfold, fold ----------------------------------------------------------------------

  local BLOCK_OPTS = { dilation = 'number|table', padding = 'number|table', stride = 'number|table' }
  local BLOCK_POS = { 'dilation', 'padding', 'stride' }

  -- kernel_size and the options (torch's positional dilation, padding, stride) checked
  local function geometry(fn, k, a, b, c)
    local o = args_of(fn, BLOCK_POS, BLOCK_OPTS, a, b, c)
    if k == nil then raise(fn .. ': expected kernel_size (a number or {h, w})') end
    local g = {}
    g.kh, g.kw = pair(fn, k, 'kernel_size')
    g.dh, g.dw = pair(fn, o.dilation, 'dilation', 1)
    g.ph, g.pw = pair(fn, o.padding, 'padding', 0)
    g.sh, g.sw = pair(fn, o.stride, 'stride', 1)
    return g
  end

  -- the number of blocks down and across an H x W plane
  local function blocks(fn, g, H, W)
    local oh = math.floor((H + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh) + 1
    local ow = math.floor((W + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw) + 1
    if oh < 1 or ow < 1 then
      raise(('%s: a %dx%d plane with kernel_size {%d, %d}, dilation {%d, %d}, padding {%d, %d}, stride {%d, %d} '
        .. 'gives %dx%d blocks (each must be at least 1)'):format(fn, H, W, g.kh, g.kw, g.dh, g.dw, g.ph, g.pw,
        g.sh, g.sw, math.max(oh, 0), math.max(ow, 0)))
    end
    return oh, ow
  end

  -- for each (ki, kj, block row, block column) in that order, the 1-based
  -- position of its element in the padded plane flattened (Wp columns):
  -- int64 {kh*kw*oh*ow}, made by broadcasting (nothing per element in Lua)
  local function block_index(x, g, oh, ow, Wp)
    local o = { device = x.device }
    local rows = factory.arange(0, g.kh, o):mul(g.dh):view(g.kh, 1, 1, 1)
      + factory.arange(0, oh, o):mul(g.sh):view(1, 1, oh, 1)
    local cols = factory.arange(0, g.kw, o):mul(g.dw):view(1, g.kw, 1, 1)
      + factory.arange(0, ow, o):mul(g.sw):view(1, 1, 1, ow)
    return (rows * Wp + cols + 1):reshape(g.kh * g.kw * oh * ow)
  end

  -- unfold(x (N, C, H, W) or (C, H, W), kernel_size[, {dilation = 1, padding = 0,
  -- stride = 1}]) -> (N, C*kh*kw, L) (or (C*kh*kw, L)), L the number of blocks;
  -- or torch's positional unfold(x, kernel_size, dilation, padding, stride)
  function F.unfold(x, k, a, b, c)
    need('unfold', x, 'input')
    local g = geometry('unfold', k, a, b, c)
    local nd = x.p.ndim
    if nd ~= 3 and nd ~= 4 then
      raise(('unfold: input must be 4-d (N, C, H, W) or 3-d (C, H, W), got %d-d {%s}'):format(nd,
        table.concat(x:size(), ',')))
    end
    floating('unfold', x)
    if nd == 3 then x = x:unsqueeze(1) end
    local N, Cc, H, W = x:size(1), x:size(2), x:size(3), x:size(4)
    local oh, ow = blocks('unfold', g, H, W)
    if g.ph + g.pw > 0 then x = F.pad(x, { g.pw, g.pw, g.ph, g.ph }) end
    local Wp = W + 2 * g.pw
    local idx = block_index(x, g, oh, ow, Wp)
    local out = x:reshape(N, Cc, (H + 2 * g.ph) * Wp):index_select(3, idx):view(N, Cc * g.kh * g.kw, oh * ow)
    if nd == 3 then return out:select(1, 1) end
    return out
  end

  -- fold's backward: the gradient's blocks (unfold of it)
  local function fold_backward(n, g)
    local N, Cc = tonumber(g.p.shape[0]), tonumber(g.p.shape[1])
    if n.ph + n.pw > 0 then g = F.pad(g, { n.pw, n.pw, n.ph, n.ph }) end
    local Hp, Wp = tonumber(g.p.shape[2]), tonumber(g.p.shape[3])
    return g:reshape(N, Cc, Hp * Wp):index_select(3, n.idx):view(N, Cc * n.K, n.L)
  end

  -- fold(x (N, C*kh*kw, L) or (C*kh*kw, L), output_size, kernel_size[, {dilation = 1,
  -- padding = 0, stride = 1}]) -> (N, C, H, W) (or (C, H, W)): each block added
  -- at its place; or torch's positional fold(x, output_size, kernel_size,
  -- dilation, padding, stride)
  function F.fold(x, output_size, k, a, b, c)
    need('fold', x, 'input')
    if output_size == nil then raise('fold: expected output_size (a number or {h, w})') end
    local H, W = pair('fold', output_size, 'output_size')
    local g = geometry('fold', k, a, b, c)
    local nd = x.p.ndim
    if nd ~= 2 and nd ~= 3 then
      raise(('fold: input must be 3-d (N, C*kh*kw, L) or 2-d (C*kh*kw, L), got %d-d {%s}'):format(nd,
        table.concat(x:size(), ',')))
    end
    floating('fold', x)
    if nd == 2 then x = x:unsqueeze(1) end
    local N, CK, L = x:size(1), x:size(2), x:size(3)
    local K = g.kh * g.kw
    if CK % K ~= 0 then
      raise(('fold: input has %d values per block (dim %d), not divisible by kernel_size %dx%d = %d'):format(CK,
        nd - 1, g.kh, g.kw, K))
    end
    local oh, ow = blocks('fold', g, H, W)
    if L ~= oh * ow then
      raise(('fold: input has %d blocks (dim %d), but output_size {%d, %d} with kernel_size {%d, %d}, '
        .. 'dilation {%d, %d}, padding {%d, %d}, stride {%d, %d} gives %dx%d = %d'):format(L, nd, H, W, g.kh, g.kw,
        g.dh, g.dw, g.ph, g.pw, g.sh, g.sw, oh, ow, oh * ow))
    end
    local Cc, Hp, Wp = CK / K, H + 2 * g.ph, W + 2 * g.pw
    local idx = block_index(x, g, oh, ow, Wp)
    -- (computed unrecorded: the node below records it as one op)
    local out = factory.zeros(N, Cc, Hp * Wp, { dtype = x.dtype, device = x.device })
    out:scatter_add_(3, idx:view(1, 1, K * L):expand(N, Cc, K * L):contiguous(), x:detach():reshape(N, Cc, K * L))
    out = out:view(N, Cc, Hp, Wp)
    if g.ph + g.pw > 0 then out = out:narrow(3, g.ph + 1, H):narrow(4, g.pw + 1, W):contiguous() end
    if A.records(x) then
      local node = A.node(fold_backward, 'fold', A.edge(x))
      node.idx, node.ph, node.pw, node.K, node.L = idx, g.ph, g.pw, K, L
      A.attach(out, node)
    end
    if nd == 2 then return out:select(1, 1) end
    return out
  end

  -- ---- normalize, local_response_norm, channel_shuffle -----------------------------------

  local NORMALIZE_OPTS, NORMALIZE_POS = { p = 'number', dim = 'number', eps = 'number' }, { 'p', 'dim', 'eps' }

  -- normalize(x[, {p = 2, dim = 2, eps = 1e-12}]) or normalize(x, p, dim, eps):
  -- x / max(||x||_p along dim, eps), as torch's (whose default dim 1 is lunet's 2)
  function F.normalize(x, a, b, c, d)
    need('normalize', x, 'input')
    local o = args_of('normalize', NORMALIZE_POS, NORMALIZE_OPTS, a, b, c, d)
    local p, eps = o.p or 2, o.eps or 1e-12
    if not (p > 0) then raise('normalize: p must be > 0 (or math.huge), got ' .. tostring(p)) end
    if not (eps >= 0) then raise('normalize: eps must be >= 0, got ' .. tostring(eps)) end
    local dim = T.cdim('normalize', x, o.dim or 2) + 1
    floating('normalize', x)
    if p == 2 and eps >= 1e-18 then
      -- max(sqrt(s), eps) as sqrt(max(s, eps^2)): an all-zero slice then
      -- passes no NaN back through sqrt (eps^2 still a float32 normal)
      return x / (x * x):sum(dim, true):clamp_min(eps * eps):sqrt()
    end
    return x / x:norm(p, dim, true):clamp_min(eps)
  end

  local LRN_OPTS, LRN_POS = { alpha = 'number', beta = 'number', k = 'number' }, { 'alpha', 'beta', 'k' }

  -- local_response_norm(x (N, C, *), size[, {alpha = 1e-4, beta = 0.75, k = 1}])
  -- or (x, size, alpha, beta, k): x / (k + alpha * mean of x^2 over the size
  -- channels around each, zeros past the ends)^beta, as torch's
  function F.local_response_norm(x, size, a, b, c, d)
    need('local_response_norm', x, 'input')
    if type(size) ~= 'number' or size % 1 ~= 0 or size < 1 or size >= 2 ^ 31 then
      raise('local_response_norm: size must be an integer >= 1, got ' .. tostring(size))
    end
    local o = args_of('local_response_norm', LRN_POS, LRN_OPTS, a, b, c, d)
    local nd = x.p.ndim
    if nd < 3 then
      raise(('local_response_norm: input must have at least 3 dims (N, C, *), got %d-d {%s}'):format(nd,
        table.concat(x:size(), ',')))
    end
    floating('local_response_norm', x)
    if x:numel() == 0 then return x end
    local s = x:size()
    -- the channels as the height of one plane: a (size x 1) average pool
    local sq = (x * x):reshape(s[1], 1, s[2], x:numel() / (s[1] * s[2]))
    sq = F.pad(sq, { 0, 0, math.floor(size / 2), math.floor((size - 1) / 2) })
    local div = F.avg_pool2d(sq, { size, 1 }, 1):reshape(s)
    return x / (div * (o.alpha or 1e-4) + (o.k or 1)):pow(o.beta or 0.75)
  end

  -- channel_shuffle(x (N, C, *), groups): the channels as groups x C/groups, transposed
  function F.channel_shuffle(x, groups)
    need('channel_shuffle', x, 'input')
    if type(groups) ~= 'number' or groups % 1 ~= 0 or groups < 1 or groups >= 2 ^ 31 then
      raise('channel_shuffle: groups must be an integer >= 1, got ' .. tostring(groups))
    end
    local s = x:size()
    if #s < 3 then
      raise(('channel_shuffle: input must have more than 2 dims (N, C, *), got %d-d {%s}'):format(#s,
        table.concat(s, ',')))
    end
    if s[2] % groups ~= 0 then
      raise(('channel_shuffle: input has %d channels, not divisible by groups %d'):format(s[2], groups))
    end
    local rest = 1
    for i = 3, #s do rest = rest * s[i] end
    local v = x:reshape(s[1], groups, s[2] / groups, rest)
    local t = v:transpose(2, 3)
    local y = t:reshape(s)
    -- (its own views of x, which would hold x's storage until the collector
    -- found them, freed: lunet.nn.eager; never x, nor a base y views)
    if eager.active() then
      eager.consumed(t, y, x)
      eager.consumed(v, y, x)
    end
    return y
  end
end
