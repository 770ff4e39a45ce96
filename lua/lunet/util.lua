-- lunet.util: small helpers shared by modules: a monotonic clock, a median.
local ffi = require 'ffi'
pcall(ffi.cdef, [[
struct ln_timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk_id, struct ln_timespec *tp);
]])

local util = {}
local ts = ffi.new('struct ln_timespec')
local CLOCK_MONOTONIC = 1

-- Seconds from an arbitrary origin, monotonic, sub-microsecond resolution.
function util.clock()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- The q-quantile (0 < q <= 1) of a non-empty list of numbers, the nearest
-- element (sorts the list in place): 0.25, the lower quartile.
function util.quantile(xs, q)
  table.sort(xs)
  return xs[math.max(1, math.floor(q * #xs + 0.5))]
end

-- The median of a list of numbers (sorts the list in place).
function util.median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

return util
