-- fuzz_api reproducer: seed 11, case 5234: exit status 1
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
-- fuzz_case seed 11 case 5234
lunet.manual_seed(5234)
local a = lunet.randn(3, 4):t()
local b = lunet.randn(1, 3):expand(4, 3)
fuzz.try(function() local x = lunet.randn(0, 1, 4, 6); fuzz.check(F.conv2d(x, lunet.randn(4, x:size(2) or 1, 2, 3), nil, {stride = 1, padding = {3, 4}, dilation = 1})) end)
end
lunet.synchronize()
print('ok')

--[[ what the child printed (its end):
CASE 5234
c/nn/conv2d.c:604:9: runtime error: division by zero
    #0 0x7f7fe616b5a7 in conv_plan c/nn/conv2d.c:604
    #1 0x7f7fe6178ce2 in conv_forward c/nn/conv2d.c:678
    #2 0x7f7fe61903a7 in ln_conv2d_forward c/nn/conv2d.c:712
    #3 0x559d509245a8  (/usr/bin/luajit+0x745a8)
    #4 0x559d508ff82d  (/usr/bin/luajit+0x4f82d)
    #5 0x559d509034fc  (/usr/bin/luajit+0x534fc)
    #6 0x559d50922195  (/usr/bin/luajit+0x72195)
    #7 0x559d509146cd in lua_pcall (/usr/bin/luajit+0x646cd)
    #8 0x559d508b886a  (/usr/bin/luajit+0x886a)
    #9 0x559d508b9a7e  (/usr/bin/luajit+0x9a7e)
    #10 0x559d50922195  (/usr/bin/luajit+0x72195)
    #11 0x559d5091483c in lua_cpcall (/usr/bin/luajit+0x6483c)
    #12 0x559d508b86c9 in main (/usr/bin/luajit+0x86c9)
    #13 0x7f7fe7e45249 in __libc_start_call_main ../sysdeps/nptl/libc_start_call_main.h:58
    #14 0x7f7fe7e45304 in __libc_start_main_impl ../csu/libc-start.c:360
    #15 0x559d508b8740 in _start (/usr/bin/luajit+0x8740)


]]
