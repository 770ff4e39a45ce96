-- lunet.tensor_guard: a Tensor method called on something that is not a
-- tensor (lunet.Tensor.view(5, 3), lunet.item({})) raises
-- "view: self must be a tensor, got number" instead of a raw Lua error from
-- deep inside the method. install(Tensor) wraps every method once, after the
-- tensor modules and autograd have defined theirs; a tensor self costs one
-- type test, a raw field read and a tail call.
local typename = require('lunet.core').typename   -- (type, or 'tensor')

local M = {}


-- methods whose first argument may be a number (2 + t reaches add(2, t)) or
-- a list of tensors (cat, stack): they check their arguments themselves
M.free_self = {
  add = true, sub = true, mul = true, div = true, pow = true, fmod = true, remainder = true, atan2 = true,
  hypot = true, logaddexp = true, logaddexp2 = true, xlogy = true, copysign = true,
  bitwise_and = true, bitwise_or = true, bitwise_xor = true, bitwise_left_shift = true,
  bitwise_right_shift = true, gcd = true, lcm = true,
  eq = true, ne = true, lt = true, le = true, gt = true, ge = true, maximum = true, minimum = true,
  logical_and = true, logical_or = true, where = true, cat = true, concat = true, stack = true,
}

local RAW = { 'attempt to ', 'bad argument #', 'cannot convert', 'has no member named' }

-- the method's own error when it names the method ("exp: input must be a
-- tensor, got number"), else ours; at the caller's line
local function bad_self(name, f, self, ...)
  local ok, err = pcall(f, self, ...)
  if not ok and type(err) == 'string' then
    err = err:gsub('^[^:\n]*:%d+: ', '', 1)
    local own = err:find(name:gsub('_$', ''), 1, true)
    for _, r in ipairs(RAW) do own = own and not err:find(r, 1, true) end
    if own then error(err, 3) end
  end
  error(('%s: self must be a tensor, got %s'):format(name, typename(self)), 3)
end

local function guard(name, f)
  return function(self, ...)
    if type(self) ~= 'table' or rawget(self, '_record') == nil then bad_self(name, f, self, ...) end
    return f(self, ...)
  end
end

local installed = setmetatable({}, { __mode = 'k' })
function M.install(Tensor)
  if installed[Tensor] then return end
  installed[Tensor] = true
  local names = {}
  for k, v in pairs(Tensor) do
    if type(v) == 'function' and type(k) == 'string' and not M.free_self[k] then names[#names + 1] = k end
  end
  for _, k in ipairs(names) do Tensor[k] = guard(k, Tensor[k]) end
end

return M
