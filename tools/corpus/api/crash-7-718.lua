-- fuzz_api reproducer: seed 7, case 718: exit status 1
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
-- fuzz_case seed 7 case 718
lunet.manual_seed(718)
local a = lunet.randn(3, 4):t()
local b = lunet.randn(3, 4):t()
fuzz.try(function() local p = fuzz.tmp(); local t = a:t(); local ok = pcall(lunet.save, p, {["t"] = t}, {k = 1}); if ok then local r = lunet.load(p); os.remove(p); for k, v in pairs(r) do fuzz.same(t, v, "save/load") end end; os.remove(p) end)
fuzz.try(function() fuzz.check(a:index_select(-2, lunet.tensor({2^63, 4, 3}, {dtype = "int64"}))) end)
fuzz.try(function() fuzz.check(F.avg_pool2d(lunet.randn(1, 3):expand(4, 3), 3, {stride = {0, 0}, padding = 0, dilation = 1})) end)
end
lunet.synchronize()
print('ok')

--[[ what the child printed (its end):
CASE 718
c/cpu/index.c:92:12: runtime error: signed integer overflow: 9223372036854775807 + 1 cannot be represented in type 'long int'
    #0 0x7fdb7728fc41 in run_select c/cpu/index.c:92
    #1 0x7fdb772901df in ln_cpu_index_select c/cpu/index.c:104
    #2 0x7fdb771c36f3 in ln_launch_seq c/core/device.c:517
    #3 0x7fdb771c388f in ln_launch c/core/device.c:497
    #4 0x7fdb771ef857 in launch c/ops/index.c:32
    #5 0x7fdb771ef857 in ln_index_select c/ops/index.c:48
    #6 0x562b6c1c95a8  (/usr/bin/luajit+0x745a8)
    #7 0x562b6c1a482d  (/usr/bin/luajit+0x4f82d)
    #8 0x562b6c1a84fc  (/usr/bin/luajit+0x534fc)
    #9 0x562b6c1c7195  (/usr/bin/luajit+0x72195)
    #10 0x562b6c1b96cd in lua_pcall (/usr/bin/luajit+0x646cd)
    #11 0x562b6c15d86a  (/usr/bin/luajit+0x886a)
    #12 0x562b6c15ea7e  (/usr/bin/luajit+0x9a7e)
    #13 0x562b6c1c7195  (/usr/bin/luajit+0x72195)
    #14 0x562b6c1b983c in lua_cpcall (/usr/bin/luajit+0x6483c)
    #15 0x562b6c15d6c9 in main (/usr/bin/luajit+0x86c9)
    #16 0x7fdb79045249 in __libc_start_call_main ../sysdeps/nptl/libc_start_call_main.h:58
    #17 0x7fdb79045304 in __libc_start_main_impl ../csu/libc-start.c:360
    #18 0x562b6c15d740 in _start (/usr/bin/luajit+0x8740)


]]
