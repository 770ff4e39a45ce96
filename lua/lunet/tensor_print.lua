-- lunet.tensor_print: tostring(t), in Torch7's layout: the values (matrices
-- as rows, higher dims as (i,.,.) slices; large tensors summarised with
-- '...'), then a line with dtype, shape and device.
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local Tensor, mt = T.Tensor, T.mt

local EDGE, LIMIT = 3, 1000
local GAP = {}   -- marks the '...' between shown edges

-- The indices of a dim to show: all, or the first and last EDGE.
local function shown(n, summarise)
  local idx = {}
  if summarise and n > 2 * EDGE then
    for i = 1, EDGE do idx[#idx + 1] = i end
    idx[#idx + 1] = GAP
    for i = n - EDGE + 1, n do idx[#idx + 1] = i end
  else
    for i = 1, n do idx[i] = i end
  end
  return idx
end

-- Values of a 1-d tensor at the shown positions (GAP marks the cut).
local function row_values(t, summarise)
  local n = t:size(1)
  local out = {}
  if summarise and n > 2 * EDGE then
    local a = t:narrow(1, 1, EDGE):totable()
    local b = t:narrow(1, n - EDGE + 1, EDGE):totable()
    for i = 1, EDGE do out[#out + 1] = a[i] end
    out[#out + 1] = GAP
    for i = 1, EDGE do out[#out + 1] = b[i] end
  else
    out = t:totable()
  end
  return out
end

local function formatter(values, dtype)
  if dtype == 'bool' then return function(v) return v and 'true' or 'false' end, 5 end
  local integral, maxabs, minabs = true, 0, math.huge
  for _, v in ipairs(values) do
    if v ~= v or v == math.huge or v == -math.huge then
    else
      if v % 1 ~= 0 then integral = false end
      local a = math.abs(v)
      if a > maxabs then maxabs = a end
      if a > 0 and a < minabs then minabs = a end
    end
  end
  local fmt
  if integral and maxabs < 1e15 then fmt = '%d'
  elseif maxabs >= 1e5 or minabs < 1e-4 then fmt = '%.4e'
  else fmt = '%.4f' end
  local f = function(v)
    if v ~= v then return 'nan' end
    if v == math.huge then return 'inf' end
    if v == -math.huge then return '-inf' end
    return fmt == '%d' and ('%d'):format(v) or fmt:format(v)
  end
  local width = 1
  for _, v in ipairs(values) do width = math.max(width, #f(v)) end
  return f, width
end

local function describe(t)
  local shape = t:size()
  local s = #shape == 0 and 'scalar' or ('of size ' .. table.concat(shape, 'x'))
  return ('[lunet.Tensor %s %s on %s]'):format(t.dtype, s, t.device)
end

local function tostring_tensor(t)
  if not T.is_tensor(t) then return 'lunet.Tensor(invalid: its C handle was freed or taken)' end
  local nd = t:dim()
  if nd == 0 then
    local f = formatter({ t:item() }, t.dtype)
    return f(t:item()) .. '\n' .. describe(t)
  end
  if t:numel() == 0 then return '[empty]\n' .. describe(t) end
  local summarise = t:numel() > LIMIT
  -- gather the rows (last dim) to show, with the index path of each
  local rows, values = {}, {}
  local function walk(x, path)
    if x:dim() == 1 then
      local r = row_values(x, summarise)
      rows[#rows + 1] = { path = path, vals = r }
      for _, v in ipairs(r) do if v ~= GAP then values[#values + 1] = v end end
      return
    end
    for _, i in ipairs(shown(x:size(1), summarise)) do
      local p = { unpack(path) }
      p[#p + 1] = i
      if i ~= GAP then walk(x:select(1, i), p) else rows[#rows + 1] = { path = p, gap = true } end
    end
  end
  walk(t, {})
  local f, width = formatter(values, t.dtype)
  local lines = {}
  local last_slice
  for _, r in ipairs(rows) do
    if nd > 2 then
      local slice = {}
      for k = 1, nd - 2 do slice[k] = r.path[k] end
      local key = table.concat(slice, ',', 1, #slice)
      if key ~= last_slice and not r.gap then
        if last_slice then lines[#lines + 1] = '' end
        local label = {}
        for k = 1, nd - 2 do label[k] = r.path[k] ~= GAP and tostring(r.path[k]) or '...' end
        lines[#lines + 1] = '(' .. table.concat(label, ',') .. ',.,.) = '
        last_slice = key
      end
    end
    if r.gap then
      lines[#lines + 1] = ' ...'
    else
      local cells = {}
      for k, v in ipairs(r.vals) do
        cells[k] = v == GAP and '...' or (' '):rep(width - #f(v)) .. f(v)
      end
      lines[#lines + 1] = ' ' .. table.concat(cells, ' ')
    end
  end
  lines[#lines + 1] = describe(t)
  return table.concat(lines, '\n')
end

mt.__tostring = tostring_tensor
Tensor.describe = describe
return tostring_tensor
