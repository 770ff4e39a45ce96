-- fuzz_api reproducer: seed 7, case 818: exit status 1
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
-- fuzz_case seed 7 case 818
lunet.manual_seed(818)
local a = lunet.randn(3, 4):t()
local b = lunet.randn({3, 2})
fuzz.try(function() fuzz.check(lunet.full({3}, math.huge):to("int64")) end)
fuzz.try(function() local p = fuzz.tmp(); local t = b; local ok = pcall(lunet.save, p, {["a.b"] = t}, nil); if ok then local r = lunet.load(p); os.remove(p); for k, v in pairs(r) do fuzz.same(t, v, "save/load") end end; os.remove(p) end)
fuzz.try(function() local d = a:t(); d:maximum_(a:view(-1):narrow(1, 2, a:numel() - 1):view(-1)); fuzz.check(d) end)
end
lunet.synchronize()
print('ok')

--[[ what the child printed (its end):
CASE 818
c/cpu/reduce.c:246:1: runtime error: signed integer overflow: -9223372036854775808 + -9223372036854775808 cannot be represented in type 'long int'
    #0 0x7f5fe51056b1 in seg_i64 c/cpu/reduce.c:246
    #1 0x7f5fe50d34e4 in reduce_row c/cpu/reduce.c:294
    #2 0x7f5fe50e7ea5 in rows_range c/cpu/reduce.c:315
    #3 0x7f5fe5116fec in ln_cpu_reduce c/cpu/reduce.c:580
    #4 0x7f5fe4fc36f3 in ln_launch_seq c/core/device.c:517
    #5 0x7f5fe4fc388f in ln_launch c/core/device.c:497
    #6 0x7f5fe5000e37 in reduce_impl c/ops/reduce.c:107
    #7 0x7f5fe50015b9 in ln_reduce c/ops/reduce.c:131
    #8 0x55bd86b555a8  (/usr/bin/luajit+0x745a8)
    #9 0x55bd86b3082d  (/usr/bin/luajit+0x4f82d)
    #10 0x55bd86b344fc  (/usr/bin/luajit+0x534fc)
    #11 0x55bd86b53195  (/usr/bin/luajit+0x72195)
    #12 0x55bd86b456cd in lua_pcall (/usr/bin/luajit+0x646cd)
    #13 0x55bd86ae986a  (/usr/bin/luajit+0x886a)
    #14 0x55bd86aeaa7e  (/usr/bin/luajit+0x9a7e)
    #15 0x55bd86b53195  (/usr/bin/luajit+0x72195)
    #16 0x55bd86b4583c in lua_cpcall (/usr/bin/luajit+0x6483c)
    #17 0x55bd86ae96c9 in main (/usr/bin/luajit+0x86c9)
    #18 0x7f5fe6e45249 in __libc_start_call_main ../sysdeps/nptl/libc_start_call_main.h:58
    #19 0x7f5fe6e45304 in __libc_start_main_impl ../csu/libc-start.c:360
    #20 0x55bd86ae9740 in _start (/usr/bin/luajit+0x8740)


]]
