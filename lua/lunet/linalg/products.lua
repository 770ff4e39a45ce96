-- lunet.linalg.products: matrix_power and multi_dot, made of matmul (and
-- inv), so autograd records them as it records those.
local L = require 'lunet.linalg.lapack'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local raise, typename, is_tensor = require('lunet.options').raise, core.typename, T.is_tensor

return function(linalg)
  -- matrix_power(A, n): A^n by squaring; n = 0 the identity, n < 0 inv(A)^-n
  function linalg.matrix_power(A, n)
    local fn = 'linalg.matrix_power'
    if not is_tensor(A) then raise(('%s: A must be a tensor, got %s'):format(fn, typename(A))) end
    if type(n) ~= 'number' or n % 1 ~= 0 then
      raise(('%s: n must be an integer, got %s'):format(fn, type(n) == 'number' and tostring(n) or typename(n)))
    end
    if A:dim() < 2 or A:size(-1) ~= A:size(-2) then
      raise(('%s: A must be a batch of square matrices, got a tensor of size {%s}'):format(fn,
        table.concat(A:size(), ',')))
    end
    if n == 0 then
      local I = L.eye(A:size(-1), A.dtype)
      if A.device ~= I.device then I = I:to(A.device) end
      return I:expand(A:size()):clone()
    end
    if n < 0 then A, n = linalg.inv(A), -n end
    local result, base = nil, A
    while true do
      if n % 2 == 1 then result = result and result:matmul(base) or base end
      n = math.floor(n / 2)
      if n == 0 then break end
      base = base:matmul(base)
    end
    return result == A and A:clone() or result
  end

  -- multi_dot({A, B, ...}): A B ...; the first may be a vector (a row), the
  -- last too (a column), the others 2-d
  function linalg.multi_dot(list)
    local fn = 'linalg.multi_dot'
    if type(list) ~= 'table' or is_tensor(list) then
      raise(('%s: expected a list of tensors, got %s'):format(fn, typename(list)))
    end
    local k = #list
    if k < 2 then raise(('%s: expected at least 2 tensors, got %d'):format(fn, k)) end
    for i = 1, k do
      local t = list[i]
      if not is_tensor(t) then raise(('%s: element %d must be a tensor, got %s'):format(fn, i, typename(t))) end
      local d = t:dim()
      if not (d == 2 or (d == 1 and (i == 1 or i == k))) then
        raise(('%s: tensor %d must be 2-d%s, got %d-d'):format(fn, i, (i == 1 or i == k) and ' or 1-d' or '', d))
      end
    end
    local first, last = list[1], list[k]
    local r = first:dim() == 1 and first:unsqueeze(1) or first
    for i = 2, k do
      local t = list[i]
      if i == k and t:dim() == 1 then t = t:unsqueeze(2) end
      if r:size(2) ~= t:size(1) then
        raise(('%s: tensors %d and %d cannot be multiplied (%dx%d and %dx%d)'):format(fn, i - 1, i, r:size(1), r:size(2),
          t:size(1), t:size(2)))
      end
      r = r:matmul(t)
    end
    if first:dim() == 1 then r = r:squeeze(1) end
    if last:dim() == 1 then r = r:squeeze(-1) end
    return r
  end
end
