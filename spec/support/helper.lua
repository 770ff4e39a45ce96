-- Loaded before the specs: shared assertions for tensors.
local say = require 'say'
local assert = require 'luassert'

local function flat(x, out)
  out = out or {}
  if type(x) == 'table' then for _, v in ipairs(x) do flat(v, out) end
  else out[#out + 1] = x end
  return out
end

-- assert.tensor_near(t, expected_table_or_tensor, tol): same shape, values within
-- tol (absolute + relative).
local function tensor_near(state, args)
  local t, expected, tol = args[1], args[2], args[3] or 1e-6
  local lunet = require 'lunet'
  if lunet.is_tensor(expected) then
    if table.concat(t:size(), ',') ~= table.concat(expected:size(), ',') then
      state.failure_message = ('shapes differ: {%s} vs {%s}'):format(table.concat(t:size(), ','), table.concat(expected:size(), ','))
      return false
    end
    expected = expected:totable()
  end
  local a, b = flat(t:totable()), flat(expected)
  if #a ~= #b then
    state.failure_message = ('element counts differ: %d vs %d'):format(#a, #b)
    return false
  end
  for i = 1, #a do
    local x, y = a[i], b[i]
    if type(x) == 'boolean' or type(y) == 'boolean' then
      if x ~= y then state.failure_message = ('element %d: %s vs %s'):format(i, tostring(x), tostring(y)); return false end
    elseif not (x == y or (x ~= x and y ~= y) or math.abs(x - y) <= tol * (1 + math.abs(y))) then
      state.failure_message = ('element %d: %.9g vs expected %.9g (tol %g)'):format(i, x, y, tol)
      return false
    end
  end
  return true
end
say:set('assertion.tensor_near.positive', 'Expected tensors to be near')
say:set('assertion.tensor_near.negative', 'Expected tensors to differ')
assert:register('assertion', 'tensor_near', tensor_near, 'assertion.tensor_near.positive', 'assertion.tensor_near.negative')
