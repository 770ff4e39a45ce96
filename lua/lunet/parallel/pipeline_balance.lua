-- How parallel.Pipeline assigns its model's atoms to stages.
--   counts(atom_list, stages, balance, lvl) -> {atoms of stage 1, ...}
-- balance: a list of atom counts (each >= 1, summing to the atom count), or
-- 'params' (the default): contiguous stages whose largest parameter count is
-- the least possible (an atom without parameters weighs 1, so that they
-- spread too).
local M = {}

local function fail(msg, lvl) error('Pipeline: ' .. msg, lvl + 1) end

-- contiguous split of weights w into S runs (each >= 1 item) minimising the
-- largest run's sum (dynamic programming over prefix sums; ties: earlier cuts)
function M.split(w, S)
  local n = #w
  local pre = { [0] = 0 }
  for i = 1, n do pre[i] = pre[i - 1] + w[i] end
  local best, cut = {}, {}
  for s = 1, S do best[s], cut[s] = {}, {} end
  for i = 1, n do best[1][i] = pre[i] end
  for s = 2, S do
    for i = s, n do
      local b, c = math.huge, nil
      for j = s - 1, i - 1 do
        local v = math.max(best[s - 1][j], pre[i] - pre[j])
        if v < b then b, c = v, j end
      end
      best[s][i], cut[s][i] = b, c
    end
  end
  local counts, i = {}, n
  for s = S, 2, -1 do
    local j = cut[s][i]
    counts[s] = i - j
    i = j
  end
  counts[1] = i
  return counts
end

function M.counts(list, S, balance, lvl)
  lvl = lvl + 1
  local n = #list
  if type(balance) == 'table' then
    if #balance ~= S then fail(('balance has %d entries for %d stages'):format(#balance, S), lvl) end
    local total = 0
    for s = 1, S do
      local c = balance[s]
      if type(c) ~= 'number' or c % 1 ~= 0 or c < 1 then
        fail(('balance[%d] must be an integer >= 1 (atoms of stage %d), got %s'):format(s, s, tostring(c)), lvl)
      end
      total = total + c
    end
    if total ~= n then fail(('balance sums to %d atoms, the model has %d'):format(total, n), lvl) end
    return { unpack(balance) }
  end
  if balance == nil or balance == 'params' then
    local w = {}
    for i, a in ipairs(list) do w[i] = a.module:num_parameters() + 1 end
    return M.split(w, S)
  end
  fail(("balance must be a list of atom counts or 'params', got %s"):format(tostring(balance)), lvl)
end

return M
