-- PyTorch's own checkpoint files (lunet/torch_format.lua): lunet.load reads
-- what torch 1.13's torch.save wrote (spec/fixtures/torch_*.pt from
-- tools/gen_torch_format_fixtures.py; the values they must load as in
-- torch_format.safetensors), views keep sharing their storage, the bad files
-- give named errors, corrupted files never crash, and lunet.save_torch
-- writes files that lunet and (where /usr/bin/python3 has torch) torch read.
local lunet = require 'lunet'
local ffi = require 'ffi'
local fx = require 'support.fixtures'

local here = debug.getinfo(1, 'S').source:match('^@(.*/)') or './'
local function pt(name) return here .. 'fixtures/' .. name .. '.pt' end
local expect = fx.load_fixture('torch_format')

local function readfile(p) local f = assert(io.open(p, 'rb')); local s = f:read('*a'); f:close(); return s end
local function writefile(p, s) local f = assert(io.open(p, 'wb')); f:write(s); f:close() end
local tmpdir = os.tmpname(); os.remove(tmpdir); assert(os.execute('mkdir -p ' .. tmpdir))
local function tmp(name) return tmpdir .. '/' .. name end

-- every "<prefix>.<key>" of the expected tensors equals got[key] (dtype, shape, values)
local function same(prefix, got)
  local n = 0
  for k, want in pairs(expect) do
    local key = k:match('^' .. prefix:gsub('%.', '%%.') .. '%.(.*)$')
    if key then
      local t = got[key]
      assert.is_true(lunet.is_tensor(t), key)
      assert.are.equal(want.dtype, t.dtype, key)
      assert.are.same(want:size(), t:size(), key)
      if t:numel() > 0 then assert.are.equal(0, fx.maxdiff(t, want), key) end
      n = n + 1
    end
  end
  assert.is_true(n > 0)
end

