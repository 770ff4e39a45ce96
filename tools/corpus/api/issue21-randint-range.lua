-- issue 21 class 4: randint over a range that does not fit divided by zero
-- (SIGFPE in c/cpu/random.c); NaN bounds and ranges too wide for the dtype
-- gave garbage.
local lunet = require 'lunet'
local ok, t = pcall(lunet.randint, -2 ^ 63, 2 ^ 63 - 1024, { 64 })
if ok then t:sum() end
for _, c in ipairs({ { 0 / 0, 5, 'int64' }, { 0, 0 / 0, 'int64' }, { 0, 2 ^ 40, 'int32' }, { 0, 300, 'uint8' },
  { -2 ^ 64, 2 ^ 64, 'int64' } }) do
  local ok2, err = pcall(lunet.randint, c[1], c[2], { 4 }, { dtype = c[3] })
  assert(not ok2 and tostring(err):find('randint', 1, true), tostring(err))
end
local r = lunet.randint(-3, 3, { 1000 })
assert(r:min():item() >= -3 and r:max():item() < 3)
print('ok')
