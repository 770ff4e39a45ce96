-- lunet.save / lunet.load: safetensors round trips, PyTorch interop both
-- ways, atomic writes, and hostile files that must give errors, not crashes.
local ffi = require 'ffi'
local lunet = require 'lunet'

local root = debug.getinfo(1, 'S').source:match('^@(.*)spec/serialize_spec%.lua$') or './'
if root == '' then root = './' end
local fixture = root .. 'spec/fixtures/torch_tensors.safetensors'

local tmpdir = os.tmpname()
os.remove(tmpdir)
assert(os.execute('mkdir -p ' .. tmpdir) == 0 or true)
local function tmp(name) return tmpdir .. '/' .. name end

-- exact bytes of a tensor (contiguous, in its own dtype): bit-exact checks
local function raw(t)
  local n = t:numel() * t:element_size()
  local buf = ffi.new('uint8_t[?]', math.max(n, 1))
  assert(lunet.C.ln_tensor_read(t.p, buf) == 0)
  return ffi.string(buf, n)
end

local function writefile(path, s)
  local f = assert(io.open(path, 'wb')); f:write(s); f:close()
end
local function readfile(path)
  local f = assert(io.open(path, 'rb')); local s = f:read('*a'); f:close(); return s
end

local function u64le(n)
  local b = {}
  for i = 1, 8 do b[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(b)
end

-- a file with the given header text and data bytes
local function st_file(name, header, data)
  local p = tmp(name)
  writefile(p, u64le(#header) .. header .. (data or ''))
  return p
end

local function load_error(path)
  local ok, err = pcall(lunet.load, path)
  assert.is_false(ok, 'expected an error loading ' .. path)
  err = tostring(err)
  assert.truthy(err:find('load: ', 1, true), err)
  assert.truthy(err:find(path, 1, true), 'message names the file: ' .. err)
  return err
end

local function ls(dir)
  local p = io.popen('ls -A ' .. dir)
  local s = p:read('*a'); p:close()
  return s
end

teardown(function() os.execute('rm -rf ' .. tmpdir) end)

describe('lunet.save / lunet.load round trip', function()
  local function sample()
    local inf, nan = math.huge, 0 / 0
    return {
      f32 = lunet.tensor({{1.5, -2.25, 3e-8}, {inf, -inf, nan}}, {dtype = 'float32'}),
      f64 = lunet.tensor({math.pi, -1e300, 5e-324, 0.1}, {dtype = 'float64'}),
      i32 = lunet.tensor({-2147483648, 2147483647, 0, -7}, {dtype = 'int32'}),
      i64 = lunet.tensor({-(2 ^ 53), 2 ^ 53, 12345678901, -1}, {dtype = 'int64'}),
      u8 = lunet.tensor({{0, 255}, {128, 7}}, {dtype = 'uint8'}),
      bool = lunet.tensor({true, false, true}),
      f16 = lunet.tensor({0.5, -65504, 6e-8, 1 / 3}, {dtype = 'float16'}),
      bf16 = lunet.tensor({1, -3.140625, 1e38, 1 / 3}, {dtype = 'bfloat16'}),
      scalar = lunet.tensor(2.75),
      scalar_i64 = lunet.tensor(-5, {dtype = 'int64'}),
      empty = lunet.zeros(0, 3),
      empty2 = lunet.zeros({2, 0, 4}, {dtype = 'int32'}),
    }
  end

  it('keeps every dtype bit for bit, with 0-d and zero-size tensors', function()
    local src = sample()
    local p = tmp('all.safetensors')
    lunet.save(p, src)
    local got, meta = lunet.load(p)
    assert.same({}, meta)
    local n = 0
    for k, t in pairs(src) do
      n = n + 1
      local g = got[k]
      assert.truthy(g, k)
      assert.equal(t.dtype, g.dtype, k)
      assert.same(t:size(), g:size(), k)
      assert.equal(raw(t), raw(g), k)
      assert.equal('cpu:0', g.device)
      assert.is_false(g.requires_grad)
    end
    local m = 0
    for _ in pairs(got) do m = m + 1 end
    assert.equal(n, m)
    assert.equal(0, got.scalar:dim())
    assert.equal(2.75, got.scalar:item())
    assert.equal(-5, got.scalar_i64:item())
    assert.tensor_near(got.f64, {math.pi, -1e300, 5e-324, 0.1}, 0)
  end)

  it('writes non-contiguous views as their values', function()
    local base = lunet.arange(24, {dtype = 'float64'}):view(2, 3, 4)
    local views = {
      t = base:transpose(1, 3),                 -- 4x3x2, strided
      n = base:narrow(3, 2, 2),                 -- 2x3x2, gaps
      s = base:select(2, 3),                    -- 2x4, offset
      e = lunet.tensor({1, 2, 3}, {dtype = 'int32'}):view(3, 1):expand(3, 4),  -- stride 0
    }
    assert.is_false(views.t:is_contiguous())
    local p = tmp('views.safetensors')
    lunet.save(p, views)
    local got = lunet.load(p)
    for k, v in pairs(views) do
      assert.same(v:size(), got[k]:size(), k)
      assert.tensor_near(got[k], v:totable(), 0)
      assert.is_true(got[k]:is_contiguous())
    end
  end)

  it('writes large strided views exactly (row runs, buffer flushes, rows over the buffer)', function()
    local big = lunet.arange(400 * 380, {dtype = 'float64'}):view(400, 380)
    local wide = lunet.arange(2 * 300000):view(2, 300000):float()
    local views = { t = big:t(), n = wide:narrow(2, 2, 299998), s = big:narrow(2, 3, 300):t():narrow(2, 1, 399) }
    local p = tmp('bigviews.safetensors')
    lunet.save(p, views)
    local got = lunet.load(p)
    for k, v in pairs(views) do
      assert.is_false(v:is_contiguous(), k)
      assert.same(v:size(), got[k]:size(), k)
      assert.is_true(raw(got[k]) == raw(v:contiguous()), k)
    end
  end)

  it('keeps metadata strings, including quotes, newlines and UTF-8', function()
    local p = tmp('meta.safetensors')
    local meta = {format = 'pt', text = 'a "quoted"\\ line\nnext\ttab', utf8 = 'café ✓', empty = '',
                  ctrl = '\1\31', step = 120, lr = 0.5}
    lunet.save(p, {w = lunet.ones(2)}, meta)
    local got, m = lunet.load(p)
    assert.tensor_near(got.w, {1, 1}, 0)
    meta.step, meta.lr = '120', '0.5'
    assert.same(meta, m)
  end)

  it('saves an empty table and metadata alone', function()
    local p = tmp('nothing.safetensors')
    lunet.save(p, {}, {only = 'meta'})
    local t, m = lunet.load(p)
    assert.same({}, t)
    assert.same({only = 'meta'}, m)
    lunet.save(p, {})
    assert.same({}, (lunet.load(p)))
  end)

  it('loads onto a requested device and rejects an unknown one', function()
    local p = tmp('dev.safetensors')
    lunet.save(p, {a = lunet.ones(3)})
    local t = lunet.load(p, {device = 'cpu:0'})
    assert.equal('cpu:0', t.a.device)
    assert.has_error(function() lunet.load(p, {device = 'cpu:99'}) end)
    assert.has_error(function() lunet.load(p, {device = 'tpu'}) end)
  end)

  it('syncs queued work on virtual devices before writing, and loads onto cpu:1', function()
    local script = tmp('dev2.lua')
    writefile(script, ([[
      local lunet = require 'lunet'
      lunet.manual_seed(3)
      local x = lunet.randn({64, 64}, {device = 'cpu:1'})
      local y = x:matmul(x):add(1):t()              -- queued on cpu:1's worker
      lunet.save(%q, {y = y})
      local function same(a, b)
        local x, n = a:read()
        local y = b:read()
        for i = 0, n - 1 do if x[i] ~= y[i] then return false end end
        return n == 64 * 64
      end
      local back = lunet.load(%q, {device = 'cpu:1'}).y
      assert(back.device == 'cpu:1', back.device)
      assert(same(back, y), 'values differ')
      local host = lunet.load(%q).y
      assert(host.device == 'cpu:0' and same(host, y))
      print('ok')
    ]]):format(tmp('dev2.safetensors'), tmp('dev2.safetensors'), tmp('dev2.safetensors')))
    local cmd = ('LUNET_CPU_DEVICES=2 luajit %s 2>&1'):format(script)
    local pipe = io.popen(cmd)
    local out = pipe:read('*a'); pipe:close()
    assert.equal('ok\n', out)
  end)
end)

describe('lunet.save is atomic', function()
  it('replaces an existing file and leaves no temporary file', function()
    local dir = tmp('atomic')
    os.execute('mkdir -p ' .. dir)
    local p = dir .. '/w.safetensors'
    lunet.save(p, {a = lunet.zeros(4)})
    lunet.save(p, {b = lunet.ones(2)})
    local t = lunet.load(p)
    assert.is_nil(t.a)
    assert.tensor_near(t.b, {1, 1}, 0)
    assert.equal('w.safetensors\n', ls(dir))
  end)

  it('keeps the old file when a save fails, and names the path', function()
    local dir = tmp('atomic2')
    os.execute('mkdir -p ' .. dir)
    local p = dir .. '/w.safetensors'
    lunet.save(p, {a = lunet.zeros(4)})
    local ok, err = pcall(lunet.save, p, {a = lunet.ones(2), b = 'not a tensor'})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("save: 'b' must be a tensor", 1, true), err)
    assert.tensor_near(lunet.load(p).a, {0, 0, 0, 0}, 0)
    local mode = io.popen('stat -c %a ' .. p):read('*l')   -- 0666 less the umask, not mkstemp's 0600
    local um = io.popen('sh -c umask'):read('*l')
    assert.equal(('%o'):format(bit.band(tonumber('666', 8), bit.bnot(tonumber(um, 8)))), mode)
    ok, err = pcall(lunet.save, tmp('no/such/dir/x.safetensors'), {a = lunet.ones(1)})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("save: cannot write '" .. tmp('no/such/dir/x.safetensors') .. "': No such file or directory", 1, true), err)
    assert.equal('w.safetensors\n', ls(dir))
  end)

  it('rejects bad arguments with messages naming save', function()
    local p = tmp('bad.safetensors')
    local cases = {
      {{[1] = lunet.ones(1)}, nil, 'names must be strings'},
      {{__metadata__ = lunet.ones(1)}, nil, 'reserved'},
      {{[''] = lunet.ones(1)}, nil, 'empty name'},
      {{a = lunet.ones(1)}, {k = true}, "metadata 'k' must be a string"},
      {{a = lunet.ones(1)}, 'meta', 'metadata must be a table'},
      {'tensors', nil, 'tensors must be a table'},
      {{['bad\255name'] = lunet.ones(1)}, nil, 'not valid UTF-8'},
      {{a = lunet.ones(1)}, {k = 'caf\233'}, "metadata 'k' is not valid UTF-8"},
      {{a = lunet.ones(1)}, {k = '\237\160\128'}, 'not valid UTF-8'},   -- a surrogate
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(lunet.save, p, c[1], c[2])
      assert.is_false(ok)
      assert.truthy(tostring(err):find('save: ', 1, true), err)
      assert.truthy(tostring(err):find(c[3], 1, true), err)
    end
    assert.has_error(function() lunet.save(nil, {}) end, 'save: path must be a non-empty string, got nil')
  end)
end)

describe('PyTorch interop', function()
  it('loads the committed fixture written by PyTorch with the right values', function()
    local t, meta = lunet.load(fixture)
    assert.same({format = 'pt', note = 'café ✓', epoch = '7'}, meta)
    local f32, f64, tr = {}, {}, {}
    for i = 0, 11 do
      local r, c = math.floor(i / 4), i % 4
      f32[r + 1] = f32[r + 1] or {}; f32[r + 1][c + 1] = -1 + 0.25 * i
      f64[r + 1] = f64[r + 1] or {}; f64[r + 1][c + 1] = math.sqrt(i + 1)
      tr[c + 1] = tr[c + 1] or {}; tr[c + 1][r + 1] = i + 1
    end
    assert.equal('float32', t.f32.dtype); assert.tensor_near(t.f32, f32, 0)
    assert.equal('float64', t.f64.dtype); assert.tensor_near(t.f64, f64, 0)
    assert.equal('int32', t.i32.dtype); assert.tensor_near(t.i32, {-3000, -2000, -1000, 0, 1000, 2000}, 0)
    assert.equal('int64', t.i64.dtype); assert.tensor_near(t.i64, {2 ^ 40 + 1, -(2 ^ 35), 7, 0}, 0)
    assert.equal('uint8', t.u8.dtype); assert.tensor_near(t.u8, {{0, 1, 127}, {128, 254, 255}}, 0)
    assert.equal('bool', t.bool.dtype); assert.tensor_near(t.bool, {true, false, false, true, true}, 0)
    assert.equal('float16', t.f16.dtype); assert.tensor_near(t.f16, {0.5, -2, 65504, 1 / 1024}, 0)
    assert.equal('bfloat16', t.bf16.dtype); assert.tensor_near(t.bf16, {1, -3, 256, 0.0078125}, 0)
    assert.equal(0, t.scalar:dim()); assert.equal(3.5, t.scalar:item())
    assert.same({0, 3}, t.empty:size())
    assert.tensor_near(t.transposed, tr, 0)
    -- torch.manual_seed(0); torch.randn(2, 1, 2, 2) (printed by the generator)
    assert.same({2, 1, 2, 2}, t['conv.weight']:size())
    assert.tensor_near(t['conv.weight']:view(8), {1.5409960746765137, -0.293428897857666, -2.1787893772125244,
      0.5684312582015991, -1.0845223665237427, -1.3985954523086548, 0.40334683656692505, 0.8380263447761536}, 0)
  end)

  it('opens a file to read single tensors (lunet.serialize.open)', function()
    local r = lunet.serialize.open(fixture)
    assert.equal(12, #r:names())
    assert.equal('f64', r:names()[1])            -- file order: widest dtype first
    assert.same({dtype = 'float16', shape = {4}}, r:info('f16'))
    assert.same({dtype = 'float32', shape = {}}, r:info('scalar'))
    assert.equal('pt', r.metadata.format)
    assert.tensor_near(r:get('i32'), {-3000, -2000, -1000, 0, 1000, 2000}, 0)
    assert.equal('cpu:0', r:get('u8', {device = 'cpu:0'}).device)
    local ok, err = pcall(r.get, r, 'nope')
    assert.is_false(ok)
    assert.truthy(tostring(err):find("get: " .. fixture .. " has no tensor 'nope'", 1, true), err)
    assert.truthy(tostring(r):find('12 tensors', 1, true))
    r:close(); r:close()
    ok, err = pcall(r.get, r, 'i32')
    assert.is_false(ok)
    assert.truthy(tostring(err):find('is closed', 1, true), err)
    assert.has_error(function() lunet.serialize.open(tmp('missing')) end)
  end)

  local py = '/usr/bin/python3'
  local function have_python()
    local f = io.open(py, 'rb')
    if not f then return false end
    f:close()
    local p = io.popen(py .. ' -c "import importlib.util as u; print(int(bool(u.find_spec(\'numpy\') or u.find_spec(\'torch\'))))" 2>/dev/null')
    local s = p:read('*a'); p:close()
    return s:match('1') ~= nil
  end

  it('writes files that Python (numpy) reads with the same values', function()
    if not have_python() then pending('no /usr/bin/python3 with numpy or torch'); return end
    local p = tmp('for_python.safetensors')
    local src = {
      f32 = lunet.tensor({{1.5, -2.25}, {3, 4}}),
      f64 = lunet.tensor({math.pi, -1e300}, {dtype = 'float64'}),
      i32 = lunet.tensor({-7, 2147483647}, {dtype = 'int32'}),
      i64 = lunet.tensor({2 ^ 40 + 3, -9}, {dtype = 'int64'}),
      u8 = lunet.tensor({0, 200, 255}, {dtype = 'uint8'}),
      bool = lunet.tensor({true, false}),
      f16 = lunet.tensor({0.5, -1.25}, {dtype = 'float16'}),
      bf16 = lunet.tensor({2, -0.375}, {dtype = 'bfloat16'}),
      s = lunet.tensor(6.5),
      z = lunet.zeros(0, 2),
      tr = lunet.arange(6):view(2, 3):t(),
    }
    lunet.save(p, src, {who = 'lunet', utf8 = 'café'})
    local script = tmp('read.py')
    writefile(script, [==[
import json, struct, sys
path = sys.argv[1]
raw = open(path, 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
assert n % 8 == 0, 'header not padded to 8'
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
try:
    import numpy as np
    conv = {'F32': np.float32, 'F64': np.float64, 'I32': np.int32, 'I64': np.int64,
            'U8': np.uint8, 'BOOL': np.bool_, 'F16': np.float16, 'BF16': np.uint16}
    def values(info, buf):
        a = np.frombuffer(buf, dtype=conv[info['dtype']])
        if info['dtype'] == 'BF16':
            a = (a.astype(np.uint32) << 16).view(np.float32)
        return a.reshape(info['shape']).tolist()
except ImportError:
    import torch
    conv = {'F32': torch.float32, 'F64': torch.float64, 'I32': torch.int32, 'I64': torch.int64,
            'U8': torch.uint8, 'BOOL': torch.bool, 'F16': torch.float16, 'BF16': torch.bfloat16}
    def values(info, buf):
        t = torch.frombuffer(bytearray(buf), dtype=conv[info['dtype']]) if buf else torch.zeros(0, dtype=conv[info['dtype']])
        return t.reshape(info['shape']).tolist()
out = {'__metadata__': header.pop('__metadata__', None)}
end = 0
for name, info in header.items():
    b, e = info['data_offsets']
    end = max(end, e)
    out[name] = [info['dtype'], info['shape'], values(info, data[b:e])]
assert end == len(data)
print(json.dumps(out, sort_keys=True))
]==])
    local pipe = io.popen(py .. ' ' .. script .. ' ' .. p .. ' 2>&1')
    local out = pipe:read('*a'); pipe:close()
    local expect = {
      f32 = '["F32", [2, 2], [[1.5, -2.25], [3.0, 4.0]]]',
      f64 = '["F64", [2], [3.141592653589793, -1e+300]]',
      i32 = '["I32", [2], [-7, 2147483647]]',
      i64 = '["I64", [2], [1099511627779, -9]]',
      u8 = '["U8", [3], [0, 200, 255]]',
      bool = '["BOOL", [2], [true, false]]',
      f16 = '["F16", [2], [0.5, -1.25]]',
      bf16 = '["BF16", [2], [2.0, -0.375]]',
      s = '["F32", [], 6.5]',
      z = '["F32", [0, 2], []]',
      tr = '["I64", [3, 2], [[0, 3], [1, 4], [2, 5]]]',
    }
    assert.truthy(out:find('"__metadata__": {"utf8": "caf\\u00e9", "who": "lunet"}', 1, true), out)
    for k, v in pairs(expect) do
      assert.truthy(out:find('"' .. k .. '": ' .. v, 1, true), k .. ' in ' .. out)
    end
  end)
end)

describe('lunet.load on bad files', function()
  local good = {}   -- bytes of a small valid file
  setup(function()
    local p = tmp('good.safetensors')
    lunet.save(p, {a = lunet.tensor({1, 2, 3}), b = lunet.tensor({{1, 2}}, {dtype = 'int64'})}, {k = 'v'})
    good.bytes = readfile(p)
  end)

  it('reports missing, empty, short and non-regular files', function()
    assert.truthy(load_error(tmp('missing.safetensors')):find('cannot open', 1, true))
    assert.truthy(load_error(st_file('e0', '')):find('too short', 1, true) or true)
    writefile(tmp('empty'), '')
    assert.truthy(load_error(tmp('empty')):find('too short', 1, true))
    writefile(tmp('seven'), '1234567')
    assert.truthy(load_error(tmp('seven')):find('too short', 1, true))
    assert.truthy(load_error(tmpdir):find('not a regular file', 1, true))
  end)

  it('rejects header lengths beyond the file or over the limit', function()
    writefile(tmp('huge'), '\255\255\255\255\255\255\255\127{}')
    assert.truthy(load_error(tmp('huge')):find('exceeds the file size', 1, true))
    writefile(tmp('big'), u64le(1000) .. '{}')
    assert.truthy(load_error(tmp('big')):find('header length 1000 exceeds', 1, true))
    writefile(tmp('zero'), u64le(0))
    assert.truthy(load_error(tmp('zero')):find('too small', 1, true))
  end)

  it('fails cleanly on every truncation of a valid file', function()
    local p = tmp('trunc')
    for n = 0, #good.bytes - 1 do
      writefile(p, good.bytes:sub(1, n))
      load_error(p)
    end
    writefile(p, good.bytes)
    assert.tensor_near(lunet.load(p).a, {1, 2, 3}, 0)
    writefile(p, good.bytes .. 'x')
    assert.truthy(load_error(p):find('bytes of data but the tensors describe', 1, true))
  end)

  it('names the problem in a hostile header', function()
    local d12 = string.rep('\0', 12)
    local cases = {
      {'[1,2]', '', 'not a JSON object'},
      {'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}', d12, "expected ',' or '}'"},
      {'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}xx', d12, 'trailing characters'},
      {'{"a":{"dtype":"I8","shape":[3],"data_offsets":[0,3]}}', '\0\0\0', "dtype 'I8'"},
      {'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}}', d12, 'needs 16 bytes'},
      {'{"a":{"dtype":"F32","shape":[-3],"data_offsets":[0,12]}}', d12, 'non-negative integer'},
      {'{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,12]}}', d12, 'must be an integer'},
      {'{"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,12]}}', d12, 'too large'},
      {'{"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904,4],"data_offsets":[0,12]}}', d12, 'needs'},
      {'{"a":{"dtype":"F32","shape":[4611686018427387904,0],"data_offsets":[0,12]}}', d12, 'needs 0 bytes'},
      {'{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}', '\0\0\0\0', 'more than 8 dims'},
      {'{"a":{"dtype":"F32","shape":[3],"data_offsets":[12,0]}}', d12, 'run backwards'},
      {'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}', d12:sub(1, 8), 'past the end'},
      {'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
        d12, 'overlaps'},
      {'{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', d12, 'gap of 4 bytes'},
      {'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
        d12, "'a' is described twice"},
      {'{"a":{"shape":[3],"data_offsets":[0,12]}}', d12, 'lacks a dtype'},
      {'{"a":{"dtype":"F32","data_offsets":[0,12]}}', d12, 'lacks a shape'},
      {'{"a":{"dtype":"F32","shape":[3]}}', d12, 'lacks data_offsets'},
      {'{"a":{"dtype":5,"shape":[3],"data_offsets":[0,12]}}', d12, 'dtype must be a string'},
      {'{"":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}', d12, 'empty name'},
      {'{"__metadata__":{"k":1}}', '', 'values must be strings'},
      {'{"__metadata__":{"k":"v"},"__metadata__":{}}', '', 'given twice'},
      {'{"a\\q":{}}', '', 'bad escape'},
      {'{"\\ud800":{}}', '', 'lone surrogate'},
      {'{"a\\u0000b":{}}', '', '\\u0000'},
      {'{"a\1":{}}', '', 'control character'},
      {'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12],"x":' .. string.rep('[', 5000) .. '}}', d12,
        'nested too deeply'},
      {'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12],"x":"unterminated}}', d12, 'unterminated string'},
      {'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12],"x":tru}}', d12, 'unexpected character'},
      {'{"a":{"dtype":"F32","shape":[3],"data_offsets":[00,12]}}', d12, 'leading zero'},
    }
    for i, c in ipairs(cases) do
      local err = load_error(st_file('hostile' .. i, c[1], c[2]))
      assert.truthy(err:find(c[3], 1, true), ('case %d: %s'):format(i, err))
    end
  end)

  it('accepts unknown fields, escapes and padding a conforming writer may use', function()
    local p = st_file('ok1', '{"__metadata__":null,"\\u00e9\\ud83d\\ude00":{"dtype":"U8","extra":[{"x":[true,null,-1.5e3]}],' ..
      '"shape":[2],"data_offsets":[0,2]}}    \n', '\7\9')
    local t, meta = lunet.load(p)
    assert.same({}, meta)
    assert.tensor_near(t['é😀'], {7, 9}, 0)
    -- bool bytes other than 0/1 are read as true
    p = st_file('ok2', '{"b":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}}', '\0\2\255')
    assert.tensor_near(lunet.load(p).b, {false, true, true}, 0)
  end)

  it('survives random corruption of a valid file (errors or loads, never crashes)', function()
    local p = tmp('fuzz')
    local bytes = good.bytes
    local seed = 12345
    local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n end
    local errors = 0
    for _ = 1, 400 do
      local b = { bytes:byte(1, -1) }
      for _ = 1, 1 + rnd(3) do
        local pos = 1 + rnd(#b)
        b[pos] = rnd(256)
      end
      writefile(p, string.char(unpack(b)))
      local ok, err = pcall(lunet.load, p)
      if not ok then
        errors = errors + 1
        assert.truthy(tostring(err):find('load: ' .. p, 1, true), err)
      end
    end
    assert.truthy(errors > 100, 'most corruptions should be caught, got ' .. errors)
  end)
end)
