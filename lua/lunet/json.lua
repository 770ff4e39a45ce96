-- lunet.json: a small JSON encoder/decoder for checkpoint metadata and
-- metric logs (numbers, strings, booleans, arrays, objects; no cycles).
local json = {}

local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or ('\\u%04x'):format(c:byte())
  end) .. '"'
end

local function is_array(t)
  local n = #t
  if n == 0 then return next(t) == nil end
  for k in pairs(t) do
    if type(k) ~= 'number' or k < 1 or k > n or k % 1 ~= 0 then return false end
  end
  return true
end

-- (open: the tables being encoded, a table met again inside itself is a cycle)
local function encode(v, out, open)
  local tv = type(v)
  if tv == 'nil' then out[#out + 1] = 'null'
  elseif tv == 'boolean' then out[#out + 1] = tostring(v)
  elseif tv == 'number' then
    if v ~= v or v == math.huge or v == -math.huge then out[#out + 1] = 'null'
    elseif v % 1 == 0 and math.abs(v) < 2^53 then out[#out + 1] = ('%d'):format(v)
    else out[#out + 1] = ('%.17g'):format(v) end
  elseif tv == 'string' then out[#out + 1] = encode_string(v)
  elseif tv == 'table' then
    if open[v] then error('json.encode: a table contains itself (JSON has no cycles)', 0) end
    open[v] = true
    if is_array(v) and next(v) ~= nil then
      out[#out + 1] = '['
      for i = 1, #v do
        if i > 1 then out[#out + 1] = ',' end
        encode(v[i], out, open)
      end
      out[#out + 1] = ']'
    else
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = tostring(k) end
      table.sort(keys)
      out[#out + 1] = '{'
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = ',' end
        out[#out + 1] = encode_string(k)
        out[#out + 1] = ':'
        local val = v[k]
        if val == nil then val = v[tonumber(k)] end
        encode(val, out, open)
      end
      out[#out + 1] = '}'
    end
    open[v] = nil
  else
    error('json.encode: cannot encode a ' .. tv, 0)
  end
end

function json.encode(v)
  local out = {}
  local ok, err = pcall(encode, v, out, {})
  if not ok then require('lunet.options').raise(tostring(err)) end
  return table.concat(out)
end

-- ---- decoding ---------------------------------------------------------------------

local function fail(s, i, what) error(('json.decode: %s at position %d'):format(what, i), 0) end

local decode_value

local function skip(s, i) return s:find('[^ \t\r\n]', i) or #s + 1 end

local function decode_string(s, i)
  local out, j = {}, i + 1
  while true do
    local c = s:sub(j, j)
    if c == '' then fail(s, j, 'unterminated string') end
    if c == '"' then return table.concat(out), j + 1 end
    if c == '\\' then
      local e = s:sub(j + 1, j + 1)
      local map = { b = '\b', f = '\f', n = '\n', r = '\r', t = '\t', ['"'] = '"', ['\\'] = '\\', ['/'] = '/' }
      if map[e] then out[#out + 1] = map[e]; j = j + 2
      elseif e == 'u' then
        local code = tonumber(s:sub(j + 2, j + 5), 16)
        if not code then fail(s, j, 'bad \\u escape') end
        if code < 0x80 then out[#out + 1] = string.char(code)
        elseif code < 0x800 then out[#out + 1] = string.char(0xc0 + math.floor(code / 64), 0x80 + code % 64)
        else out[#out + 1] = string.char(0xe0 + math.floor(code / 4096), 0x80 + math.floor(code / 64) % 64, 0x80 + code % 64) end
        j = j + 6
      else fail(s, j, 'bad escape') end
    else
      out[#out + 1] = c
      j = j + 1
    end
  end
end

-- (a file's arrays and objects nested deeper than this are refused, not a stack overflow)
local MAX_DEPTH = 512

function decode_value(s, i, depth)
  i = skip(s, i)
  local c = s:sub(i, i)
  if (c == '{' or c == '[') and depth >= MAX_DEPTH then fail(s, i, ('nesting deeper than %d'):format(MAX_DEPTH)) end
  if c == '{' then
    local obj = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == '}' then return obj, i + 1 end
    while true do
      if s:sub(i, i) ~= '"' then fail(s, i, 'expected a key') end
      local k; k, i = decode_string(s, i)
      i = skip(s, i)
      if s:sub(i, i) ~= ':' then fail(s, i, "expected ':'") end
      obj[k], i = decode_value(s, i + 1, depth + 1)
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == '}' then return obj, i + 1 end
      if d ~= ',' then fail(s, i, "expected ',' or '}'") end
      i = skip(s, i + 1)
    end
  elseif c == '[' then
    local arr = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == ']' then return arr, i + 1 end
    while true do
      arr[#arr + 1], i = decode_value(s, i, depth + 1)
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == ']' then return arr, i + 1 end
      if d ~= ',' then fail(s, i, "expected ',' or ']'") end
      i = i + 1
    end
  elseif c == '"' then return decode_string(s, i)
  elseif s:sub(i, i + 3) == 'true' then return true, i + 4
  elseif s:sub(i, i + 4) == 'false' then return false, i + 5
  elseif s:sub(i, i + 3) == 'null' then return nil, i + 4
  else
    local num = s:match('^-?%d+%.?%d*[eE]?[-+]?%d*', i)
    if not num or num == '' then fail(s, i, 'unexpected character') end
    local v = tonumber(num)
    if not v then fail(s, i, 'bad number ' .. num) end   -- ('1e', '1e+': nil taken for a value)
    return v, i + #num
  end
end

function json.decode(s)
  if type(s) ~= 'string' then error('json.decode: expected a string', 2) end
  local v, i = decode_value(s, 1, 0)
  i = skip(s, i)
  if i <= #s then fail(s, i, 'trailing characters') end
  return v
end

return json
