-- issue 21 class 3: from_buffer with a Lua string or cdata shorter than the
-- shape read past it (segfault).
local lunet = require 'lunet'
local ffi = require 'ffi'
for _, c in ipairs({ { 'ab', { 100 } }, { '', { 1 } }, { ('x'):rep(16), { 1000000 } }, { ffi.new('float[2]'), { 100 } } }) do
  local ok, err = pcall(lunet.from_buffer, c[1], c[2], 'float32')
  assert(not ok and tostring(err):find('from_buffer', 1, true), tostring(err))
end
assert(lunet.from_buffer(ffi.new('float[2]', 1, 2), { 2 }, 'float32'):sum():item() == 3)
print('ok')
