-- fuzz_api reproducer: seed 777, case 68143: exit status 1
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
-- fuzz_case seed 777 case 68143
lunet.manual_seed(68143)
local a = lunet.randn(1, 3):expand(4, 3)
local b = lunet.randn({1, 3, 3, 0}):mul(4):to("float32")
fuzz.try(function() fuzz.check(a[2]) end)
fuzz.try(function() local v = a:as_strided({1, 2}, {-2^63, 1}, 0); fuzz.check(v); v:copy_(a); fuzz.check(v) end)
end
lunet.synchronize()
print('ok')

--[[ what the child printed (its end):
CASE 68143
c/core/tensor.c:514:15: runtime error: negation of -9223372036854775808 cannot be represented in type 'long int'; cast to an unsigned type to negate this value to itself
    #0 0x7facd8dfb9eb in ln_check_no_internal_overlap c/core/tensor.c:514
    #1 0x7facd8dfda34 in check_writable c/ops/elementwise.c:63
    #2 0x7facd8dfda34 in copy_into c/ops/elementwise.c:342
    #3 0x7facd8dff682 in ln_copy_ c/ops/elementwise.c:372
    #4 0x559d903bd5a8  (/usr/bin/luajit+0x745a8)
    #5 0x559d9039882d  (/usr/bin/luajit+0x4f82d)
    #6 0x559d9039c4fc  (/usr/bin/luajit+0x534fc)
    #7 0x559d903bb195  (/usr/bin/luajit+0x72195)
    #8 0x559d903ad6cd in lua_pcall (/usr/bin/luajit+0x646cd)
    #9 0x559d9035186a  (/usr/bin/luajit+0x886a)
    #10 0x559d90352a7e  (/usr/bin/luajit+0x9a7e)
    #11 0x559d903bb195  (/usr/bin/luajit+0x72195)
    #12 0x559d903ad83c in lua_cpcall (/usr/bin/luajit+0x6483c)
    #13 0x559d903516c9 in main (/usr/bin/luajit+0x86c9)
    #14 0x7facdac45249 in __libc_start_call_main ../sysdeps/nptl/libc_start_call_main.h:58
    #15 0x7facdac45304 in __libc_start_main_impl ../csu/libc-start.c:360
    #16 0x559d90351740 in _start (/usr/bin/luajit+0x8740)


]]
