-- issue 21 class 2: empty(0, 2^62, 2^62) overflowed in the contiguous
-- strides (UBSan); sizes whose product or strides overflow are named errors.
local lunet = require 'lunet'
for _, s in ipairs({ { 0, 2 ^ 62, 2 ^ 62 }, { 2 ^ 62, 2 ^ 62, 0 }, { 0, 2 ^ 63 - 1024, 4 } }) do
  local ok, t = pcall(lunet.empty, s)
  if ok then assert(t:numel() == 0) else assert(tostring(t):find('empty', 1, true), tostring(t)) end
end
print('ok')
