-- issue 21 class 2: expand to 2^32 x 2^32 succeeded with numel() wrapped to
-- 0; totable() then read past the buffer and save wrote a file load rejected.
local lunet = require 'lunet'
for _, s in ipairs({ { 2 ^ 32, 2 ^ 32 }, { 2 ^ 31, 2 ^ 31, 2 ^ 31 }, { 2 ^ 62, 4 } }) do
  local ok, e = pcall(function() return lunet.ones(1, 1):expand(s) end)
  if ok then
    -- a view of that many elements may exist, but its element count must be right
    local n = 1
    for _, v in ipairs(e:size()) do n = n * v end
    assert(e:numel() == n and e:numel() > 0, 'numel ' .. e:numel())
    assert(not pcall(e.totable, e) and not pcall(e.contiguous, e))
  else
    assert(tostring(e):find('expand', 1, true), tostring(e))
  end
end
print('ok')
