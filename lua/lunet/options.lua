-- lunet.options: the one check of an options table. Every public function
-- that takes options calls check(fname, opts, known, aliases) first:
--
--   local OPTS = {stride = 'number|table', padding = 'number|table|string', bias = 'boolean', device = true}
--   local ALIASES = {num_workers = 'workers'}     -- PyTorch's (or Torch7's) spelling -> lunet's
--   opts = options.check('nn.Conv2d', opts, OPTS, ALIASES)
--
-- An unknown key is an error naming the function and the closest known name
-- ("nn.Conv2d: unknown option 'pad' (did you mean 'padding'?)"); a value of
-- the wrong type is an error too (known[k] is true for any type, or type
-- names joined by '|'; 'tensor' is a lunet tensor). opts that is not a table
-- (nor nil) is an error. Returns opts itself, or a copy with aliases renamed
-- to lunet's names. Costs one table lookup per key given (no allocation unless
-- an alias is used), so functional calls may check their options every call.
-- Errors are raised at the first caller outside lunet's own files.
local M = {}

local is_tensor
local function tensor_check(v)
  is_tensor = is_tensor or require('lunet.tensor').is_tensor
  return is_tensor(v)
end
-- (lunet.core loads this file: its is_table cannot be required here)
local function is_table(x) return type(x) == 'table' and not tensor_check(x) end

-- this file's folder: frames whose source lies under it are lunet's own
local own = debug.getinfo(1, 'S').source:match('^@(.*[/\\])options%.lua$')

