-- lunet.torch_pickle: the pickle streams in torch.save's files, read as
-- torch.load(weights_only=True) reads them: no code runs, and GLOBAL may
-- name only the few callables torch.save emits for tensors and containers
-- (the caller's `globals` table); anything else is an error naming it.
-- Python values become Lua ones: dict -> table (keys as they are), list and
-- tuple -> sequence (1-based: Python's l[0] is l[1]), None -> nil (a None in
-- a list leaves a hole), int -> number (int64 cdata past 2^53), float,
-- str, bool. The machine is iterative (no Lua recursion on nesting).
local ffi = require 'ffi'
local bit = require 'bit'

local M = {}
local NONE, MARK = setmetatable({}, { __tostring = function() return 'None' end }), {}
M.NONE = NONE

local dbl = ffi.new('union { double d; uint8_t b[8]; int64_t i; }')

-- n little-endian bytes, two's complement (LONG1/LONG4)
local function long_le(s, i, n, fail)
  if n == 0 then return 0 end
  if n > 8 then fail('integer of %d bytes is too large', n) end
  local v = 0LL
  for k = n - 1, 0, -1 do v = v * 256 + s:byte(i + k) end
  if s:byte(i + n - 1) >= 128 and n < 8 then v = v - bit.lshift(1LL, 8 * n) end
  if v >= -2LL^53 and v <= 2LL^53 then return tonumber(v) end
  return v
end

-- unpickle(data, fail, globals, persistent_load) -> the object.
-- fail(fmt, ...) raises (naming the caller); globals['module.name'] is a
-- function(args, kind) for REDUCE/NEWOBJ or a plain value (a storage type).
function M.load(s, fail, globals, persistent_load)
  local stack, sp, marks, memo = {}, 0, {}, {}
  local kind = setmetatable({}, { __mode = 'k' })   -- table -> 'dict'|'list'|'tuple'|'global'
  local lens = setmetatable({}, { __mode = 'k' })   -- list -> its length (None leaves holes)
  local memo_n = 0
  local i, n = 1, #s
  local function need(k, what)
    if i + k - 1 > n then fail('truncated pickle: %s needs %d bytes at byte %d', what, k, i - 1) end
  end
  local function push(v) sp = sp + 1; stack[sp] = v end
  local function pop(what)
    if sp <= (marks[#marks] or 0) then fail('corrupt pickle: %s on an empty stack', what) end
    local v = stack[sp]; stack[sp] = nil; sp = sp - 1
    return v
  end
  local function pop_mark(what)   -- the items above the last mark, as a sequence
    local m = table.remove(marks)
    if not m then fail('corrupt pickle: %s without a MARK', what) end
    local items = {}
    for k = m + 1, sp do local v = stack[k]; if v ~= NONE then items[k - m] = v end; stack[k] = nil end
    items.n, sp = sp - m, m
    return items
  end
  local function seq(items, how)  -- a tuple or list from items (n kept aside)
    local cnt = items.n; items.n = nil
    kind[items], lens[items] = how, cnt
    return items, cnt
  end
  local function val(v) if v == NONE then return nil end return v end
  local function setitem(d, k, v)
    if kind[d] ~= 'dict' then fail('corrupt pickle: SETITEM on a %s', kind[d] or type(d)) end
    if k == NONE or k == nil or k ~= k then fail('corrupt pickle: dict key None or NaN') end
    d[k] = val(v)
  end
  local function call(f, args, how)
    if kind[f] ~= 'global' then fail('corrupt pickle: %s of something not callable', how) end
    if kind[args] ~= 'tuple' then fail('corrupt pickle: %s arguments are not a tuple', how) end
    if type(f.fn) ~= 'function' then fail('refusing to call %s (only tensors and containers are loaded)', f.name) end
    local out = f.fn(args, kind)
    if out == nil then out = NONE end
    return out
  end
  local function str(k, what)
    need(k, what)
    local v = s:sub(i, i + k - 1)
    i = i + k
    return v
  end
  local function u(k, what)  -- unsigned little-endian of k bytes (k <= 4; 8 via doubles)
    need(k, what)
    local v = 0
    for j = k - 1, 0, -1 do v = v * 256 + s:byte(i + j) end
    i = i + k
    return v
  end
  local ops = 0
  while true do
    need(1, 'an opcode')
    local op = s:byte(i)
    i = i + 1
    ops = ops + 1
    if op == 0x80 then   -- PROTO
      local p = u(1, 'PROTO')
      if p > 5 then fail('unsupported pickle protocol %d', p) end
    elseif op == 0x95 then u(8, 'FRAME')                  -- FRAME: a size hint only
    elseif op == 0x2e then                               -- STOP
      if sp ~= 1 or #marks > 0 then fail('corrupt pickle: STOP with %d values on the stack', sp) end
      return val(stack[1])
    elseif op == 0x28 then marks[#marks + 1] = sp        -- MARK
      if #marks > 10000 then fail('pickle nests too deep') end
    elseif op == 0x7d then local d = {}; kind[d] = 'dict'; push(d)   -- EMPTY_DICT
    elseif op == 0x5d then local l = {}; kind[l] = 'list'; push(l)   -- EMPTY_LIST
    elseif op == 0x29 then local t = {}; kind[t] = 'tuple'; push(t)  -- EMPTY_TUPLE
    elseif op == 0x74 then push((seq(pop_mark('TUPLE'), 'tuple')))   -- TUPLE
    elseif op == 0x85 or op == 0x86 or op == 0x87 then               -- TUPLE1..3
      local k, t = op - 0x84, {}
      for j = k, 1, -1 do t[j] = val(pop('TUPLE' .. k)) end
      kind[t] = 'tuple'
      push(t)
    elseif op == 0x6c then push((seq(pop_mark('LIST'), 'list')))     -- LIST
    elseif op == 0x64 then                                           -- DICT
      local items = pop_mark('DICT')
      local d = {}; kind[d] = 'dict'
      for j = 1, items.n, 2 do setitem(d, items[j], items[j + 1]) end
      push(d)
    elseif op == 0x58 then push(str(u(4, 'BINUNICODE'), 'BINUNICODE'))
    elseif op == 0x8c then push(str(u(1, 'SHORT_BINUNICODE'), 'SHORT_BINUNICODE'))
    elseif op == 0x8d then local k = u(4, 'BINUNICODE8') + u(4, 'BINUNICODE8') * 2^32; push(str(k, 'BINUNICODE8'))
    elseif op == 0x43 then push(str(u(1, 'SHORT_BINBYTES'), 'SHORT_BINBYTES'))
    elseif op == 0x42 then push(str(u(4, 'BINBYTES'), 'BINBYTES'))
    elseif op == 0x4a then local v = u(4, 'BININT'); push(v >= 2^31 and v - 2^32 or v)
    elseif op == 0x4b then push(u(1, 'BININT1'))
    elseif op == 0x4d then push(u(2, 'BININT2'))
    elseif op == 0x8a or op == 0x8b then                             -- LONG1, LONG4
      local k = op == 0x8a and u(1, 'LONG1') or u(4, 'LONG4')
      need(k, 'LONG')
      push(long_le(s, i, k, fail))
      i = i + k
    elseif op == 0x47 then                                           -- BINFLOAT (big-endian)
      need(8, 'BINFLOAT')
      for j = 0, 7 do dbl.b[7 - j] = s:byte(i + j) end
      i = i + 8
      push(dbl.d)
    elseif op == 0x88 then push(true)
    elseif op == 0x89 then push(false)
    elseif op == 0x4e then push(NONE)
    elseif op == 0x73 then local v = pop('SETITEM'); local k = pop('SETITEM'); setitem(stack[sp], k, v)
    elseif op == 0x75 then                                           -- SETITEMS
      local items = pop_mark('SETITEMS')
      if sp < 1 or items.n % 2 ~= 0 then fail('corrupt pickle: SETITEMS') end
      local d = stack[sp]
      for j = 1, items.n, 2 do setitem(d, items[j], items[j + 1]) end
    elseif op == 0x61 or op == 0x65 then                             -- APPEND, APPENDS
      local items
      if op == 0x61 then local v = pop('APPEND'); items = { n = 1, val(v) } else items = pop_mark('APPENDS') end
      local l = stack[sp]
      if sp < 1 or kind[l] ~= 'list' then fail('corrupt pickle: APPEND to a %s', kind[l] or type(l)) end
      local base = lens[l] or 0
      for j = 1, items.n do l[base + j] = items[j] end
      lens[l] = base + items.n
    elseif op == 0x71 or op == 0x72 or op == 0x94 then               -- BINPUT, LONG_BINPUT, MEMOIZE
      local k = op == 0x71 and u(1, 'BINPUT') or op == 0x72 and u(4, 'LONG_BINPUT') or memo_n
      if sp < 1 then fail('corrupt pickle: memo of an empty stack') end
      if memo[k] == nil then memo_n = memo_n + 1 end
      memo[k] = stack[sp]
    elseif op == 0x68 or op == 0x6a then                             -- BINGET, LONG_BINGET
      local k = op == 0x68 and u(1, 'BINGET') or u(4, 'LONG_BINGET')
      if memo[k] == nil then fail('corrupt pickle: BINGET %d of nothing', k) end
      push(memo[k])
    elseif op == 0x63 or op == 0x93 then                             -- GLOBAL, STACK_GLOBAL
      local mod, name
      if op == 0x63 then
        mod, name = s:match('^([^\n]*)\n([^\n]*)\n', i)
        if not mod then fail('corrupt pickle: GLOBAL at byte %d', i - 2) end
        i = i + #mod + #name + 2
      else
        name = pop('STACK_GLOBAL'); mod = pop('STACK_GLOBAL')
        if type(mod) ~= 'string' or type(name) ~= 'string' then fail('corrupt pickle: STACK_GLOBAL') end
      end
      local full = mod .. '.' .. name
      local g = globals[full]
      if g == nil then fail('refusing to unpickle global %s (only tensors and containers are loaded)', full) end
      local t = { name = full, fn = type(g) == 'function' and g or nil, value = g }
      kind[t] = 'global'
      push(t)
    elseif op == 0x52 then local args = pop('REDUCE'); push(call(pop('REDUCE'), args, 'REDUCE'))
    elseif op == 0x81 then local args = pop('NEWOBJ'); push(call(pop('NEWOBJ'), args, 'NEWOBJ'))
    elseif op == 0x62 then                                           -- BUILD: state set on an object
      local state = pop('BUILD')
      if sp < 1 then fail('corrupt pickle: BUILD on an empty stack') end
      -- an OrderedDict's __dict__ (a state_dict's _metadata) and tensor
      -- state (hooks) have no use in Lua: dropped
      if kind[state] ~= 'dict' and kind[state] ~= 'tuple' and state ~= NONE then fail('corrupt pickle: BUILD state') end
    elseif op == 0x51 then push(persistent_load(val(pop('BINPERSID')), kind))   -- BINPERSID
    elseif op == 0x30 then pop('POP')
    elseif op == 0x31 then pop_mark('POP_MARK')
    elseif op == 0x32 then if sp < 1 then fail('corrupt pickle: DUP') end; push(stack[sp])
    else
      fail('unsupported pickle opcode 0x%02x at byte %d', op, i - 2)
    end
  end
end

return M
