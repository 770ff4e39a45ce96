-- found by the fuzzer: an empty as_strided view accepted any stride (check_view returned early
-- when it held no bytes); the CPU iterator then overflowed scaling them into bytes (UBSan).
-- fuzz_api reproducer: seed 12, case 61556: exit status 1
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
-- fuzz_case seed 12 case 61556
lunet.manual_seed(61556)
local a = lunet.randn({0})
local b = lunet.randn(3, 4):t()
fuzz.try(function() local r = a:var(-1, true); fuzz.check(r) end)
fuzz.try(function() local d = a:t(); d:copy_(a:view(-1):narrow(1, 2, a:numel() - 1):view(-1)); fuzz.check(d) end)
fuzz.try(function() local v = a:as_strided({0, nil}, {2^62}, 2); fuzz.check(v); v:neg_(); fuzz.check(v) end)
end
lunet.synchronize()
print('ok')

--[[ what the child printed (its end):
CASE 61556
c/cpu/iter.h:49:69: runtime error: signed integer overflow: 4611686018427387904 * 4 cannot be represented in type 'long int'
    #0 0x7f6a15207556 in ln_iter_init c/cpu/iter.h:49
    #1 0x7f6a15283899 in ln_cpu_unary c/cpu/elementwise.c:319
    #2 0x7f6a151c36f3 in ln_launch_seq c/core/device.c:517
    #3 0x7f6a151c388f in ln_launch c/core/device.c:497
    #4 0x7f6a151e5d60 in unary_inplace_p c/ops/elementwise.c:124
    #5 0x7f6a151e7e69 in ln_unary_ c/ops/elementwise.c:129
    #6 0x55f46c3a45a8  (/usr/bin/luajit+0x745a8)
    #7 0x55f46c37f82d  (/usr/bin/luajit+0x4f82d)
    #8 0x55f46c3834fc  (/usr/bin/luajit+0x534fc)
    #9 0x55f46c3a2195  (/usr/bin/luajit+0x72195)
    #10 0x55f46c3946cd in lua_pcall (/usr/bin/luajit+0x646cd)
    #11 0x55f46c33886a  (/usr/bin/luajit+0x886a)
    #12 0x55f46c339a7e  (/usr/bin/luajit+0x9a7e)
    #13 0x55f46c3a2195  (/usr/bin/luajit+0x72195)
    #14 0x55f46c39483c in lua_cpcall (/usr/bin/luajit+0x6483c)
    #15 0x55f46c3386c9 in main (/usr/bin/luajit+0x86c9)
    #16 0x7f6a17045249 in __libc_start_call_main ../sysdeps/nptl/libc_start_call_main.h:58
    #17 0x7f6a17045304 in __libc_start_main_impl ../csu/libc-start.c:360
    #18 0x55f46c338740 in _start (/usr/bin/luajit+0x8740)


]]
