-- tools/fuzz_api.lua: a fuzzer of lunet's Lua API. Each case is a few
-- statements of Lua, made from a seed: a random op from the table below
-- (factories, views with hostile sizes/strides/offsets, in-place ops on
-- overlapping views, reductions, indexing, conv/pool/linear and the other
-- nn.functional calls, autograd graphs with random hooks, save/load round
-- trips, DataLoaders, casts and random numbers, two virtual devices and
-- DataParallel; one or two devices a case) with random hostile
-- arguments. Lua errors are expected; a crash, an abort, a sanitizer report,
-- a hang, or a broken invariant (a round trip that changes values, a
-- tensor whose element count disagrees with its shape, a gradient of the
-- wrong shape) is a finding. Cases run in batches in child processes, so a
-- crash is observed; the case is then re-run alone and written as a
-- stand-alone Lua reproducer into the corpus (tools/corpus/api/).
--
--   luajit tools/fuzz_api.lua [--seconds N | --cases N] [--seed S] [--batch K] [--timeout T] [--strict] [--corpus DIR]
--   luajit tools/fuzz_api.lua --replay [--corpus DIR]      every corpus file, each in a child
--   luajit tools/fuzz_api.lua --print SEED CASE            the source of one case
-- --strict also fails on raw Lua errors ("attempt to index ...") from inside
-- lunet. Children get LUNET_CPU_MEMORY (default 512M) so that hostile sizes
-- fail as out of memory rather than filling the machine; LUNET_ASAN=1 runs
-- them with the sanitizer runtimes preloaded (LUNET_LIB picks the library).
-- Exit status: 0 nothing found, 1 a finding (its reproducer printed).

local script = arg and arg[0] or 'tools/fuzz_api.lua'

-- ---- helpers every case (and every reproducer) starts with ------------------------------

local HEADER = [=[
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
]=]

-- ---- a deterministic generator (Park-Miller), one per case ------------------------------

