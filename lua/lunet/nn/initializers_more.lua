-- nn.init, continued (lunet.nn.initializers adds these to its table):
-- xavier_normal_, trunc_normal_, orthogonal_, eye_, dirac_, and torch's
-- no_grad around every initialiser, so that a leaf parameter that requires
-- grad can be initialised in place.
local ffi = require 'ffi'
local core = require 'lunet.core'
local options = require 'lunet.options'
local S = require 'lunet.autograd.mode'
local need_tensor = require('lunet.tensor').need_tensor
local fail = options.fail
local sqrt, exp, log, abs, floor = math.sqrt, math.exp, math.log, math.abs, math.floor

local function factory() return require 'lunet.factory' end   -- (loaded after nn)

local function number(fname, what, v, default)
  if v == nil then return default end
  if type(v) ~= 'number' or v ~= v then fail(fname, ('%s must be a number, got %s'):format(what, tostring(v))) end
  return v
end

-- erf in float64 (Lua has none): erf(x) = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (2n+1)!!,
-- a series of positive terms (no cancellation); erf(6) is 1 in double
local TWO_SQRTPI = 2 / sqrt(math.pi)
local function erf(x)
  local ax = abs(x)
  if ax >= 6 then return x > 0 and 1 or -1 end
  local x2, term, sum, k = 2 * ax * ax, ax, ax, 1
  while term > sum * 1e-17 do k = k + 2; term = term * x2 / k; sum = sum + term end
  local r = TWO_SQRTPI * exp(-ax * ax) * sum
  return x < 0 and -r or r
end

local function norm_cdf(x) return (1 + erf(x / sqrt(2))) / 2 end

-- writes a float64 host array of t's shape into t (cast to its dtype)
local function write(t, buf)
  t:copy_(factory().from_buffer(buf, t:size(), 'float64', t.device))
  return t
end

