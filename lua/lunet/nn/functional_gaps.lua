-- lunet.nn.functional's rrelu/rrelu_, gumbel_softmax, pdist, the
-- *_with_indices aliases of the max pools and the deprecated upsample,
-- upsample_nearest and upsample_bilinear, as PyTorch 1.13's, composed from
-- differentiable tensor ops. The random ones draw from lunet's RNG
-- (lunet.manual_seed).
-- Installed into F by lunet.nn.functional, which hands over its helpers.
local factory = require 'lunet.factory'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local is_table = require('lunet.core').is_table
local raise, check_options, positional = options.raise, options.check, options.positional
local NO = setmetatable({}, { __newindex = function() error('functional: internal table is read-only', 2) end })
local TINY = 1.1754943508222875e-38   -- float32's least normal: keeps -log(E) finite

return function(F, h, unpool, interp)
  local need, in_place, with_indices = h.need, h.in_place, unpool.with_indices

  local function args(fn, names, known, opts, ...)
    if opts ~= nil and (not is_table(opts) or opts[1] ~= nil) or select('#', ...) > 0 then
      opts = positional(fn, names, opts, ...)
    end
    return opts and check_options(fn, opts, known) or NO
  end
  local function need_float(fn, x, what)
    need(fn, x, what or 'input')
    if not x:is_floating_point() then
      raise(('%s: %s must be a floating-point tensor, got %s'):format(fn, what or 'input', x.dtype))
    end
  end
  local function rand_like(x) return factory.rand(x:size(), { dtype = x.dtype, device = x.device }) end

  -- ---- rrelu ------------------------------------------------------------------------------

  -- rrelu(x[, lower = 1/8[, upper = 1/3[, training = false[, inplace = false]]]]) or
  -- rrelu(x, {lower, upper, training, inplace}): x where x > 0, else x times a
  -- slope: (lower + upper) / 2 in eval, uniform in [lower, upper] per element
  -- in training (drawn each call; the gradient is that slope)
  local RR_OPTS, RR_POS = { lower = 'number', upper = 'number', training = 'boolean', inplace = 'boolean' },
    { 'lower', 'upper', 'training', 'inplace' }
  local function rrelu_eval(x, lo, hi) return x:where(x:gt(0), x * ((lo + hi) / 2)) end
  local function rrelu_train(x, lo, hi) return x:where(x:gt(0), x * (rand_like(x) * (hi - lo) + lo)) end
  local function rrelu(fn, x, force, ...)
    local o = args(fn, RR_POS, RR_OPTS, ...)
    need_float(fn, x)
    local lo, hi = o.lower or 1 / 8, o.upper or 1 / 3
    if not (lo <= hi) then raise(('%s: lower (%s) must be <= upper (%s)'):format(fn, lo, hi)) end
    local fwd = o.training and rrelu_train or rrelu_eval
    if force or o.inplace then return in_place(fn, x, fwd, lo, hi) end
    return fwd(x, lo, hi)
  end
  function F.rrelu(x, ...) return rrelu('rrelu', x, false, ...) end
  function F.rrelu_(x, ...) return rrelu('rrelu_', x, true, ...) end

  -- ---- gumbel_softmax ---------------------------------------------------------------------

  -- gumbel_softmax(logits[, {tau = 1, hard = false, dim = -1}]) or torch's
  -- positional (logits, tau, hard, eps, dim) (eps unused, as torch's):
  -- softmax((logits + g) / tau) with g ~ Gumbel(0, 1) per element; hard gives
  -- the one-hot of its argmax with the soft sample's gradient (straight through)
  local GS_OPTS, GS_POS = { tau = 'number', hard = 'boolean', eps = 'number', dim = 'number' },
    { 'tau', 'hard', 'eps', 'dim' }
  function F.gumbel_softmax(logits, ...)
    local fn = 'gumbel_softmax'
    local o = args(fn, GS_POS, GS_OPTS, ...)
    need_float(fn, logits, 'logits')
    local d = T.cdim(fn, logits, o.dim or -1) + 1
    -- -log(E), E ~ Exp(1) as -log(1 - U)
    local g = -(-(-rand_like(logits)):log1p()):clamp_min(TINY):log()
    local y = F.softmax((logits + g) / (o.tau or 1), d)
    if not o.hard then return y end
    local hard = y:new_zeros(y:size()):scatter(d, y:argmax(d, true), 1)
    return hard - y:detach() + y
  end

  -- ---- pdist ------------------------------------------------------------------------------

  -- pdist(x (N, M)[, p = 2]): the p-norm distances of every pair of rows i < j,
  -- in row-major order ((1,2), (1,3), ..., (2,3), ...): N(N-1)/2 values, the
  -- upper triangle of cdist(x, x, p). p >= 0, math.huge the max norm; a zero
  -- distance passes a zero gradient, as torch's
  function F.pdist(x, p)
    local fn = 'pdist'
    need_float(fn, x)
    if x.p.ndim ~= 2 then raise(('pdist: input must be 2-d (N, M), got %d-d {%s}'):format(x.p.ndim,
      table.concat(x:size(), ','))) end
    if p == nil then p = 2 end
    if type(p) ~= 'number' or not (p >= 0) then raise('pdist: p must be a number >= 0, got ' .. tostring(p)) end
    local n = x:size(1)
    if n < 2 then return x:new_zeros(0) + x:sum() * 0 end
    local r = factory.arange(1, n + 1, { dtype = 'int64', device = x.device })
    local mask = r:view(1, n):gt(r:view(n, 1))
    local i = r:view(n, 1):expand(n, n):masked_select(mask)
    local j = r:view(1, n):expand(n, n):masked_select(mask)
    local d = (x:index_select(1, i) - x:index_select(1, j)):abs()
    if p == 0 then return d:ne(0):to(x.dtype):sum(2) + (d * 0):sum(2) end   -- (a zero gradient, as torch's)
    if p == math.huge then return (d:max(2)) end
    if p == 1 then return d:sum(2) end
    if p < 1 then   -- (|d|^p has no finite gradient at 0: torch's is 0 there)
      local z = d:eq(0)
      d = d:where(z:logical_not(), 1):pow(p):where(z:logical_not(), 0)
    else
      d = d:pow(p)
    end
    local s = d:sum(2)
    local nz = s:ne(0)
    return s:where(nz, 1):pow(1 / p):where(nz, 0)
  end

  -- ---- aliases ----------------------------------------------------------------------------

  -- max_pool1d/2d/3d_with_indices(x, kernel_size, ...) and
  -- adaptive_max_pool1d/2d/3d_with_indices(x, output_size): the pools with
  -- return_indices = true (torch's names for that form), returning output, indices
  local MAX_POS = { 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices' }
  for _, nd in ipairs({ '1d', '2d', '3d' }) do
    local pool, adaptive = F['max_pool' .. nd], F['adaptive_max_pool' .. nd]
    local name = 'max_pool' .. nd .. '_with_indices'
    F[name] = function(x, k, ...) return pool(x, k, with_indices(name, MAX_POS, ...)) end
    F['adaptive_' .. name] = function(x, size) return adaptive(x, size, true) end
  end

  -- upsample(x[, {size, scale_factor, mode = 'nearest', align_corners}]) or
  -- torch's positional (x, size, scale_factor, mode, align_corners): interpolate
  -- under its deprecated name; upsample_nearest(x, size, scale_factor) its
  -- 'nearest' mode, upsample_bilinear(x, size, scale_factor) 'bilinear' with
  -- align_corners = true, as torch's
  local UP_OPTS, UP_POS = { size = 'number|table', scale_factor = 'number|table', mode = 'string',
    align_corners = 'boolean' }, { 'size', 'scale_factor', 'mode', 'align_corners' }
  local FIXED_OPTS, FIXED_POS = { size = 'number|table', scale_factor = 'number|table' }, { 'size', 'scale_factor' }
  function F.upsample(x, ...)
    local o = args('upsample', UP_POS, UP_OPTS, ...)
    return interp.interpolate(x, interp.interp_geometry('upsample', o), 'upsample')
  end
  local function fixed(fn, mode, align, x, ...)
    local o = args(fn, FIXED_POS, FIXED_OPTS, ...)
    return interp.interpolate(x, interp.interp_geometry(fn, { size = o.size, scale_factor = o.scale_factor,
      mode = mode, align_corners = align }), fn)
  end
  function F.upsample_nearest(x, ...) return fixed('upsample_nearest', 'nearest', nil, x, ...) end
  function F.upsample_bilinear(x, ...) return fixed('upsample_bilinear', 'bilinear', true, x, ...) end
end