describe('lunet.load of torch.save files', function()
  it('reads a conv net state_dict that load_state_dict takes', function()
    local sd, second = lunet.load(pt('torch_convnet'))
    same('convnet', sd)
    assert.is_nil(second)   -- (load_state_dict(lunet.load(p)) would take it for options)
    local nn = lunet.nn
    local net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(16, 5))
    net:load_state_dict(sd)
    assert.are.equal(0, fx.maxdiff(net:state_dict()['0.weight'], expect['convnet.0.weight']))
    assert.are.equal(0, sd['1.num_batches_tracked']:dim())
  end)

  it('keeps views of one storage sharing it, with their offsets and strides', function()
    local v = lunet.load(pt('torch_views'))
    same('views', v)
    assert.is_false(v.t:is_contiguous())
    assert.are.equal(6, v.row:storage_offset())
    v.base:fill_(-1)   -- every view sees it
    for _, k in ipairs { 'row', 'col', 't', 'narrow', 'step' } do assert.are.equal(-1, v[k]:max():item(), k) end
    assert.are_not.equal(-1, v.alone:max():item())
  end)

  it('reads every dtype, 0-d and empty tensors', function()
    local d = lunet.load(pt('torch_dtypes'))
    same('dtypes', d)
    assert.are.equal(0, d.scalar:dim())
    assert.are.same({ 0, 3 }, d.empty:size())
  end)

  it('reads a nested checkpoint into Lua values', function()
    local c = lunet.load(pt('torch_nested'))
    same('nested.model', c.model)
    assert.are.equal(3, c.epoch); assert.are.equal(0.125, c.lr); assert.are.equal('run-1', c.name)
    assert.are.same({ true, false }, c.flags)
    assert.are.same({ 1, 2, 3 }, c.sizes)   -- (1-based sequences)
    assert.is_nil(c.none)
    assert.are.equal(2 ^ 40, c.big); assert.are.equal(-5, c.neg)
    assert.are.equal(-(2LL ^ 62), c.huge)   -- past 2^53: an int64 cdata
    local st = c.optimizer.state[0]         -- (int keys stay as they are)
    assert.are.equal(0, fx.maxdiff(st.exp_avg, expect['nested.exp_avg']))
    assert.are.equal(0.1, c.optimizer.param_groups[1].lr)
    assert.are.same({ 0, 1 }, c.optimizer.param_groups[1].params)
  end)

  it('reads pickle protocol 4 (MEMOIZE, FRAME)', function()
    local p = lunet.load(pt('torch_proto4'))
    same('proto4', p)
    assert.are.equal('p4', p.name)
  end)

  it('moves tensors to the device asked for, and checks its options', function()
    local d = lunet.load(pt('torch_small'), { device = 'cpu:0' })
    assert.are.equal(15, d.w:sum():item())
    assert.truthy(fx.err_of(lunet.load, pt('torch_small'), { devcie = 'cpu' }):find("unknown option 'devcie'", 1, true))
  end)

  it('reads a ZIP64 central directory (as files over 4 GiB have)', function()
    assert.are.equal(15, lunet.load(pt('torch_zip64')).w:sum():item())
  end)

  it('refuses globals other than tensors and containers', function()
    local e = fx.err_of(lunet.load, pt('torch_evil'))
    assert.truthy(e:find('load: .*torch_evil.pt: refusing to unpickle global posix.system %(only tensors and containers are loaded%)'), e)
  end)

  it('names what it does not read', function()
    local cases = {
      torch_legacy = 'the legacy %(PyTorch < 1.6%) format is not supported',
      torch_int8 = 'int8 tensors %(torch.CharStorage%) are not supported',
      torch_deflate = "entry 'torch_small/data.pkl' is compressed %(zip method 8%)",
      torch_badsize = "entry 'torch_small/data/0' holds 20 bytes, its storage of 6 float32 needs 24",
    }
    for name, want in pairs(cases) do
      local e = fx.err_of(lunet.load, pt(name))
      assert.truthy(e:find('^load: .*' .. name .. '%.pt: ' .. want), e)
    end
    assert.truthy(fx.err_of(lunet.load, here .. 'fixtures'):find('load: .*fixtures', 1))
  end)

  it('never crashes on truncated or corrupted files', function()
    local good = readfile(pt('torch_convnet'))
    local p = tmp('bad.pt')
    local function try(s)
      writefile(p, s)
      local ok, e = pcall(lunet.load, p)
      if not ok then assert.truthy(tostring(e):find('load: ', 1, true), e) end
    end
    for cut = 0, #good, 97 do try(good:sub(1, cut)) end
    local seed = 12345
    for _ = 1, 300 do   -- one byte changed, positions spread over the file
      seed = (seed * 1103515245 + 12345) % 2147483648
      local at = seed % #good + 1
      try(good:sub(1, at - 1) .. string.char((good:byte(at) + 1 + seed % 254) % 256) .. good:sub(at + 1))
    end
  end)

  it('names malformed pickles', function()
    local zip = require 'lunet.torch_zip'
    local p = tmp('pkl.pt')
    local function with_pkl(pkl)
      local w = zip.create('test', p)
      w:add('archive/data.pkl', pkl)
      w:finish()
      return fx.err_of(lunet.load, p)
    end
    assert.truthy(with_pkl('\128\2\255'):find('unsupported pickle opcode 0xff'))
    assert.truthy(with_pkl('\128\2X\255\0\0\0ab'):find('truncated pickle'))
    assert.truthy(with_pkl('\128\2h\5.'):find('BINGET 5 of nothing'))
    assert.truthy(with_pkl('\128\2' .. ('('):rep(20000) .. '.'):find('pickle nests too deep'))
    assert.truthy(with_pkl('\128\2ctorch._utils\n_rebuild_tensor_v2\n(K\1K\2tR.'):find('its storage is number'))
    assert.truthy(with_pkl('\128\2(X\7\0\0\0storagectorch\nFloatStorage\nX\1\0\0\0' .. '0X\3\0\0\0cpuK\4tQ.')
      :find("storage '0' is missing"))
    assert.truthy(with_pkl('\128\2cbuiltins\neval\n.'):find('refusing to unpickle global builtins.eval'))
    assert.truthy(with_pkl('\128\2K\1K\2.'):find('STOP with 2 values'))
  end)
