-- lunet.tensor_dim: what the Tensor methods working along one dim share
-- (sort's family, the order statistics): the argument checks, each error
-- naming the method at the user's line (options.raise), and the sort
-- kernel's positions.
local core = require 'lunet.core'
local options = require 'lunet.options'
local raise = options.raise
local typename = core.typename
local T = require 'lunet.tensor'
local wrap = T.wrap
local C = core.C

local M = {}

-- x's C tensor, or an error when x is not a tensor
function M.need(fn, x) return options.need_tensor(fn, x).p end

-- a boolean option (default when nil)
function M.flag(fn, what, v, default)
  if v == nil then return default end
  if type(v) ~= 'boolean' then raise(('%s: %s must be a boolean, got %s'):format(fn, what, typename(v))) end
  return v
end

-- 1-based (or negative) dim -> C dim (nil: the last); a 0-d tensor takes 1
-- or -1 (PyTorch's 0 or -1)
function M.to_cdim(fn, self, d)
  if d == nil then d = -1 end
  if type(d) ~= 'number' or d % 1 ~= 0 then
    raise(('%s: dim must be an integer, got %s'):format(fn, type(d) == 'number' and tostring(d) or typename(d)))
  end
  local nd = self.p.ndim
  local n = nd == 0 and 1 or nd
  local c = d < 0 and n + d or d - 1
  if c < 0 or c >= n then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, d, nd)) end
  return c
end

-- the 1-based positions (int64) that sort self along C dim cd (NaN above
-- every number); k < 0: all of them, else the first k
function M.positions(fn, self, cd, descending, k)
  local r = C.ln_argsort(self.p, cd, descending and 1 or 0, k)
  if r == nil then raise(fn .. ': ' .. core.last_error():gsub('^%w+: ', '', 1)) end
  return wrap(r):add_(1)
end

return M
