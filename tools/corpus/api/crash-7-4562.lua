-- fuzz_api reproducer: seed 7, case 4562: exit status 1
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
-- fuzz_case seed 7 case 4562
lunet.manual_seed(4562)
local a = lunet.randn(3, 4):t()
local b = lunet.randn({1})
fuzz.try(function() fuzz.check(lunet.cat({a, b, lunet.randn(3, 4):t()}, 2^31)) end)
fuzz.try(function() fuzz.check(a:long():fmod(2)) end)
end
lunet.synchronize()
print('ok')

--[[ what the child printed (its end):
CASE 4562
c/core/tensor.c:59:12: runtime error: signed integer overflow: 2147483647 + 1 cannot be represented in type 'int'
    #0 0x7fe1f05dd0a4 in ln_check_dim c/core/tensor.c:59
    #1 0x7fe1f05f113f in ln_cat c/ops/index.c:132
    #2 0x564c4b12a5a8  (/usr/bin/luajit+0x745a8)
    #3 0x564c4b10582d  (/usr/bin/luajit+0x4f82d)
    #4 0x564c4b1094fc  (/usr/bin/luajit+0x534fc)
    #5 0x564c4b128195  (/usr/bin/luajit+0x72195)
    #6 0x564c4b11a6cd in lua_pcall (/usr/bin/luajit+0x646cd)
    #7 0x564c4b0be86a  (/usr/bin/luajit+0x886a)
    #8 0x564c4b0bfa7e  (/usr/bin/luajit+0x9a7e)
    #9 0x564c4b128195  (/usr/bin/luajit+0x72195)
    #10 0x564c4b11a83c in lua_cpcall (/usr/bin/luajit+0x6483c)
    #11 0x564c4b0be6c9 in main (/usr/bin/luajit+0x86c9)
    #12 0x7fe1f2445249 in __libc_start_call_main ../sysdeps/nptl/libc_start_call_main.h:58
    #13 0x7fe1f2445304 in __libc_start_main_impl ../csu/libc-start.c:360
    #14 0x564c4b0be740 in _start (/usr/bin/luajit+0x8740)


]]
