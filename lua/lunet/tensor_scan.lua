-- lunet.tensor_scan: cumulative sums and products as Tensor methods, with
-- PyTorch's names and 1-based dims:
--   t:cumsum(dim[, {dtype =}]) or t:cumsum({dim =, dtype =})
--   t:cumprod(dim[, {dtype =}]) or t:cumprod({dim =, dtype =})
-- Element i along dim is the sum (product) of elements 1..i along dim; the
-- result has t's shape. dim is required (negative counts from the end; a 0-d
-- tensor takes 1 or -1). Dtypes as PyTorch's: a float tensor keeps its
-- dtype, an integer or bool one gives int64; dtype = casts t to it before
-- the scan (not 'bool'). Also lunet.cumsum(t, dim), lunet.cumprod(t, dim)
-- (lunet's functional forms of the methods). The C kernel is ln_scan;
-- autograd's formulas are in lunet.autograd.formulas.scan.
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line, however deep lunet's frames)
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
require 'lunet.tensor_reduce'   -- (T.to_cdim: a dim checked as the reductions check theirs)
local C = core.C
local Tensor, wrap, is_tensor = T.Tensor, T.wrap, T.is_tensor

local M = {}
local SCAN_OPTS = { dim = 'number', dtype = 'string' }

-- (self, dim, opts) or (self, {dim =, dtype =}) -> C dim, dtype id (-1: PyTorch's default)
function M.args(fn, self, dim, opts)
  if not is_tensor(self) then raise(('%s: input must be a tensor, got %s'):format(fn, typename(self))) end
  if is_table(dim) then
    if opts ~= nil then raise(fn .. ': expected an options table alone, got a second argument') end
    dim, opts = nil, dim
  end
  local dt = -1
  if opts ~= nil then
    local o = options.check(fn, opts, SCAN_OPTS)
    if o.dim ~= nil then
      if dim ~= nil then raise(fn .. ': dim given twice (as an argument and as an option)') end
      dim = o.dim
    end
    if o.dtype ~= nil then dt = core.dtype_id(fn, o.dtype) end
  end
  if dim == nil then raise(fn .. ': dim is required (1-based; negative counts from the end)') end
  if type(dim) ~= 'number' or dim % 1 ~= 0 then
    raise(('%s: dim must be an integer, got %s'):format(fn, type(dim) == 'number' and tostring(dim) or typename(dim)))
  end
  if self.p.ndim == 0 then   -- (one element: PyTorch's dim 0 or -1)
    if dim ~= 1 and dim ~= -1 then raise(('%s: dim %d out of range for a 0-d tensor (1 or -1)'):format(fn, dim)) end
    return 0, dt
  end
  return T.to_cdim(fn, self, dim), dt
end

local function scanner(fn, op)
  return function(self, dim, opts)
    local cd, dt = M.args(fn, self, dim, opts)
    local r = wrap(C.ln_scan(op, self.p, cd, dt))
    return r
  end
end

Tensor.cumsum = scanner('cumsum', C.LN_SCAN_SUM)
Tensor.cumprod = scanner('cumprod', C.LN_SCAN_PROD)

return M