local function user_level()
  local lvl = 3
  while true do
    local info = debug.getinfo(lvl, 'S')
    if not info then return lvl - 1 end
    local src = info.source
    -- C frames (pcall inside no_grad and the like) are passed over too; the
    -- REPL, which runs the user's lines, counts as the user's
    if not own or src ~= '=[C]' and (src:sub(1, 1) ~= '@' or src:sub(2, #own + 1) ~= own
                                     or src:sub(#own + 2) == 'repl.lua') then
      return lvl - 1
    end
    lvl = lvl + 1
  end
end

-- Raises "fname: msg" at the user's line.
function M.fail(fname, msg) error(fname .. ': ' .. msg, user_level()) end
-- Raises msg (already naming its function) at the user's line.
function M.raise(msg) error(msg, user_level()) end
local fail = M.fail

-- need_tensor(fname, x, what): x, or the error "fname: what must be a tensor,
-- got <type>" at the user's line (what: 'input' when nil). The tensor
-- methods' one check of a tensor argument (lunet.tensor and the tensor_*
-- files): here, beside raise, as the other argument checks.
function M.need_tensor(fname, x, what)
  if not tensor_check(x) then M.raise(('%s: %s must be a tensor, got %s'):format(fname, what or 'input', type(x))) end
  return x
end

-- named(name, f): f with its errors raised as name's: an op composed of
-- others ("narrow: ...") reads as the method the user called ("unfold:
-- ..."), unless the message names it already (or its out-of-place form:
-- name without its trailing '_'). Every return value passes through.
function M.named(name, f)
  local short = name:gsub('_$', '')
  local function pass(ok, r, ...)
    if ok then return r, ... end
    if type(r) ~= 'string' then error(r, 0) end
    r = r:gsub('^[^:\n]*:%d+: ', '', 1)
    if r:sub(1, #short + 1) ~= short .. ':' and r:sub(1, #name + 1) ~= name .. ':' then
      r = name .. ': ' .. r:gsub('^[%w_.]+: ', '', 1)
    end
    M.raise(r)
  end
  return function(...) return pass(pcall(f, ...)) end
end

-- allowed[spec] = {type name = true}, built once per spec string
local allowed = {}
local function allow(spec)
  local a = allowed[spec]
  if a then return a end
  a = { names = {} }
  for t in spec:gmatch('[^|]+') do
    a[t] = true
    a.names[#a.names + 1] = t
  end
  allowed[spec] = a
  return a
end

-- Levenshtein distance of a and b, lowercased, underscores ignored
local function norm(s) return (s:lower():gsub('_', '')) end
local function distance(a, b)
  a, b = norm(a), norm(b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

-- the known name (or alias, given as the name it stands for) closest to key,
-- when close enough to be a likely typo or abbreviation
local function suggest(key, known, aliases)
  local best, bd = nil, math.huge
  local function try(name, target)
    local d = distance(key, name)
    local nk, nn = norm(key), norm(name)
    -- one inside the other ('pad' in 'padding') or a long common start
    -- ('reduce', 'reduction'): an abbreviation or another spelling; the
    -- nearer in length first
    local pre = 0
    while pre < #nk and pre < #nn and nk:byte(pre + 1) == nn:byte(pre + 1) do pre = pre + 1 end
    if #nk >= 3 and #nn >= 3 and (nn:find(nk, 1, true) or nk:find(nn, 1, true)) or pre >= 5 then
      d = math.min(d, 0.5 + math.abs(#nn - #nk) / 100)
    end
    if d < bd or (d == bd and target < best) then best, bd = target, d end
  end
  for name in pairs(known) do try(name, name) end
  if aliases then for name, target in pairs(aliases) do try(name, target) end end
  if best and bd <= math.max(1, math.floor(#key / 3)) then return best end
end

local function names_of(known)
  local t = {}
  for k in pairs(known) do t[#t + 1] = k end
  table.sort(t)
  return table.concat(t, ', ')
end

local function unknown(fname, k, known, aliases)
  if type(k) ~= 'string' then
    fail(fname, ('options are named (e.g. {%s = ...}); got a value at [%s]'):format(names_of(known):match('^[^,]+') or 'name', tostring(k)))
  end
  local s = suggest(k, known, aliases)
  if s then fail(fname, ("unknown option '%s' (did you mean '%s'?)"):format(k, s)) end
  fail(fname, ("unknown option '%s' (known: %s)"):format(k, names_of(known)))
end

local function type_error(fname, k, v, spec)
  local names = allow(spec).names
  local want = #names == 1 and names[1] or table.concat(names, ', ', 1, #names - 1) .. ' or ' .. names[#names]
  fail(fname, ("option '%s' must be a %s, got %s"):format(k, want, is_tensor and is_tensor(v) and 'tensor' or type(v)))
end

local function with_aliases(fname, opts, known, aliases)
  local out = {}
  for k, v in pairs(opts) do
    local target = aliases[k]
    if target then
      if opts[target] ~= nil then
        fail(fname, ("options '%s' and '%s' are the same option; give one"):format(k, target))
      end
      k = target
    end
    out[k] = v
  end
  return M.check(fname, out, known)
end

-- check(fname, opts, known[, aliases]) -> opts (or a copy with aliases renamed)
function M.check(fname, opts, known, aliases)
  if opts == nil then return nil end
  if not is_table(opts) then
    fail(fname, 'options must be a table, got ' .. (tensor_check(opts) and 'a tensor' or type(opts)))
  end
  for k, v in pairs(opts) do
    local spec = known[k]
    if spec == nil then
      if aliases and aliases[k] then return with_aliases(fname, opts, known, aliases) end
      unknown(fname, k, known, aliases)
    elseif spec ~= true then
      local a = allowed[spec] or allow(spec)
      if not a[tensor_check(v) and 'tensor' or type(v)] then type_error(fname, k, v, spec) end
    end
  end
  return opts
end

-- positional(fname, names, ...): the optional arguments PyTorch users pass by
-- position (nn.Conv2d(3, 16, 3, 1, 1): stride, padding), as values for
-- names[1], names[2], ... in order, optionally followed by an options table.
-- Returns that table with the positional values added (a copy when any was
-- given; nil when there is nothing). A list ({2, 2}) is a value, not options.
function M.positional(fname, names, ...)
  local n = select('#', ...)
  if n == 0 then return nil end
  local last, opts = select(n, ...), nil
  if is_table(last) and last[1] == nil then opts, n = last, n - 1 end
  while n > 0 and select(n, ...) == nil do n = n - 1 end
  if n == 0 then return opts end
  if n > #names then
    fail(fname, ('too many arguments: after the required ones it takes %s by position, then an options table')
      :format(table.concat(names, ', ')))
  end
  local out = {}
  if opts then for k, v in pairs(opts) do out[k] = v end end
  for i = 1, n do
    local v = select(i, ...)
    if v ~= nil then
      if is_table(v) and v[1] == nil then
        fail(fname, ('the options table must come last (found one in the place of %s)'):format(names[i]))
      end
      if out[names[i]] ~= nil then fail(fname, ("'%s' given both by position and in the options"):format(names[i])) end
      out[names[i]] = v
    end
  end
  return out
end

-- one_of(fname, what, v, {'a', 'b', ...}): v is nil or one of the list, else an error
function M.one_of(fname, what, v, list)
  if v == nil then return v end
  for _, x in ipairs(list) do if v == x then return v end end
  local q = {}
  for i, x in ipairs(list) do q[i] = ("'%s'"):format(x) end
  fail(fname, ('%s must be %s or %s, got %s'):format(what, table.concat(q, ', ', 1, #q - 1), q[#q],
    type(v) == 'string' and ("'" .. v .. "'") or tostring(v)))
end
M.REDUCTIONS = { 'none', 'mean', 'sum' }

-- seed(fname, what, v): v is a seed (or an RNG offset) the C side takes as
-- uint64_t: an integer in [0, 2^64); else an error naming fname and what
-- (the FFI refused a string, and wrapped -1, 2.5, NaN or 2^64 to another seed)
function M.seed(fname, what, v)
  if type(v) ~= 'number' or not (v >= 0 and v < 2 ^ 64) or v % 1 ~= 0 then
    fail(fname, ('%s must be a non-negative integer below 2^64, got %s'):format(what, tostring(v)))
  end
  return v
end

-- pair(fname, what, v, min): v is nil, an integer >= min or {h, w} of them
-- (a layer's geometry, checked when it is built rather than at its first forward)
function M.pair(fname, what, v, min)
  if v == nil then return v end
  local a, b = v, v
  if is_table(v) then a, b = v[1], v[2] end
  local function int(x) return type(x) == 'number' and x % 1 == 0 and x >= min and x < math.huge end
  if not (int(a) and int(b)) or is_table(v) and #v ~= 2 then
    local shown = is_table(v) and ('{' .. table.concat((function()
      local t = {}
      for i = 1, #v do t[i] = tostring(v[i]) end
      return t
    end)(), ', ') .. '}') or tostring(v)
    fail(fname, ('%s must be an integer >= %d or {h, w} of them, got %s'):format(what, min, shown))
  end
  return v
end

-- M.triple(fname, what, v, min): a 3-d layer's geometry argument, a number or
-- {d, h, w} of integers >= min; returns the three numbers (nil for nil)
function M.triple(fname, what, v, min)
  if v == nil then return nil end
  local t = is_table(v) and v or { v, v, v }
  local function int(x) return type(x) == 'number' and x % 1 == 0 and x >= min and x < 2 ^ 53 end
  if #t ~= 3 or not (int(t[1]) and int(t[2]) and int(t[3])) then
    local shown = tostring(v)
    if is_table(v) then
      local s = {}
      for i = 1, #v do s[i] = tostring(v[i]) end
      shown = '{' .. table.concat(s, ', ') .. '}'
    end
    fail(fname, ('%s must be an integer >= %d or {d, h, w} of them, got %s'):format(what, min, shown))
  end
  return t[1], t[2], t[3]
end

-- M.single(fname, what, v, min): a 1-d layer's geometry argument, a number
-- or {n} (PyTorch's int or 1-tuple); returns the number, or nil for nil
function M.single(fname, what, v, min)
  if v == nil then return nil end
  local a = v
  if is_table(v) then a = v[1] end
  if not (type(a) == 'number' and a % 1 == 0 and a >= min and a < 2 ^ 53) or is_table(v) and #v ~= 1 then
    local shown = tostring(v)
    if is_table(v) then
      local t = {}
      for i = 1, #v do t[i] = tostring(v[i]) end
      shown = '{' .. table.concat(t, ', ') .. '}'
    end
    fail(fname, ('%s must be an integer >= %d (or {n}), got %s'):format(what, min, shown))
  end
  return a
end

M.check_options = M.check
M.suggest = suggest

return M
