-- issue 21 class 2: as_strided with a huge stride or offset passed its bounds
-- check by overflow and segfaulted (c/core/tensor.c). Each must be a named error.
local lunet = require 'lunet'
local a = lunet.ones(4)
for _, c in ipairs({ { { 2 }, { 2 ^ 62 }, 0 }, { { 2 }, { 2 ^ 63 }, 0 }, { { 2 }, { -2 ^ 62 }, 0 },
  { { 3, 3 }, { 2 ^ 61, 2 ^ 61 }, 0 }, { { 2 }, { 1 }, 2 ^ 62 }, { { 2 ^ 62, 2 }, { 0, 1 }, 0 } }) do
  local ok, err = pcall(a.as_strided, a, c[1], c[2], c[3])
  assert(not ok and tostring(err):find('as_strided', 1, true), tostring(err))
end
assert(a:as_strided({ 2 }, { 2 }, 0):sum():item() == 2)
print('ok')
