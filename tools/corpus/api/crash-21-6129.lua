-- found by the fuzzer: an empty as_strided view accepted any stride (check_view returned early
-- when it held no bytes); the CPU iterator then overflowed scaling them into bytes (UBSan).
-- fuzz_api reproducer: seed 21, case 6129: exit status 1
-- run: luajit <this file> (or luajit tools/fuzz_api.lua --replay); passes when it exits 0
local lunet = require 'lunet'
local ffi = require 'ffi'
local nn, F, data = lunet.nn, lunet.nn.functional, lunet.data
local fuzz = {}
function fuzz.fail(msg) io.stdout:write('FAIL ', msg, '\n'); io.stdout:flush(); os.exit(3) end
-- a tensor's element count agrees with its shape, and its values read back
function fuzz.check(t)
  if not lunet.is_tensor(t) then return end
  local n = 1
  for _, s in ipairs(t:size()) do
    if s < 0 then fuzz.fail('negative size in ' .. tostring(t:size())) end
    n = n * s
  end
  if n ~= t:numel() then fuzz.fail(('numel %s but the shape holds %s'):format(t:numel(), n)) end
  if n <= 4096 then
    local flat = t:contiguous():reshape(n)
    if #flat:totable() ~= n then fuzz.fail('totable length differs from numel') end
    if n > 0 then flat:sum(); t:clone() end
  end
end
-- same dtype, shape and values (NaN equal to NaN)
function fuzz.same(a, b, what)
  if a.dtype ~= b.dtype then fuzz.fail(what .. ': dtype ' .. a.dtype .. ' became ' .. b.dtype) end
  if tostring(a:size()) ~= tostring(b:size()) then fuzz.fail(what .. ': shape changed') end
  if a:numel() == 0 then return end
  local x, y = a:double():contiguous():reshape(a:numel()):totable(), b:double():contiguous():reshape(b:numel()):totable()
  for i = 1, #x do
    if x[i] ~= y[i] and (x[i] == x[i] or y[i] == y[i]) then fuzz.fail(what .. ': element ' .. i .. ' changed') end
  end
end
function fuzz.tmp() return (os.getenv('FUZZ_TMP') or '/tmp') .. '/fuzz_api_' .. tostring(os.time()) .. '_' .. tostring(math.random(1e9)) end
local RAW = { 'attempt to ', 'bad argument #', 'cannot convert', 'has no member named', 'table index is nil' }
fuzz.raw = {}
-- run one statement: an error is fine, a raw Lua error is noted
function fuzz.try(f)
  local ok, err = pcall(f)
  if not ok then
    err = tostring(err)
    for _, r in ipairs(RAW) do
      -- (an error at the case's own line is the case's fault, not lunet's)
      if err:find(r, 1, true) and err:sub(1, 10) ~= 'fuzz_case:' then fuzz.raw[#fuzz.raw + 1] = err; break end
    end
  end
end

do
-- fuzz_case seed 21 case 6129
lunet.manual_seed(6129)
local a = lunet.randn(3, 4):t()
local b = lunet.randn({1})
fuzz.try(function() fuzz.check(lunet.full({0, "x"}, 0)) end)
fuzz.try(function() local v = a:as_strided({4, 0, 3}, {2^31, 0, -2^62}, 2); fuzz.check(v); v:add_(1); fuzz.check(v) end)
fuzz.try(function() local r = a:argmax(); fuzz.check(r) end)
end
lunet.synchronize()
print('ok')

--[[ what the child printed (its end):
CASE 6129
c/cpu/iter.h:39:52: runtime error: signed integer overflow: -4611686018427387904 * 3 cannot be represented in type 'long int'
    #0 0x7f6fe8616493 in ln_iter_init c/cpu/iter.h:39
    #1 0x7f6fe869253e in ln_cpu_binary c/cpu/elementwise.c:205
    #2 0x7f6fe85e831b in ln_stream_launch c/core/stream.c:317
    #3 0x7f6fe85c9c67 in launch_on c/core/device.c:142
    #4 0x7f6fe85ca9c2 in ln_launch_seq c/core/device.c:147
    #5 0x7f6fe85ca9d9 in ln_launch c/core/device.c:121
    #6 0x7f6fe85f75c8 in ln_binary_scalar_ c/ops/elementwise.c:294
    #7 0x55d5ab0a55a8  (/usr/bin/luajit+0x745a8)
    #8 0x55d5ab08082d  (/usr/bin/luajit+0x4f82d)
    #9 0x55d5ab0844fc  (/usr/bin/luajit+0x534fc)
    #10 0x55d5ab0a3195  (/usr/bin/luajit+0x72195)
    #11 0x55d5ab0956cd in lua_pcall (/usr/bin/luajit+0x646cd)
    #12 0x55d5ab03986a  (/usr/bin/luajit+0x886a)
    #13 0x55d5ab03aa7e  (/usr/bin/luajit+0x9a7e)
    #14 0x55d5ab0a3195  (/usr/bin/luajit+0x72195)
    #15 0x55d5ab09583c in lua_cpcall (/usr/bin/luajit+0x6483c)
    #16 0x55d5ab0396c9 in main (/usr/bin/luajit+0x86c9)
    #17 0x7f6fea445249 in __libc_start_call_main ../sysdeps/nptl/libc_start_call_main.h:58
    #18 0x7f6fea445304 in __libc_start_main_impl ../csu/libc-start.c:360
    #19 0x55d5ab039740 in _start (/usr/bin/luajit+0x8740)


]]