return function(init)
  init._erf = erf   -- (for the specs)

  function init.xavier_normal_(w, gain)
    gain = number('init.xavier_normal_', 'gain', gain, 1)
    local fan_in, fan_out = init.fans(need_tensor('init.xavier_normal_', w, 'tensor'))
    return w:normal_(0, gain * sqrt(2 / (fan_in + fan_out)))
  end

  -- trunc_normal_(t, mean = 0, std = 1, a = -2, b = 2): torch's inverse-CDF
  -- method, in t's dtype as torch: uniform in [2 cdf(a) - 1, 2 cdf(b) - 1],
  -- erfinv, scaled, clamped
  function init.trunc_normal_(t, mean, std, a, b)
    local fname = 'init.trunc_normal_'
    need_tensor(fname, t, 'tensor')
    mean, std = number(fname, 'mean', mean, 0), number(fname, 'std', std, 1)
    a, b = number(fname, 'a', a, -2), number(fname, 'b', b, 2)
    if std < 0 then fail(fname, 'std must be non-negative, got ' .. std) end
    if not (a < b) then fail(fname, ('a must be less than b, got a = %s, b = %s'):format(a, b)) end
    if std == 0 then return t:fill_(math.min(math.max(mean, a), b)) end
    local l, u = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    return t:uniform_(2 * l - 1, 2 * u - 1):erfinv_():mul_(std * sqrt(2)):add_(mean):clamp_(a, b)
  end

  -- orthogonal_(w, gain = 1): torch's method, the Q of the QR of a normal
  -- (rows, cols) matrix (of its transpose when rows < cols), each column's
  -- sign that of R's diagonal, times gain. The QR is LAPACK's (dgeqrf,
  -- dorgqr of the OpenBLAS liblunet links) in float64: Householder in Lua
  -- would take minutes on a 4096 x 4096 weight.
  local lapack
  local function get_lapack()
    if lapack then return lapack end
    pcall(ffi.cdef, [[
      void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work, const int *lwork, int *info);
      void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau, double *work,
                   const int *lwork, int *info);
    ]])
    local ok, geqrf, orgqr = pcall(function() return core.C.dgeqrf_, core.C.dorgqr_ end)
    if not ok then fail('init.orthogonal_', 'needs LAPACK (dgeqrf_, dorgqr_), which the BLAS liblunet links lacks') end
    lapack = { geqrf = geqrf, orgqr = orgqr }
    return lapack
  end

  function init.orthogonal_(w, gain)
    local fname = 'init.orthogonal_'
    need_tensor(fname, w, 'tensor')
    gain = number(fname, 'gain', gain, 1)
    if w:dim() < 2 then fail(fname, 'only tensors with 2 or more dimensions are supported') end
    if w:numel() == 0 then return w end
    local rows = w:size(1)
    local cols = w:numel() / rows
    local flat = factory().randn(rows, cols, { dtype = w.dtype, device = w.device }):read()
    -- M (m x n, m >= n) column-major: the row-major flat matrix is M when
    -- rows < cols (M = flat^T), its transpose otherwise
    local m, n = math.max(rows, cols), math.min(rows, cols)
    local A = ffi.new('double[?]', m * n)
    if rows < cols then
      for i = 0, m * n - 1 do A[i] = flat[i] end
    else
      for r = 0, rows - 1 do for c = 0, cols - 1 do A[c * m + r] = flat[r * cols + c] end end
    end
    local L = get_lapack()
    local im, in_, lwork, info = ffi.new('int[1]', m), ffi.new('int[1]', n), ffi.new('int[1]', 64 * n), ffi.new('int[1]')
    local tau, work = ffi.new('double[?]', n), ffi.new('double[?]', 64 * n)
    L.geqrf(im, in_, A, im, tau, work, lwork, info)
    if info[0] ~= 0 then fail(fname, 'LAPACK dgeqrf failed (info ' .. info[0] .. ')') end
    local sign = ffi.new('double[?]', n)
    for k = 0, n - 1 do local d = A[k * m + k]; sign[k] = d > 0 and gain or d < 0 and -gain or 0 end
    L.orgqr(im, in_, in_, A, im, tau, work, lwork, info)
    if info[0] ~= 0 then fail(fname, 'LAPACK dorgqr failed (info ' .. info[0] .. ')') end
    local out = ffi.new('double[?]', m * n)   -- w's rows x cols, row-major
    if rows < cols then
      for r = 0, rows - 1 do for c = 0, cols - 1 do out[r * cols + c] = A[r * m + c] * sign[r] end end
    else
      for r = 0, rows - 1 do for c = 0, cols - 1 do out[r * cols + c] = A[c * m + r] * sign[c] end end
    end
    return write(w, out)
  end

  function init.eye_(w)
    need_tensor('init.eye_', w, 'tensor')
    if w:dim() ~= 2 then fail('init.eye_', 'only tensors with 2 dimensions are supported, got ' .. w:dim()) end
    return w:copy_(factory().eye(w:size(1), w:size(2), { dtype = w.dtype, device = w.device }))
  end

  -- dirac_(w, groups = 1): (out, in, k...) weights (3 to 5 dims) that pass
  -- each group's first min(out / groups, in) channels through unchanged
  function init.dirac_(w, groups)
    local fname = 'init.dirac_'
    need_tensor(fname, w, 'tensor')
    groups = number(fname, 'groups', groups, 1)
    if groups < 1 or groups % 1 ~= 0 then fail(fname, 'groups must be a positive integer, got ' .. groups) end
    local nd = w:dim()
    if nd < 3 or nd > 5 then fail(fname, 'only tensors with 3, 4, or 5 dimensions are supported, got ' .. nd) end
    local s = w:size()
    if s[1] % groups ~= 0 then fail(fname, ('dim 1 (%d) must be divisible by groups (%d)'):format(s[1], groups)) end
    local per_group = s[1] / groups
    -- offset of the centre of a (k...) kernel, and the stride of one input channel
    local centre, kernel = 0, 1
    for d = nd, 3, -1 do centre = centre + floor(s[d] / 2) * kernel; kernel = kernel * s[d] end
    local out = ffi.new('double[?]', math.max(w:numel(), 1))   -- (zeroed)
    for g = 0, groups - 1 do
      for d = 0, math.min(per_group, s[2]) - 1 do
        out[((g * per_group + d) * s[2] + d) * kernel + centre] = 1
      end
    end
    return write(w, out)
  end

  -- as torch: every initialiser runs without recording
  for name, f in pairs(init) do
    if type(f) == 'function' and name:sub(-1) == '_' then
      init[name] = function(...)
        local old = S.grad_enabled
        S.grad_enabled = false
        local ok, r = pcall(f, ...)
        S.grad_enabled = old
        if not ok then error(r, 0) end
        return r
      end
    end
  end
end
