-- fuzz_api reproducer: seed 101, case 15586: exit status 1
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
-- the number of virtual CPU devices this case runs with (1: kernels run inline;
-- 2: on two device workers, errors raised at the next synchronisation)
function fuzz.devices(n)
  if lunet.device_count() ~= n then lunet.set_cpu_devices(n) end
end
-- a path no other process uses: the pid (math.random is unseeded, the same
-- sequence in every process, so concurrent fuzzers loaded each other's saves)
pcall(ffi.cdef, 'int getpid(void);')
function fuzz.tmp()
  FUZZ_NTMP = (FUZZ_NTMP or 0) + 1   -- a global: each case has its own fuzz table
  return ('%s/fuzz_api_%d_%d'):format(os.getenv('FUZZ_TMP') or '/tmp', ffi.C.getpid(), FUZZ_NTMP)
end
-- a file's bytes, and a copy of them mutated deterministically by seed k:
-- n edits (a byte set to a random or boundary value, a run cut out or
-- repeated, the end cut off), mostly in the first 600 bytes (the headers);
-- inplace: only bytes overwritten (a protobuf's outer lengths stay right)
function fuzz.read(p) local f = assert(io.open(p, 'rb')); local s = f:read('*a'); f:close(); return s end
function fuzz.write(p, s) local f = assert(io.open(p, 'wb')); f:write(s); f:close(); return p end
function fuzz.mutate(s, k, n, inplace)
  local st = k % 2147483646 + 1
  local function r(m) st = st * 16807 % 2147483647; return st % m end
  for _ = 1, n do
    if #s == 0 then break end
    local at = (r(4) > 0 and r(math.min(#s, 600)) or r(#s)) + 1
    local e = r(6)
    if inplace then e = ({ 0, 1, 4 })[r(3) + 1] end
    if e <= 1 then s = s:sub(1, at - 1) .. string.char(({ 0, 255, 127, 128, r(256), r(256) })[r(6) + 1]) .. s:sub(at + 1)
    elseif e == 2 then s = s:sub(1, at - 1) .. s:sub(at + 1 + r(16))
    elseif e == 3 then s = s:sub(1, at) .. s:sub(at, at + r(32)) .. s:sub(at + 1)
    elseif e == 4 then s = s:sub(1, at - 1) .. string.char(r(256), r(256), r(256), r(256)) .. s:sub(at + 4)
    else s = s:sub(1, at + r(64)) end
  end
  return s
end
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
-- fuzz_case seed 101 case 15586
fuzz.devices(1)
lunet.manual_seed(15586)
local a = lunet.randn({0, 1, 0, 2})
local b = lunet.randn({3, 1})
fuzz.try(function() local p = fuzz.write(fuzz.tmp(), fuzz.mutate(fuzz.read("spec/fixtures/onnx_mixed.onnx"), 75794555, 3, true)); local ok, m = pcall(lunet.onnx.load, p); os.remove(p); if not ok then error(m, 0) end; fuzz.check(m(lunet.randn(1, 3, 1, 1))); tostring(m) end)
fuzz.try(function() local T = data.transforms; local F = T.functional; local x = lunet.rand(0, 4, 4); fuzz.check(F.perspective(x, {{0, 0}, {30, 0}, {8, 9}, {0, 4}}, {{0.3, 0}, {4, 0}, {4, 4}, {0, 9}}, {fill = nil})) end)
fuzz.try(function() local T = data.transforms; local x = (lunet.rand(5, 3, 5, 5) * 255):floor():byte(); local dl = data.DataLoader(data.TensorDataset(x, lunet.arange(x:size(1))), {batch_size = 2, workers = 2, transform = T.TrivialAugmentWide{num_magnitude_bins = 0, interpolation = "bicubic", fill = 0}}); for xb, yb in dl:iter() do fuzz.check(xb) end end)
end
lunet.synchronize()
print('ok')

--[[ what the child printed (its end):
CASE 15586
c/data/batch.c:1042:3: runtime error: null pointer passed as argument 2, which is declared to never be null
    #0 0x7fac9f9a7b87 in image_ops c/data/batch.c:1042
    #1 0x7fac9f9a7b87 in gather_range c/data/batch.c:1269
    #2 0x7fac9f9aad99 in ln_gather_run c/data/batch.c:1288
    #3 0x7fac9f9ab618 in ln_batch_gather c/data/batch.c:1337
    #4 0x564769d595a8  (/usr/bin/luajit+0x745a8)
    #5 0x564769d3482d  (/usr/bin/luajit+0x4f82d)
    #6 0x564769d384fc  (/usr/bin/luajit+0x534fc)
    #7 0x564769d57195  (/usr/bin/luajit+0x72195)
    #8 0x564769d496cd in lua_pcall (/usr/bin/luajit+0x646cd)
    #9 0x564769ced86a  (/usr/bin/luajit+0x886a)
    #10 0x564769ceea7e  (/usr/bin/luajit+0x9a7e)
    #11 0x564769d57195  (/usr/bin/luajit+0x72195)
    #12 0x564769d4983c in lua_cpcall (/usr/bin/luajit+0x6483c)
    #13 0x564769ced6c9 in main (/usr/bin/luajit+0x86c9)
    #14 0x7faca1845249 in __libc_start_call_main ../sysdeps/nptl/libc_start_call_main.h:58
    #15 0x7faca1845304 in __libc_start_main_impl ../csu/libc-start.c:360
    #16 0x564769ced740 in _start (/usr/bin/luajit+0x8740)


]]