local function generator(seed, case)
  local s = (seed * 1000003 + case * 7919 + 12345) % 2147483646 + 1
  local g = {}
  local function nxt() s = s * 16807 % 2147483647; return s end
  for _ = 1, 4 do nxt() end
  function g.int(n) return nxt() % n + 1 end              -- 1..n
  function g.pick(list) return list[g.int(#list)] end
  function g.chance(p) return nxt() / 2147483647 < p end
  return g
end

-- ---- hostile values, as Lua source -------------------------------------------------------

local HOSTILE = { '-1', '0', '2^31', '2^32', '2^62', '2^63', '-2^62', '-2^63', '1.5', '0/0', 'math.huge',
  '-math.huge', '1e308', 'nil', '"x"', '{}', 'true', '2^53 + 1', '-2^31', '2^40' }
local DTYPES = { 'float32', 'float64', 'int32', 'int64', 'uint8', 'bool', 'float16', 'bfloat16' }

local function num(g) return g.chance(0.7) and tostring(g.int(5) - 1) or g.pick(HOSTILE) end
local function dim(g) return g.chance(0.7) and tostring(g.pick({ 1, 2, 3, -1, -2 })) or g.pick(HOSTILE) end
local function list(g, n, f)
  local t = {}
  for i = 1, n do t[i] = f(g) end
  return '{' .. table.concat(t, ', ') .. '}'
end
local function shape(g, hostile)
  local n = g.int(5) - 1
  return list(g, n, hostile and num or function() return tostring(g.int(4) - 1) end)
end
-- a valid tensor of a small random shape and dtype, sometimes a view
local function tensor(g)
  local sh = shape(g)
  local e = ('lunet.randn(%s)'):format(sh)
  if g.chance(0.3) then e = ('lunet.randn(%s):mul(4):to(%q)'):format(sh, g.pick(DTYPES)) end
  local r = g.int(6)
  if r == 1 then e = ('lunet.randn(3, 4):t()')
  elseif r == 2 then e = ('lunet.randn(1, 3):expand(4, 3)')
  elseif r == 3 then e = ('lunet.randn(5, 6):narrow(2, 2, 3)') end
  return e
end
local function index(g)
  return ('lunet.tensor(%s, {dtype = %q})'):format(list(g, g.int(4), num), g.chance(0.8) and 'int64' or g.pick(DTYPES))
end

-- ---- the ops: each returns a statement --------------------------------------------------

local OPS = {}

OPS.factory = function(g)
  local f = g.pick({ 'zeros', 'ones', 'empty', 'rand', 'randn' })
  local args = g.chance(0.5) and shape(g, true) or table.concat({ num(g), num(g), num(g) }, ', ')
  if g.chance(0.3) then args = args .. (', {dtype = %q}'):format(g.pick(DTYPES)) end
  local r = g.int(6)
  if r == 1 then return ('fuzz.check(lunet.full(%s, %s))'):format(shape(g, true), num(g))
  elseif r == 2 then return ('fuzz.check(lunet.arange(%s, %s, %s))'):format(num(g), num(g), num(g))
  elseif r == 3 then return ('fuzz.check(lunet.eye(%s, %s))'):format(num(g), num(g))
  elseif r == 4 then return ('fuzz.check(lunet.linspace(%s, %s, %s))'):format(num(g), num(g), num(g))
  elseif r == 5 then return ('fuzz.check(lunet.randint(%s, %s, %s, {dtype = %q}))'):format(num(g), num(g), shape(g, true), g.pick(DTYPES)) end
  return ('fuzz.check(lunet.%s(%s))'):format(f, args)
end

local VIEWS = {
  function(g) return ('a:as_strided(%s, %s, %s)'):format(shape(g, true), shape(g, true), num(g)) end,
  function(g) return ('a:view(%s)'):format(shape(g, true)) end,
  function(g) return ('a:reshape(%s)'):format(shape(g, true)) end,
  function(g) return ('a:expand(%s)'):format(shape(g, true)) end,
  function(g) return ('a:narrow(%s, %s, %s)'):format(dim(g), num(g), num(g)) end,
  function(g) return ('a:select(%s, %s)'):format(dim(g), num(g)) end,
  function(g) return ('a:transpose(%s, %s)'):format(dim(g), dim(g)) end,
  function(g) return ('a:permute(%s)'):format(list(g, g.int(4) - 1, dim)) end,
  function(g) return ('a:unsqueeze(%s)'):format(dim(g)) end,
  function(g) return ('a:squeeze(%s)'):format(dim(g)) end,
  function(g) return ('a:flatten(%s, %s)'):format(dim(g), dim(g)) end,
  function(g) return ('a:chunk(%s, %s)[1]'):format(num(g), dim(g)) end,
  function(g) return ('a:split(%s, %s)[1]'):format(num(g), dim(g)) end,
  function() return 'a:t()' end,
  function() return 'a[1]' end,
}
local ACTIONS = { 'v:contiguous()', 'v:clone()', 'v:sum()', 'v:fill_(1)', 'v:add_(1)', 'v:copy_(b)', 'v:mul_(v)',
  'v:zero_()', 'v:totable()', 'v:float()', 'v:view(-1)', 'v:add_(a)', 'v:copy_(a)', 'v:neg_()' }

OPS.view = function(g)
  return ('local v = %s; fuzz.check(v); %s; fuzz.check(v)'):format(g.pick(VIEWS)(g), g.pick(ACTIONS))
end

-- in-place ops whose source overlaps the target (or a target with itself)
OPS.overlap = function(g)
  local src = g.pick({ 'a:t()', 'a:narrow(1, 1, 1)', 'a:view(-1):narrow(1, 2, a:numel() - 1):view(-1)',
    'a:expand(a:size())', 'a:select(1, 1)', 'a', 'a:flatten():unsqueeze(1)' })
  local dst = g.pick({ 'a', 'a:t()', 'a:narrow(1, 1, 1)', 'lunet.randn(1, 4):expand(3, 4)', 'a:view(-1)' })
  local op = g.pick({ 'add_', 'sub_', 'mul_', 'div_', 'copy_', 'maximum_', 'minimum_', 'pow_', 'atan2_', 'fmod_' })
  return ('local d = %s; d:%s(%s); fuzz.check(d)'):format(dst, op, src)
end

OPS.reduce = function(g)
  local r = g.pick({ 'sum', 'mean', 'max', 'min', 'argmax', 'argmin', 'prod', 'var', 'std', 'amax', 'amin',
    'all', 'any', 'norm' })
  local args = g.pick({ '', dim(g), dim(g) .. ', true', dim(g) .. ', ' .. g.pick(HOSTILE), g.pick(HOSTILE) })
  return ('local r = a:%s(%s); fuzz.check(r)'):format(r, args)
end

OPS.index = function(g)
  local r = g.int(8)
  if r == 1 then return ('fuzz.check(a:index_select(%s, %s))'):format(dim(g), index(g)) end
  if r == 2 then return ('fuzz.check(a:gather(%s, %s))'):format(dim(g), ('%s:view(%s)'):format(index(g), shape(g, true))) end
  if r == 3 then return ('fuzz.check(a:scatter_add(%s, %s, b))'):format(dim(g), index(g)) end
  if r == 4 then return ('fuzz.check(a[%s])'):format(num(g)) end
  if r == 5 then return ('a[%s] = %s; fuzz.check(a)'):format(num(g), num(g)) end
  if r == 6 then return ('fuzz.check(a[{%s, {%s, %s}}])'):format(num(g), num(g), num(g)) end
  if r == 7 then return ('fuzz.check(a:where(a:gt(0), %s))'):format(g.chance(0.5) and num(g) or 'b') end
  return ('fuzz.check(lunet.%s({a, b, %s}, %s))'):format(g.pick({ 'cat', 'stack' }), tensor(g), dim(g))
end

local function x4(g)
  if g.chance(0.8) then
    return ('lunet.randn(%d, %d, %d, %d)'):format(g.int(3) - 1, g.int(4), g.int(9) - 1, g.int(9) - 1)
  end
  return tensor(g)
end
local function geom(g) return g.chance(0.6) and tostring(g.int(3)) or g.pick({ num(g), '{' .. num(g) .. ', ' .. num(g) .. '}' }) end
OPS.nn = function(g)
  local r = g.int(11)
  local opts = ('{stride = %s, padding = %s, dilation = %s}'):format(geom(g), g.chance(0.6) and '0' or geom(g), geom(g))
  if r == 1 then
    return ('local x = %s; fuzz.check(F.conv2d(x, lunet.randn(%d, x:size(2) or 1, %d, %d), %s, %s))'):format(
      x4(g), g.int(4), g.int(3), g.int(3), g.chance(0.5) and 'nil' or ('lunet.randn(%s)'):format(num(g)), opts)
  elseif r == 2 then return ('fuzz.check(F.max_pool2d(%s, %s, %s))'):format(x4(g), geom(g), opts)
  elseif r == 3 then return ('fuzz.check(F.avg_pool2d(%s, %s, %s))'):format(x4(g), geom(g), opts)
  elseif r == 4 then return ('fuzz.check(F.adaptive_avg_pool2d(%s, %s))'):format(x4(g), geom(g))
  elseif r == 5 then return ('fuzz.check(F.linear(a, lunet.randn(%s, %s), %s))'):format(num(g), num(g), g.chance(0.5) and 'nil' or 'lunet.randn(' .. num(g) .. ')')
  elseif r == 6 then return ('fuzz.check(F.batch_norm(%s, lunet.zeros(3), lunet.ones(3), nil, nil, %s))'):format(x4(g), g.pick({ 'true', 'false' }))
  elseif r == 7 then return ('fuzz.check(F.%s(a, %s))'):format(g.pick({ 'softmax', 'log_softmax' }), dim(g))
  elseif r == 8 then return ('fuzz.check(F.cross_entropy(lunet.randn(3, 4), %s))'):format(index(g))
  elseif r == 9 then return ('fuzz.check(F.pad(%s, %s))'):format(x4(g), list(g, 4, num))
  elseif r == 10 then return ('fuzz.check(F.dropout(a, %s))'):format(num(g)) end
  local mod = g.pick({ 'nn.Linear(%s, %s)', 'nn.Conv2d(%s, %s, 3)', 'nn.BatchNorm2d(%s)', 'nn.MaxPool2d(%s)' })
  return ('local m = %s; fuzz.check(m(%s))'):format(mod:format(num(g), num(g)), x4(g))
end

-- a small graph of differentiable ops with random hooks, then backward
local GRAPH = { 'y = y + y', 'y = y * 2', 'y = y:exp()', 'y = y:tanh()', 'y = y:relu()', 'y = y:t()',
  'y = y:reshape(-1)', 'y = y:sum(1, true)', 'y = y:expand(2, y:size(1) or 1, y:size(2) or 1)',
  'y = y:narrow(1, 1, 1)', 'y = lunet.cat({y, y}, 1)', 'y = y:clamp(-1, 1)', 'y = y:pow(2)', 'y = y:mean()',
  'y = y:index_select(1, lunet.tensor({1}, {dtype = "int64"}))', 'y = y:max(1)', 'y = y:sigmoid():log()' }
-- (x and g, y and g: hooks that capture their own tensor, a cycle through its record)
local HOOKS = { 'nil', 'g * 2', 'g:t()', 'lunet.ones(1)', '"x"', 'g:double()', 'g:reshape(-1)', 'g:detach():zero_()', '{}',
  'x and g', 'y and g' }
OPS.autograd = function(g)
  local s = { ('local x = lunet.randn(%d, %d, {requires_grad = true}); local y = x'):format(g.int(3), g.int(3)) }
  if g.chance(0.3) then s[#s + 1] = ('x:register_hook(function(g) return %s end)'):format(g.pick(HOOKS)) end
  for _ = 1, g.int(5) do
    s[#s + 1] = g.pick(GRAPH)
    if g.chance(0.3) then s[#s + 1] = ('y:register_hook(function(g) return %s end)'):format(g.pick(HOOKS)) end
  end
  s[#s + 1] = g.pick({ 'y:sum():backward()', 'y:backward(lunet.ones_like(y))', 'y:backward(' .. tensor(g) .. ')',
    'y:sum():backward(); y:sum():backward()' })
  s[#s + 1] = 'if x.grad and tostring(x.grad:size()) ~= tostring(x:size()) then fuzz.fail("grad of the wrong shape") end'
  return table.concat(s, '; ')
end

-- save/load round trips of random tensors and views
OPS.save = function(g)
  local t = g.pick({ 'a', 'b', 'a:t()', 'lunet.randn(3, 4):narrow(2, 2, 2)', tensor(g), 'lunet.zeros(0, 3)' })
  return ('local p = fuzz.tmp(); local t = %s; local ok = pcall(lunet.save, p, {[%s] = t}, %s); ' ..
    'if ok then local r = lunet.load(p); os.remove(p); for k, v in pairs(r) do fuzz.same(t, v, "save/load") end end; os.remove(p)')
    :format(t, g.pick({ '"t"', '"a.b"', '""', '"x\\0y"', '("n"):rep(300)' }), g.pick({ 'nil', '{k = "v"}', '{k = 1}', '"x"' }))
end

OPS.loader = function(g)
  local o = ('{batch_size = %s, shuffle = %s, drop_last = %s, workers = %s}'):format(
    g.chance(0.7) and tostring(g.int(4)) or num(g), g.pick({ 'true', 'false' }), g.pick({ 'true', 'false' }),
    g.chance(0.7) and tostring(g.int(3) - 1) or num(g))
  local after = g.pick({ '', 'dl:close(); for xb in dl:iter() do end',
    'local it = dl:iter(); it(); dl:close(); it()', 'dl:close(); dl:close()' })
  return ('local dl = data.DataLoader(data.TensorDataset(lunet.randn(%d, 3), lunet.arange(%d)), %s); ' ..
    'for xb, yb in dl:iter() do fuzz.check(xb); fuzz.check(yb) end; %s')
    :format(g.int(9) - 1, g.int(9) - 1, o, after)
end

-- two virtual devices: tensors on cpu:1, mixed devices, a failing kernel on
-- a device worker (the device must work again once its error was raised),
-- DataParallel over both
OPS.devices = function(g)
  local r = g.int(5)
  if r == 1 then return ('local c = a:to("cpu:1"); fuzz.check(c:%s(%s))'):format(
    g.pick({ 'add', 'mul', 'copy_', 'add_', 'matmul', 'maximum' }), g.pick({ 'b', 'a', 'c', 'b:to("cpu:1")', num(g) })) end
  if r == 2 then return ('fuzz.check(lunet.cat({a:to("cpu:1"), a}, %s))'):format(dim(g)) end
  if r == 3 then
    return ('pcall(function() return F.cross_entropy(lunet.randn(3, 4, {device = "cpu:1"}), %s:to("cpu:1")):item() end); ' ..
      'pcall(lunet.synchronize); local ok, v = pcall(function() return (lunet.ones(2, {device = "cpu:1"}) * 2):sum():item() end); ' ..
      'if not ok or v ~= 4 then fuzz.fail("cpu:1 unusable after a stream error: " .. tostring(v)) end'):format(index(g))
  end
  if r == 4 then return ('local t = lunet.randn(%s, {device = "cpu:1"}); fuzz.check(t:%s()); lunet.synchronize(%s)'):format(
    shape(g, true), g.pick({ 'sum', 'contiguous', 'clone', 'exp' }), g.pick({ '"cpu:1"', '"cpu:0"', '1', '"cpu:2"', 'nil' })) end
  return ('local dp = lunet.parallel.DataParallel(nn.Linear(4, 2), {devices = {"cpu:0", "cpu:1"}}); ' ..
    'local y = dp(lunet.randn(%s, 4)); y:sum():backward(); fuzz.check(y)'):format(num(g))
end

OPS.misc = function(g)
  local r = g.int(8)
  if r == 1 then return ('fuzz.check(a:to(%q))'):format(g.pick(DTYPES)) end
  if r == 2 then return ('fuzz.check(lunet.full({3}, %s):to(%q))'):format(g.pick(HOSTILE), g.pick(DTYPES)) end
  if r == 3 then return ('fuzz.check(a:clamp(%s, %s))'):format(num(g), num(g)) end
  if r == 4 then return ('fuzz.check(a:long():fmod(%s))'):format(num(g)) end
  if r == 5 then return ('fuzz.check(a:matmul(b))') end
  if r == 6 then return ('fuzz.check(lunet.from_buffer(%s, %s, %q))'):format(
    g.pick({ '"abcd"', '("x"):rep(64)', 'ffi.new("float[4]")', '""' }), shape(g, true), g.pick(DTYPES)) end
  if r == 7 then return ('a:uniform_(%s, %s); a:bernoulli_(%s); fuzz.check(a)'):format(num(g), num(g), num(g)) end
  return ('fuzz.check(lunet.tensor(%s))'):format(list(g, g.int(3), function() return list(g, g.int(3), num) end))
end

-- untrusted files: mutated JPEG/PNG images (decode_image from a string or a
-- uint8 tensor view, read_image, ImageFolder in a 2-worker DataLoader) and
-- mutated ONNX models (onnx.load, then a forward of the fixture's input shape)
local IMAGES = { 'baseline.jpg', 'baseline444.jpg', 'cmyk.jpg', 'gray.jpg', 'progressive.jpg', 'wide.JPEG', 'gray1.png',
  'gray16.png', 'gray2_interlaced.png', 'gray4.png', 'gray_alpha.png', 'palette4.png', 'palette8_trns.png', 'rgb.png',
  'rgb16.png', 'rgba.png', 'rgb_interlaced.png', 'tall.png' }
local MODES = { 'nil', '{mode = "UNCHANGED"}', '{mode = "GRAY"}', '{mode = "GRAY_ALPHA"}', '{mode = "RGB"}',
  '{mode = "RGB_ALPHA"}', '{mode = "rgb"}', '{mode = "CMYK"}', '{mode = 3}', '{mod = "RGB"}', '"RGB"', '{}' }
local CHANNELS = 'local ch = ({GRAY = 1, GRAY_ALPHA = 2, RGB = 3, RGB_ALPHA = 4})[(mode and mode.mode or ""):upper()]; ' ..
  'if ch and img:size(1) ~= ch then fuzz.fail("mode " .. mode.mode .. " gave " .. img:size(1) .. " channels") end; ' ..
  'if img.dtype ~= "uint8" or img:dim() ~= 3 then fuzz.fail("not a uint8 (C, H, W) image") end'
OPS.image = function(g)
  local bytes = ('fuzz.mutate(fuzz.read("spec/fixtures/images/%s"), %d, %d)'):format(g.pick(IMAGES), g.int(2 ^ 30), g.int(6) - 1)
  local mode = g.pick(MODES)
  local r = g.int(5)
  local s = ('local s = %s; local mode = %s; '):format(bytes, mode)
  if r == 1 then return s .. 'local img = data.decode_image(s, mode); fuzz.check(img); ' .. CHANNELS end
  if r == 2 then
    return s .. 'local p = fuzz.write(fuzz.tmp(), s); local ok, img = pcall(data.read_image, p, mode); os.remove(p); ' ..
      'if not ok then error(img, 0) end; fuzz.check(img); ' .. CHANNELS
  end
  if r == 3 then   -- a uint8 view at an offset, or a hostile tensor
    local t = g.pick({ 'lunet.cat({lunet.zeros(3, {dtype = "uint8"}), lunet.from_buffer(s, {#s}, "uint8")}):narrow(1, 4, #s)',
      'lunet.from_buffer(s, {#s}, "uint8"):view(1, -1)', 'lunet.from_buffer(s .. s, {#s, 2}, "uint8"):select(2, 1)',
      'lunet.zeros(0, {dtype = "uint8"})', 'lunet.from_buffer(s, {#s}, "uint8"):float()', '""', 'lunet.tensor(255, {dtype = "uint8"})',
      'lunet.from_buffer(s, {#s}, "uint8"):to("cpu:1")' })
    return s .. ('local img = data.decode_image(%s, mode); fuzz.check(img); %s'):format(t, CHANNELS)
  end
  if r == 4 then return ('fuzz.check(data.read_image(%s, %s))'):format(g.pick({ '"/nonexistent.png"', '"/tmp"',
    '"/dev/null"', '"/dev/zero"', '"spec/fixtures/onnx_mixed.onnx"', '""', '"a\\0b"', '1', 'nil' }), mode) end
  -- ImageFolder of mutated images (class folders a, b) in a 2-worker DataLoader
  return s .. ('local d = fuzz.tmp(); os.execute("mkdir -p " .. d .. "/a " .. d .. "/b"); ' ..
    'fuzz.write(d .. "/a/x.png", s); fuzz.write(d .. "/b/y.jpg", fuzz.mutate(s, %d, 2)); fuzz.write(d .. "/b/z.png", fuzz.read("spec/fixtures/images/rgb.png")); ' ..
    'local ok, e = pcall(function() local ds = data.ImageFolder(d, {transform = data.transforms.Resize({5, 5})}); ' ..
    'for xb, yb in data.DataLoader(ds, {batch_size = 2, workers = 2}):iter() do fuzz.check(xb) end end); ' ..
    'os.execute("rm -rf " .. d); if not ok then error(e, 0) end'):format(g.int(2 ^ 30))
end

local ONNX = { { 'mixed', '2, 3, 8, 8' }, { 'lenet', '2, 1, 16, 16' }, { 'resnet', '2, 3, 16, 16' } }
OPS.onnx = function(g)
  local m = g.chance(0.6) and ONNX[1] or g.pick(ONNX)
  return ('local p = fuzz.write(fuzz.tmp(), fuzz.mutate(fuzz.read("spec/fixtures/onnx_%s.onnx"), %d, %d, %s)); ' ..
    'local ok, m = pcall(lunet.onnx.load, p); os.remove(p); if not ok then error(m, 0) end; ' ..
    'fuzz.check(m(lunet.randn(%s))); tostring(m)'):format(m[1], g.int(2 ^ 30), g.int(4), tostring(g.chance(0.85)), g.pick({ m[2], '1, 3, 1, 1', '0, 3, 8, 8' }))
end

-- the AutoAugment family, RandomApply/Choice/Order, perspective and elastic
-- with hostile parameters, on odd images (empty, 1x1, NaN, inf, uint8,
-- views), called on a tensor and in a 2-worker DataLoader
local function val(g) return g.chance(0.85) and g.pick({ '0', '0.5', '1', '2', '0.3', '8', '9', '30' }) or g.pick(HOSTILE) end
local function tfill(g) return g.pick({ 'nil', '0', '0.5', '{0.1, 0.2, 0.3}', '{1, 2}', '0/0', 'math.huge', '{}', '"x"' }) end
local function interp(g) return g.pick({ '"nearest"', '"bilinear"', '"bicubic"', '1' }) end
local TFS
TFS = {
  function(g) return ('T.RandomPosterize(%s, %s)'):format(val(g), val(g)) end,
  function(g) return ('T.RandomSolarize(%s, %s)'):format(val(g), val(g)) end,
  function(g) return ('T.RandomAdjustSharpness(%s, %s)'):format(val(g), val(g)) end,
  function(g) return ('T.%s(%s)'):format(g.pick({ 'RandomAutocontrast', 'RandomEqualize', 'RandomInvert' }), val(g)) end,
  function(g) return ('T.AutoAugment(%s, %s, %s)'):format(g.pick({ '"imagenet"', '"cifar10"', '"svhn"', '"x"', 'nil' }), interp(g), tfill(g)) end,
  function(g) return ('T.RandAugment{num_ops = %s, magnitude = %s, num_magnitude_bins = %s, fill = %s}'):format(val(g), val(g), val(g), tfill(g)) end,
  function(g) return ('T.TrivialAugmentWide{num_magnitude_bins = %s, interpolation = %s, fill = %s}'):format(val(g), interp(g), tfill(g)) end,
  function(g) return ('T.RandomPerspective(%s, {p = %s, interpolation = %s, fill = %s})'):format(val(g), val(g), interp(g), tfill(g)) end,
  function(g) return ('T.ElasticTransform(%s, %s, {fill = %s})'):format(g.pick({ val(g), '{' .. val(g) .. ', ' .. val(g) .. '}' }), val(g), tfill(g)) end,
  function(g) return ('T.RandomApply({%s}, %s)'):format(TFS[g.int(9)](g), val(g)) end,
  function(g) return ('T.RandomChoice({%s, %s}, %s)'):format(TFS[g.int(9)](g), TFS[g.int(9)](g),
    g.pick({ 'nil', '{p = {1, 2}}', '{p = {0, 0}}', '{p = {1}}', ('{p = {%s, %s}}'):format(val(g), val(g)) })) end,
  function(g) return ('T.RandomOrder({%s, %s})'):format(TFS[g.int(9)](g), TFS[g.int(9)](g)) end,
}
local IMGS = { 'lunet.rand(3, 6, 7)', 'lunet.rand(3, 1, 1)', 'lunet.rand(1, 1, 1)', 'lunet.rand(3, 0, 5)', 'lunet.rand(0, 4, 4)',
  'lunet.rand(1, 5, 5)', 'lunet.rand(4, 5, 5)', 'lunet.full({3, 4, 4}, 0/0)', 'lunet.full({3, 4, 4}, math.huge)',
  'lunet.rand(3, 5, 5):mul(-1e30)', '(lunet.rand(3, 6, 6) * 255):floor():byte()', 'lunet.rand(3, 8, 9):transpose(2, 3)',
  'lunet.rand(3, 8, 16):narrow(3, 2, 8)', 'lunet.rand(2, 3, 6, 6)', 'lunet.rand(6, 6)', 'lunet.tensor(1)', 'lunet.rand(3, 6, 6):double()' }
local FFORMS = {
  function(g) return ('F.posterize(x, %s)'):format(val(g)) end, function(g) return ('F.solarize(x, %s)'):format(val(g)) end,
  function(g) return ('F.adjust_sharpness(x, %s)'):format(val(g)) end,
  function(g) return ('F.%s(x)'):format(g.pick({ 'autocontrast', 'equalize', 'invert' })) end,
  function(g) return ('F._apply_op(x, %s, %s, {interpolation = %s, fill = %s})'):format(g.pick({ '"ShearX"', '"Rotate"',
    '"TranslateY"', '"Posterize"', '"Solarize"', '"Equalize"', '"Brightness"', '"Sharpness"', '"Nope"' }), val(g), interp(g), tfill(g)) end,
  function(g) return ('F.perspective(x, {{0, 0}, {%s, 0}, {%s, %s}, {0, 4}}, {{%s, 0}, {4, 0}, {4, 4}, {0, %s}}, {fill = %s})')
    :format(val(g), val(g), val(g), val(g), val(g), tfill(g)) end,
  function(g) return ('F.elastic_transform(x, lunet.randn(1, x:size(2) or 1, x:size(3) or 1, 2):mul(%s), {fill = %s})'):format(val(g), tfill(g)) end,
}
OPS.transform = function(g)
  local img = g.pick(IMGS)
  local r = g.int(3)
  if r == 1 then return ('local T = data.transforms; local F = T.functional; local x = %s; fuzz.check(%s)'):format(img, g.pick(FFORMS)(g)) end
  local tf = TFS[g.int(#TFS)](g)
  if r == 2 then return ('local T = data.transforms; local tf = %s; tostring(tf); fuzz.check(tf(%s))'):format(tf, img) end
  local x = g.pick({ 'lunet.rand(4, 3, 6, 7)', '(lunet.rand(5, 3, 5, 5) * 255):floor():byte()', 'lunet.rand(3, 1, 1, 1)',
    'lunet.rand(2, 3, 0, 4)', 'lunet.full({2, 3, 4, 4}, 0/0)', 'lunet.rand(3, 4, 1, 1)' })
  return ('local T = data.transforms; local x = %s; local dl = data.DataLoader(data.TensorDataset(x, lunet.arange(x:size(1))), ' ..
    '{batch_size = 2, workers = 2, transform = %s}); for xb, yb in dl:iter() do fuzz.check(xb) end'):format(x, tf)
end

local OP_NAMES = {}
-- FUZZ_API_OPS=image,onnx,transform: only those ops (a focused run)
local only = os.getenv('FUZZ_API_OPS')
for k in pairs(OPS) do
  if not only or only == '' or (',' .. only .. ','):find(',' .. k .. ',', 1, true) then OP_NAMES[#OP_NAMES + 1] = k end
end
table.sort(OP_NAMES)

-- the source of case `case` of `seed`: a few statements on a and b
local function case_source(seed, case)
  local g = generator(seed, case)
  local ndev = g.int(2)
  local s = { ('-- fuzz_case seed %d case %d'):format(seed, case), ('fuzz.devices(%d)'):format(ndev),
    ('lunet.manual_seed(%d)'):format(case), 'local a = ' .. tensor(g), 'local b = ' .. tensor(g) }
  for _ = 1, g.int(3) do
    local op = g.pick(OP_NAMES)
    if op == 'devices' and ndev == 1 then op = OPS.misc and 'misc' or OP_NAMES[1] end
    s[#s + 1] = ('fuzz.try(function() %s end)'):format(OPS[op](g))
  end
  -- FUZZ_API_PLANT=CASE:crash|hang|fail plants a finding (the fuzzer's own spec)
  local pc, what = (os.getenv('FUZZ_API_PLANT') or ''):match('^(%d+):(%a+)$')
  if tonumber(pc) == case then
    s[#s + 1] = ({ crash = "ffi.cast('int *', 0)[0] = 1", hang = 'while true do end',
      fail = "fuzz.fail('planted')" })[what]
  end
  return table.concat(s, '\n') .. '\n'
end

-- ---- the child: run cases, announcing each first ----------------------------------------

local function child(seed, first, count)
  local out = io.stdout
  for c = first, first + count - 1 do
    out:write('CASE ', c, '\n'); out:flush()
    local f = assert(loadstring(HEADER .. case_source(seed, c) .. 'return fuzz\n', '=fuzz_case'))
    local ok, fz = pcall(f)
    if ok then
      for _, e in ipairs(fz.raw) do out:write('RAW ', c, ' ', (e:gsub('\n', ' ')), '\n') end
    else
      out:write('ERROR ', c, ' ', (tostring(fz):gsub('\n', ' ')), '\n')
    end
    if c % 16 == 0 then collectgarbage() end
  end
  require('lunet').synchronize()
  out:write('DONE\n')
  os.exit(0)
end

-- ---- the parent ----------------------------------------------------------------------------

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function child_env()
  local e = { 'LUNET_CPU_MEMORY=' .. (os.getenv('LUNET_CPU_MEMORY') or '512M'), 'OMP_NUM_THREADS=1',
    'OMP_WAIT_POLICY=passive' }
  if os.getenv('LUNET_ASAN') and os.getenv('LUNET_ASAN') ~= '' then
    local p = io.popen('echo "$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"')
    e[#e + 1] = 'LD_PRELOAD=' .. p:read('*l'); p:close()
    e[#e + 1] = 'ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1'
    e[#e + 1] = 'UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1'
  end
  return table.concat(e, ' ')
end

-- run a command under a timeout; returns the exit code (124/137: timed out) and its output
local function run(cmd, timeout, log)
  local full = ('env %s timeout -s KILL %d %s >%s 2>&1; echo $?'):format(child_env(), timeout, cmd, shell_quote(log))
  local p = io.popen(full)
  local rc = tonumber(p:read('*l'))
  p:close()
  local f = io.open(log)
  local out = f and f:read('*a') or ''
  if f then f:close() end
  return rc, out
end

local function describe_rc(rc)
  if rc == 137 then return 'timed out (killed)' end
  if rc == 3 then return 'an invariant failed' end
  if rc and rc > 128 then return 'killed by signal ' .. (rc - 128) end
  return 'exit status ' .. tostring(rc)
end

local function reproducer(seed, cases, why, out)
  local s = { ('-- fuzz_api reproducer: seed %d, case%s %s: %s'):format(seed, #cases > 1 and 's' or '',
    table.concat(cases, ','), why),
    '-- run: luajit <this file> (or luajit tools/fuzz_api.lua --replay); passes when it exits 0',
    HEADER }
  for _, c in ipairs(cases) do s[#s + 1] = 'do\n' .. case_source(seed, c) .. 'end' end
  s[#s + 1] = "lunet.synchronize()\nprint('ok')\n"
  local tail = out:sub(-3000):gsub('%]%]', '] ]')
  s[#s + 1] = '--[[ what the child printed (its end):\n' .. tail .. '\n]]\n'
  return table.concat(s, '\n')
end

local function parse_args(argv)
  local o = { seconds = 30, seed = os.time() % 1000000, batch = 100, timeout = 60, corpus = 'tools/corpus/api' }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == '--seconds' then o.seconds = tonumber(argv[i + 1]); i = i + 1
    elseif a == '--seed' then o.seed = tonumber(argv[i + 1]); i = i + 1
    elseif a == '--cases' then o.cases = tonumber(argv[i + 1]); i = i + 1
    elseif a == '--batch' then o.batch = tonumber(argv[i + 1]); i = i + 1
    elseif a == '--timeout' then o.timeout = tonumber(argv[i + 1]); i = i + 1
    elseif a == '--corpus' then o.corpus = argv[i + 1]; i = i + 1
    elseif a == '--replay' then o.replay = true
    elseif a == '--strict' then o.strict = true
    elseif a == '--print' then o.print = { tonumber(argv[i + 1]), tonumber(argv[i + 2]) }; i = i + 2
    elseif a == '--child' then o.child = { tonumber(argv[i + 1]), tonumber(argv[i + 2]), tonumber(argv[i + 3]) }; i = i + 3
    else io.stderr:write('fuzz_api: unknown argument ' .. a .. '\n'); os.exit(2) end
    i = i + 1
  end
  return o
end

local function replay(o)
  local p = io.popen('ls ' .. shell_quote(o.corpus) .. '/*.lua 2>/dev/null')
  local files = {}
  for l in p:lines() do files[#files + 1] = l end
  p:close()
  local tmp = os.tmpname()
  local failed = 0
  for _, f in ipairs(files) do
    local rc, out = run('luajit ' .. shell_quote(f), o.timeout, tmp)
    if rc ~= 0 or not out:find('\nok\n', 1, true) and not out:find('^ok\n') then
      failed = failed + 1
      print(('fuzz_api replay: %s: %s'):format(f, describe_rc(rc)))
      print(out:sub(-3000))
    end
  end
  os.remove(tmp)
  print(('fuzz_api replay: %d corpus files, %d passed, %d failed'):format(#files, #files - failed, failed))
  os.exit(failed == 0 and 0 or 1)
end

local function main(o)
  if o.child then return child(o.child[1], o.child[2], o.child[3]) end
  if o.print then io.write(HEADER, case_source(o.print[1], o.print[2])); return end
  if o.replay then return replay(o) end
  local log = os.tmpname()
  local t0, first, batches = os.time(), 1, 0
  local raw, raw_seen = 0, {}
  print(('fuzz_api: seed %d, %s, batches of %d cases'):format(o.seed,
    o.cases and (o.cases .. ' cases') or (o.seconds .. 's'), o.batch))
  while (o.cases and first <= o.cases) or (not o.cases and os.time() - t0 < o.seconds) do
    local n = o.cases and math.min(o.batch, o.cases - first + 1) or o.batch
    local cmd = ('luajit %s --child %d %d %d'):format(shell_quote(script), o.seed, first, n)
    local rc, out = run(cmd, o.timeout, log)
    batches = batches + 1
    for c, msg in out:gmatch('\nRAW (%d+) ([^\n]*)') do
      raw = raw + 1
      local key = msg:gsub('^[^:]*:%d+: ', ''):sub(1, 60)
      if not raw_seen[key] then
        raw_seen[key] = true
        print(('fuzz_api: raw Lua error in seed %d case %s: %s'):format(o.seed, c, msg))
        if o.strict then print(case_source(o.seed, tonumber(c))) end
      end
    end
    if rc ~= 0 or not out:find('\nDONE\n') then
      local last = 0
      for c in out:gmatch('CASE (%d+)\n') do last = tonumber(c) end
      local why = describe_rc(rc)
      print(('fuzz_api: FOUND: seed %d, case %d: %s'):format(o.seed, last, why))
      -- the case alone, in a fresh child; else every case of the batch up to it
      local rc1, out1 = run(('luajit %s --child %d %d 1'):format(shell_quote(script), o.seed, last), o.timeout, log)
      local cases = { last }
      if rc1 == 0 and out1:find('\nDONE\n') then
        cases = {}
        for c = first, last do cases[#cases + 1] = c end
        print('fuzz_api: not reproduced alone: the reproducer runs the batch up to it')
      else out = out1; why = describe_rc(rc1) end
      os.execute('mkdir -p ' .. shell_quote(o.corpus))
      local path = ('%s/crash-%d-%d.lua'):format(o.corpus, o.seed, last)
      local src = reproducer(o.seed, cases, why, out)
      local f = assert(io.open(path, 'w')); f:write(src); f:close()
      print('fuzz_api: reproducer written to ' .. path .. ':')
      print(src)
      os.remove(log)
      os.exit(1)
    end
    first = first + n
  end
  os.remove(log)
  print(('fuzz_api: %d cases in %d batches, %ds, seed %d: no crash, hang or broken invariant; %d raw Lua errors')
    :format(first - 1, batches, os.time() - t0, o.seed, raw))
  if o.strict and raw > 0 then os.exit(1) end
  os.exit(0)
end

main(parse_args(arg or {}))
