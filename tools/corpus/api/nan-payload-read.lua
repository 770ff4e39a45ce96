-- found by the fuzzer (seed 31, case 45644, after a batch of cases): a float
-- tensor holding a NaN whose payload is all ones (uninitialised memory from
-- the cache, -1 or 255 bytes read as float) came back from totable() and
-- item() as nil: LuaJIT keeps nil, tables and strings in NaN space, and other
-- payloads could pass as pointers. Every NaN must read back as a number.
local lunet = require 'lunet'
local ffi = require 'ffi'
local words32 = { 0xFFFFFFFF, 0xFFFFE000, 0x7FFFFFFF, 0xFF800001, 0xFFC00000 }
local words64 = { 0xFFFFFFFFFFFFFFFFULL, 0xFFFA000000000001ULL, 0xFFFF800000000000ULL, 0x7FF0000000000001ULL }
for _ = 1, 200 do   -- (compiled by the JIT too)
  for _, w in ipairs(words32) do
    local t = lunet.from_buffer(ffi.new('uint32_t[2]', w, w), { 2 }, 'float32')
    for _, v in ipairs({ t:totable()[1], t:totable()[2], t[1]:item(), t:sum():item() }) do
      assert(type(v) == 'number' and v ~= v, 'float32 NaN read back as ' .. tostring(v))
    end
    local h = t:to('bfloat16')
    assert(type(h:totable()[1]) == 'number')
  end
  for _, w in ipairs(words64) do
    local t = lunet.from_buffer(ffi.new('uint64_t[1]', w), { 1 }, 'float64')
    local v1, v2 = t:totable()[1], t:item()
    assert(type(v1) == 'number' and v1 ~= v1 and type(v2) == 'number' and v2 ~= v2, 'float64 NaN read back as ' .. tostring(v1))
  end
end
-- other values are untouched
local ok = lunet.tensor({ 1.5, -0, math.huge, -math.huge, 1e-40 }):totable()
assert(ok[1] == 1.5 and ok[3] == math.huge and ok[4] == -math.huge and ok[5] > 0)
print('ok')
