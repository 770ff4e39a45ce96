-- The Tensor methods (and so the lunet.* functional forms) torch 1.13 has
-- for linalg: t:det(), t:slogdet(), t:logdet(), t:inverse(),
-- t:matrix_power(n), t:pinverse([rcond = 1e-15]), t:lu([{pivot, get_infos}])
-- (torch.lu: LU, pivots[, info]; a singular input is factored, no error),
-- lunet.lu_unpack(LU, pivots) (P, L, U). (torch.cholesky, qr and
-- svd are deprecated there with other conventions: use lunet.linalg's.)
-- lunet.linalg loads on the first call.
local Tensor = require('lunet.tensor').Tensor

local raise = require('lunet.options').raise

local function L() return require 'lunet.linalg' end

-- f(...) with its errors naming the method (name) instead of linalg's function
local function as(name, f, ...)
  local ok, a, b = pcall(f, ...)
  if ok then return a, b end
  local msg = tostring(a)
  local rest = msg:match('linalg%.[%w_]+: (.*)$')
  if not rest then error(a, 0) end
  raise(name .. ': ' .. rest)
end

function Tensor.det(self) return L().det(self) end
function Tensor.slogdet(self) return L().slogdet(self) end
function Tensor.inverse(self) return as('inverse', L().inv, self) end
function Tensor.matrix_power(self, n) return L().matrix_power(self, n) end
-- logdet: log det, NaN for a negative determinant, -inf for a zero one
function Tensor.logdet(self)
  local s, la = as('logdet', L().slogdet, self)
  return la + s:log()
end
-- pinverse(rcond): pinv with rtol = rcond (torch's default 1e-15)
function Tensor.pinverse(self, rcond)
  if rcond ~= nil and type(rcond) ~= 'number' then
    raise('pinverse: rcond must be a number, got ' .. require('lunet.core').typename(rcond))
  end
  return as('pinverse', L().pinv, self, { rtol = rcond or 1e-15 })
end

local LU_OPTS = { pivot = 'boolean', get_infos = 'boolean' }
function Tensor.lu(self, opts)
  opts = require('lunet.options').check('lu', opts, LU_OPTS) or {}
  local ok, LU, piv, info = pcall(L().lu_factor_ex, self, { pivot = opts.pivot })
  if not ok then raise((tostring(LU):gsub('^.-linalg%.lu_factor_ex: ', 'lu: '))) end
  if opts.get_infos then return LU, piv, info end
  return LU, piv
end
function Tensor.lu_unpack(LU, pivots) return L().lu_unpack(LU, pivots) end

return Tensor