end)

describe('lunet.save_torch', function()
  local function sample()
    local base = lunet.arange(12):view(3, 4):float()
    return {
      w = base, t = base:t(), row = base:narrow(1, 2, 1),
      f64 = lunet.tensor({ math.pi, -1e300 }, { dtype = 'float64' }),
      f16 = lunet.tensor({ 0.5, -1.25 }, { dtype = 'float16' }),
      bf16 = lunet.tensor({ 2, -0.375 }, { dtype = 'bfloat16' }),
      i32 = lunet.tensor({ -7, 2147483647 }, { dtype = 'int32' }),
      i64 = lunet.tensor({ 2 ^ 40 + 3, -9 }, { dtype = 'int64' }),
      u8 = lunet.tensor({ 0, 200, 255 }, { dtype = 'uint8' }),
      bool = lunet.tensor({ true, false }),
      s = lunet.tensor(6.5), z = lunet.zeros(0, 2),
    }
  end
  local function check(src, got)
    for k, v in pairs(src) do
      assert.are.equal(v.dtype, got[k].dtype, k)
      assert.are.same(v:size(), got[k]:size(), k)
      if v:numel() > 0 then assert.are.equal(0, fx.maxdiff(got[k], v), k) end
    end
  end

  it('writes what lunet.load reads back, with nested values', function()
    local p = tmp('rt.pth')
    local src = sample()
    assert.are.equal(p, lunet.save_torch(p, { model = src, epoch = 3, lr = 0.5, name = 'x', flags = { true, false }, neg = -2 ^ 40 }))
    local got = lunet.load(p)
    check(src, got.model)
    assert.are.equal(3, got.epoch); assert.are.equal(0.5, got.lr); assert.are.equal('x', got.name)
    assert.are.same({ true, false }, got.flags); assert.are.equal(-2 ^ 40, got.neg)
    assert.are.equal(0, readfile(p):find('PK\3\4', 1, true) - 1)
  end)

  it('writes files torch 1.13 reads (when /usr/bin/python3 has torch)', function()
    local pr = io.popen('/usr/bin/python3 -c "import torch" 2>/dev/null && echo yes')
    local has = pr and pr:read('*a'):match('yes'); if pr then pr:close() end
    if not has then pending('no /usr/bin/python3 with torch'); return end
    local p, back = tmp('for_torch.pth'), tmp('from_torch.pt')
    local src = sample()
    lunet.save_torch(p, src)
    -- torch loads it and saves it again: lunet reads that back
    assert.is_true(os.execute(("/usr/bin/python3 -c \"import torch; d = torch.load('%s'); "
      .. "assert d['w'].dtype == torch.float32 and d['i64'][0].item() == 2**40 + 3; torch.save(d, '%s')\""):format(p, back)) == 0)
    check(src, lunet.load(back))
  end)

  it('names bad arguments, and leaves no file behind on error', function()
    local p = tmp('bad.pth')
    assert.truthy(fx.err_of(lunet.save_torch, 1, {}):find('save_torch: path must be a non%-empty string'))
    assert.truthy(fx.err_of(lunet.save_torch, p, 5):find('save_torch: obj must be a table'))
    assert.truthy(fx.err_of(lunet.save_torch, p, { f = print }):find('save_torch: the object.f: cannot write a function'))
    local cyc = {}; cyc.me = cyc
    assert.truthy(fx.err_of(lunet.save_torch, p, cyc):find('nest deeper than 100'))
    assert.truthy(fx.err_of(lunet.save_torch, tmpdir .. '/missing/x.pth', {}):find("save_torch: cannot write '.*/missing/x.pth': No such file or directory"))
    assert.is_nil(io.open(p, 'rb'))
  end)
end)
