-- lunet.data: IDX / CIFAR readers (files written here, and the real
-- Fashion-MNIST read independently through zlib), the DataLoader (batch
-- counts, shuffling, workers, resume) and the C image transforms.
local ffi = require 'ffi'
local lunet = require 'lunet'
local data = lunet.data

-- zlib, straight from Lua: writes gzip fixtures and re-reads the real files
if not pcall(ffi.typeof, 'struct spec_gz') then
  ffi.cdef [[
    struct spec_gz { int unused; };
    struct spec_gz *gzopen(const char *path, const char *mode);
    int gzread(struct spec_gz *f, void *buf, unsigned len);
    int gzwrite(struct spec_gz *f, const void *buf, unsigned len);
    int gzclose(struct spec_gz *f);
  ]]
end
local okz, Z = pcall(ffi.load, 'z')
if not okz then Z = ffi.load('libz.so.1') end

local FMNIST = '/usr/share/datasets/fashion-mnist'

local tmp = require 'tmp'
local tmpname = tmp.file

local function write(path, bytes)
  local f = assert(io.open(path, 'wb'))
  f:write(bytes)
  f:close()
  return path
end

local function write_gz(path, bytes)
  local f = Z.gzopen(path, 'wb')
  assert(f ~= nil, 'gzopen failed')
  assert(Z.gzwrite(f, bytes, #bytes) == #bytes)
  Z.gzclose(f)
  return path
end

local function be32(v)
  return string.char(math.floor(v / 2 ^ 24) % 256, math.floor(v / 2 ^ 16) % 256, math.floor(v / 256) % 256, v % 256)
end

local function idx_bytes(type_code, shape, payload)
  local h = { string.char(0, 0, type_code, #shape) }
  for _, s in ipairs(shape) do h[#h + 1] = be32(s) end
  return table.concat(h) .. payload
end

-- flat Lua list of a tensor's values
local function vals(t)
  local buf, n = t:contiguous():read()
  local out = {}
  for i = 0, n - 1 do out[i + 1] = tonumber(buf[i]) end
  return out
end

local err_of = require('support.fixtures').err_of

-- uint8 images (N,C,H,W) with value v(n,c,h,w) in 1..255 (never 0, so padding shows)
local function pattern(n, c, h, w)
  local t = {}
  for a = 1, n do
    t[a] = {}
    for b = 1, c do
      t[a][b] = {}
      for y = 1, h do
        t[a][b][y] = {}
        for x = 1, w do t[a][b][y][x] = (a * 37 + b * 11 + y * 5 + x * 3) % 255 + 1 end
      end
    end
  end
  return lunet.tensor(t, { dtype = 'uint8' }), t
end

local function range_labels(n)
  local y = {}
  for i = 1, n do y[i] = i end
  return lunet.tensor(y, { dtype = 'int64' })
end

teardown(tmp.clean)

describe('data.read_idx', function()
  local payload = {}
  for i = 0, 2 * 3 * 4 - 1 do payload[#payload + 1] = string.char((i * 7) % 256) end
  payload = table.concat(payload)
  local bytes = idx_bytes(0x08, { 2, 3, 4 }, payload)

  it('reads a plain ubyte file: shape, dtype and every value', function()
    local t = data.read_idx(write(tmpname(), bytes))
    assert.same({ 2, 3, 4 }, t:size())
    assert.equal('uint8', t.dtype)
    local v = vals(t)
    for i = 1, 24 do assert.equal(((i - 1) * 7) % 256, v[i]) end
  end)

  it('reads the same file gzip-compressed', function()
    local t = data.read_idx(write_gz(tmpname('.gz'), bytes))
    assert.same({ 2, 3, 4 }, t:size())
    local v = vals(t)
    for i = 1, 24 do assert.equal(((i - 1) * 7) % 256, v[i]) end
  end)

  it('converts big-endian int32, int16, int8, float32 and float64 payloads', function()
    local i32 = data.read_idx(write(tmpname(), idx_bytes(0x0C, { 3 },
      be32(1) .. string.char(0xff, 0xff, 0xff, 0xfe) .. be32(70000))))
    assert.equal('int32', i32.dtype)
    assert.same({ 1, -2, 70000 }, vals(i32))
    local i16 = data.read_idx(write(tmpname(), idx_bytes(0x0B, { 2 }, string.char(0x01, 0x02, 0xff, 0xfd))))
    assert.same({ 258, -3 }, vals(i16))
    local i8 = data.read_idx(write(tmpname(), idx_bytes(0x09, { 2 }, string.char(0x05, 0xfb))))
    assert.same({ 5, -5 }, vals(i8))
    -- 1.5f = 0x3fc00000, -2.25 = 0xc0020000 00000000
    local f32 = data.read_idx(write(tmpname(), idx_bytes(0x0D, { 1, 1 }, string.char(0x3f, 0xc0, 0, 0))))
    assert.equal('float32', f32.dtype)
    assert.same({ 1.5 }, vals(f32))
    local f64 = data.read_idx(write(tmpname(), idx_bytes(0x0E, { 1 }, string.char(0xc0, 0x02, 0, 0, 0, 0, 0, 0))))
    assert.equal('float64', f64.dtype)
    assert.same({ -2.25 }, vals(f64))
  end)

  it('names the file and the problem for truncated, bad-magic, missing and overlong files', function()
    local p = write(tmpname(), bytes:sub(1, #bytes - 5))
    local e = err_of(data.read_idx, p)
    assert.matches('idx_read', e, 1, true)
    assert.matches(p, e, 1, true)
    assert.matches('truncated', e, 1, true)
    assert.matches('24 bytes', e, 1, true)

    local pg = write_gz(tmpname('.gz'), bytes:sub(1, #bytes - 5))
    e = err_of(data.read_idx, pg)
    assert.matches(pg, e, 1, true)
    assert.matches('truncated', e, 1, true)

    -- a gzip stream cut short (the compressed file itself truncated)
    local full = write_gz(tmpname('.gz'), idx_bytes(0x08, { 1000 }, string.rep('abcdefgh', 125)))
    local f = io.open(full, 'rb'); local gz = f:read('*a'); f:close()
    local cut = write(tmpname('.gz'), gz:sub(1, #gz - 12))
    e = err_of(data.read_idx, cut)
    assert.matches(cut, e, 1, true)

    -- a small gzip whose header promises 4 GiB: refused before allocating
    -- (deflate expands at most 1032:1), not after reserving the memory
    local bomb = write_gz(tmpname('.gz'), idx_bytes(0x08, { 4194304, 1024 }, string.rep('\0', 4096)))
    local peak0 = lunet.max_memory_allocated()
    e = err_of(data.read_idx, bomb)
    assert.matches(bomb, e, 1, true)
    assert.matches('4294967296 bytes of data (shape {4194304,1024}), more than a gzip file of', e, 1, true)
    assert.matches('of %d+ bytes can hold$', e)
    assert.is_true(lunet.max_memory_allocated() - peak0 < 2 ^ 20)

    local ph = write(tmpname(), bytes:sub(1, 9))
    e = err_of(data.read_idx, ph)
    assert.matches(ph, e, 1, true)
    assert.matches('truncated inside its header', e, 1, true)

    local pm = write(tmpname(), string.char(1, 2, 8, 3) .. bytes:sub(5))
    e = err_of(data.read_idx, pm)
    assert.matches(pm, e, 1, true)
    assert.matches('not an IDX file (bad magic 0x01020803', e, 1, true)

    local pt = write(tmpname(), idx_bytes(0x07, { 1 }, 'x'))
    assert.matches('bad magic', err_of(data.read_idx, pt), 1, true)

    local pl = write(tmpname(), bytes .. 'extra')
    e = err_of(data.read_idx, pl)
    assert.matches(pl, e, 1, true)
    assert.matches('longer than its header says', e, 1, true)

    e = err_of(data.read_idx, '/nonexistent/dir/file-idx3-ubyte')
    assert.matches("cannot open '/nonexistent/dir/file-idx3-ubyte'", e, 1, true)
  end)
end)

describe('Fashion-MNIST from /usr/share/datasets', function()
  -- the raw bytes of a gzip file, read by zlib alone
  local function raw(name, n)
    local f = Z.gzopen(FMNIST .. '/' .. name, 'rb')
    assert(f ~= nil, 'cannot open ' .. name)
    local buf = ffi.new('uint8_t[?]', n)
    assert.equal(n, Z.gzread(f, buf, n))
    Z.gzclose(f)
    return buf
  end

  it('reads train (60000x28x28) matching the raw file: labels 1-based, pixel sums', function()
    local ds = data.FashionMNIST { train = true }
    assert.equal(60000, #ds)
    assert.same({ 60000, 1, 28, 28 }, ds.x:size())
    assert.equal('uint8', ds.x.dtype)
    assert.equal('int64', ds.y.dtype)
    -- known first labels of the training set (0-based 9 0 0 3 0 2 7 2 5 5 0 9)
    assert.same({ 10, 1, 1, 4, 1, 3, 8, 3, 6, 6, 1, 10 }, vals(ds.y:narrow(1, 1, 12)))
    local lab = raw('train-labels-idx1-ubyte.gz', 8 + 60000)
    local img = raw('train-images-idx3-ubyte.gz', 16 + 60000 * 784)
    assert.equal(2049, ((lab[0] * 256 + lab[1]) * 256 + lab[2]) * 256 + lab[3])
    local y = ds.y:read()
    local xs = ds.x:read()
    for _, i in ipairs({ 1, 2, 777, 31415, 60000 }) do
      assert.equal(lab[8 + i - 1] + 1, tonumber(y[i - 1]))
      local sum_raw, sum = 0, 0
      for k = 0, 783 do
        sum_raw = sum_raw + img[16 + (i - 1) * 784 + k]
        sum = sum + xs[(i - 1) * 784 + k]
      end
      assert.equal(sum_raw, sum)
    end
    -- the same sums computed once with Python's gzip module
    local function psum(i)
      local s = 0
      for k = 0, 783 do s = s + xs[(i - 1) * 784 + k] end
      return s
    end
    assert.same({ 76247, 84598, 16684 }, { psum(1), psum(2), psum(60000) })
    -- a sample is float32 in [0,1]: pixel / 255
    local x1, y1 = ds:get(1)
    assert.same({ 1, 28, 28 }, x1:size())
    local v = vals(x1)
    for k = 1, 784, 37 do assert.near(img[16 + k - 1] / 255, v[k], 1e-6) end
    assert.equal(10, y1)
  end)

  it('reads the test split and rejects a root without the files', function()
    local ds = data.FashionMNIST { train = false }
    assert.equal(10000, #ds)
    assert.same({ 10, 3, 2, 2, 7, 2, 5, 7, 6, 8, 5, 6 }, vals(ds.y:narrow(1, 1, 12)))
    local e = err_of(function() return data.FashionMNIST { root = '/nonexistent' } end)
    assert.matches('FashionMNIST: cannot find train-images-idx3-ubyte.gz', e, 1, true)
    assert.matches('/nonexistent', e, 1, true)
  end)

  it('DataLoader over Fashion-MNIST: first batch in file order, scaled, labels 1..10', function()
    local ds = data.FashionMNIST {}
    local loader = data.DataLoader(ds, { batch_size = 100, workers = 2 })
    assert.equal(600, #loader)
    local it = loader:iter()
    local x, y = it()
    assert.same({ 100, 1, 28, 28 }, x:size())
    assert.equal('float32', x.dtype)
    assert.same(vals(ds.y:narrow(1, 1, 100)), vals(y))
    local ref = vals(ds.x:narrow(1, 1, 100))
    local got = vals(x)
    for k = 1, #ref, 97 do assert.near(ref[k] / 255, got[k], 1e-6) end
  end)
end)

describe('CIFAR-10 binary batches', function()
  -- record r: label (r % 10), pixels (r * 3 + k) % 256
  local function records(first, count)
    local parts = {}
    for r = first, first + count - 1 do
      local px = {}
      for k = 0, 3071 do px[k + 1] = string.char((r * 3 + k) % 256) end
      parts[#parts + 1] = string.char(r % 10) .. table.concat(px)
    end
    return table.concat(parts)
  end

  it('reads files written here (plain and gzip) into uint8 images and 1-based labels', function()
    local a = write(tmpname(), records(0, 3))
    local b = write_gz(tmpname('.gz'), records(3, 2))
    local x, y = data.read_cifar10 { a, b }
    assert.same({ 5, 3, 32, 32 }, x:size())
    assert.equal('uint8', x.dtype)
    assert.same({ 1, 2, 3, 4, 5 }, vals(y))
    local v = vals(x)
    for r = 0, 4 do
      for _, k in ipairs({ 0, 1, 1023, 1024, 3071 }) do assert.equal((r * 3 + k) % 256, v[r * 3072 + k + 1]) end
    end
  end)

  it('names the file for a partial record and for a label outside 0..9', function()
    local p = write(tmpname(), records(0, 2):sub(1, 3073 + 100))
    local e = err_of(data.read_cifar10, p)
    assert.matches(p, e, 1, true)
    assert.matches('3173 bytes, not a whole number of 3073-byte records', e, 1, true)
    local bad = records(0, 2)
    bad = bad:sub(1, 3073) .. string.char(42) .. bad:sub(3075)
    local q = write(tmpname(), bad)
    e = err_of(data.read_cifar10, q)
    assert.matches(q, e, 1, true)
    assert.matches('record 1 has label 42', e, 1, true)
  end)

  it('CIFAR10{root=...} finds the train and test batches', function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute('mkdir -p ' .. dir .. '/cifar-10-batches-bin'))
    for i = 1, 5 do write(dir .. '/cifar-10-batches-bin/data_batch_' .. i .. '.bin', records(i * 10, 2)) end
    write(dir .. '/cifar-10-batches-bin/test_batch.bin', records(100, 3))
    local train = data.CIFAR10 { root = dir }
    local test = data.CIFAR10 { root = dir, train = false }
    assert.equal(10, #train)
    assert.equal(3, #test)
    local x, y = train:get(3)       -- record 20: label 0 -> 1
    assert.same({ 3, 32, 32 }, x:size())
    assert.equal(1, y)
    assert.near(((20 * 3 + 5) % 256) / 255, vals(x)[6], 1e-6)
    assert.equal('airplane', train.classes[y])
    os.execute('rm -rf ' .. dir)
    local e = err_of(function() return data.CIFAR10 { root = dir } end)
    assert.matches('CIFAR10: cannot find data_batch_1.bin', e, 1, true)
  end)
end)

describe('DataLoader', function()
  local x8 = pattern(10, 3, 6, 5)
  local ds = data.TensorDataset(x8, range_labels(10))

  it('#loader counts batches, drop_last drops the short one', function()
    local l = data.DataLoader(ds, { batch_size = 4 })
    assert.equal(3, #l)
    local sizes = {}
    for x, y in l:iter() do sizes[#sizes + 1] = x:size(1) .. '/' .. y:size(1) end
    assert.same({ '4/4', '4/4', '2/2' }, sizes)
    local ld = data.DataLoader(ds, { batch_size = 4, drop_last = true, workers = 2 })
    assert.equal(2, #ld)
    local n = 0
    for x in ld:iter() do n = n + 1; assert.equal(4, x:size(1)) end
    assert.equal(2, n)
    assert.equal(1, #data.DataLoader(ds, { batch_size = 10 }))
    assert.equal(0, #data.DataLoader(ds, { batch_size = 11, drop_last = true }))
    assert.matches('DataLoader: batch_size must be an integer >= 1',
      err_of(data.DataLoader, ds, { batch_size = 0 }), 1, true)
  end)

  it('a batch_size past the samples: one batch of them all (none with drop_last), slots of that many rows', function()
    -- (the slots were batch_size rows each: 2^40 failed out of memory, 2^22 took 3.1 GiB for 10 samples)
    for _, workers in ipairs { 0, 2 } do
      collectgarbage(); collectgarbage()
      local before = lunet.memory_allocated('cpu')
      local l = data.DataLoader(ds, { batch_size = 2 ^ 22, workers = workers })
      assert.is_true(lunet.memory_allocated('cpu') - before < 2 ^ 20)
      assert.equal(1, #l)
      local got = {}
      for x, y in l:iter() do got[#got + 1] = { x:size(1), y:size(1), x:sum():item() } end
      assert.equal(1, #got)
      assert.same({ 10, 10 }, { got[1][1], got[1][2] })
      assert.near(data.DataLoader(ds, { batch_size = 10 }):iter()():sum():item(), got[1][3], 1e-3)
      assert.equal(1, #data.DataLoader(ds, { batch_size = 2 ^ 40, workers = workers }))
      local ld = data.DataLoader(ds, { batch_size = 2 ^ 40, drop_last = true, workers = workers })
      assert.equal(0, #ld)
      for _ in ld:iter() do error('drop_last: no batch expected') end
      l:close(); ld:close()
    end
  end)

  it("rejects a prefetch past 1024 batches and a dataset whose length is not an integer >= 0", function()
    -- (prefetch = 1e9 took all of the machine's memory: the process was killed)
    local ok, err = pcall(data.DataLoader, ds, { batch_size = 2, workers = 2, prefetch = 1e9 })
    assert.is_false(ok)
    assert.matches('DataLoader: prefetch must be in 0..1024, got 1000000000', err, 1, true)
    assert.equal(1, #data.DataLoader(ds, { batch_size = 10, workers = 2, prefetch = 1024 }))
    for _, n in ipairs { -3, 2.5, 0 / 0 } do
      local Odd = data.Dataset:extend('Odd')
      function Odd:__len() return n end
      function Odd:get() return lunet.ones(2), 1 end
      ok, err = pcall(data.DataLoader, Odd(), { batch_size = 2 })
      assert.is_false(ok)
      assert.matches('dataset: its length must be an integer >= 0, got ' .. tostring(n), err, 1, true)
    end
  end)

  it('gathers rows in order without shuffle: uint8 -> float32 / 255, labels as stored', function()
    local l = data.DataLoader(ds, { batch_size = 4 })
    local all = vals(x8)
    local seen = 0
    for x, y in l:iter() do
      assert.equal('float32', x.dtype)
      assert.equal('int64', y.dtype)
      local xv, yv = vals(x), vals(y)
      for k = 1, #yv do
        assert.equal(seen + k, yv[k])
        for j = 1, 90, 7 do assert.near(all[(seen + k - 1) * 90 + j] / 255, xv[(k - 1) * 90 + j], 1e-6) end
      end
      seen = seen + #yv
    end
    assert.equal(10, seen)
  end)

  it('shuffles reproducibly: a permutation per epoch, keyed by seed and epoch', function()
    local big = data.TensorDataset(lunet.zeros(50, 1), range_labels(50))
    local function epochs(seed, n)
      local l = data.DataLoader(big, { batch_size = 7, shuffle = true, seed = seed })
      local out = {}
      for e = 1, n do
        local order = {}
        for _, y in l:iter() do for _, v in ipairs(vals(y)) do order[#order + 1] = v end end
        out[e] = order
      end
      return out
    end
    local a, b, c = epochs(3, 2), epochs(3, 2), epochs(4, 1)
    assert.same(a, b)
    assert.are_not.same(a[1], a[2])
    assert.are_not.same(a[1], c[1])
    for _, order in ipairs({ a[1], a[2], c[1] }) do
      local sorted = { unpack(order) }
      table.sort(sorted)
      for i = 1, 50 do assert.equal(i, sorted[i]) end
    end
    local identity = true
    for i = 1, 50 do if a[1][i] ~= i then identity = false end end
    assert.is_false(identity)
  end)

  it('gives the same batches with workers = 0 and workers = 2 (shuffle, random crop and flip)', function()
    local tf = data.transforms.Compose {
      data.transforms.RandomCrop(4, { padding = 2 }), data.transforms.RandomHorizontalFlip(),
      data.transforms.Normalize({ 0.5, 0.4, 0.3 }, { 0.2, 0.25, 0.3 }) }
    local opts = function(w) return { batch_size = 3, shuffle = true, seed = 11, workers = w, transform = tf } end
    local l0, l2 = data.DataLoader(ds, opts(0)), data.DataLoader(ds, opts(2))
    local batches = 0
    for _ = 1, 3 do
      local i0, i2 = l0:iter(), l2:iter()
      while true do
        local x0, y0 = i0()
        local x2, y2 = i2()
        if not x0 then assert.is_nil(x2); break end
        assert.same({ x0:size(1), 3, 4, 4 }, x2:size())
        assert.same(vals(y0), vals(y2))
        assert.same(vals(x0), vals(x2))
        batches = batches + 1
      end
    end
    assert.equal(12, batches)
  end)

  it('Normalize gives (x/255 - mean[c]) / std[c]', function()
    local T = data.transforms
    local l = data.DataLoader(ds, { batch_size = 10, transform = T.Normalize({ 0.1, 0.5, 0.9 }, { 0.5, 0.25, 2 }) })
    local x = l:iter()()
    local mean, std = { 0.1, 0.5, 0.9 }, { 0.5, 0.25, 2 }
    local raw, got = vals(x8), vals(x)
    for i = 1, #raw do
      local c = math.floor((i - 1) / 30) % 3 + 1
      assert.near((raw[i] / 255 - mean[c]) / std[c], got[i], 1e-5)
    end
    -- one value for all channels, and called directly on a (C,H,W) image
    local one = T.Normalize(0.5, 0.5)(x8:select(1, 2))
    local r2 = vals(x8:select(1, 2))
    local o2 = vals(one)
    for i = 1, #r2 do assert.near((r2[i] / 255 - 0.5) / 0.5, o2[i], 1e-5) end
    assert.matches('Normalize: std%[2%] is zero', err_of(T.Normalize, { 1, 2 }, { 1, 0 }))
  end)

  it('RandomHorizontalFlip mirrors each row exactly (p = 1), never (p = 0), sometimes (p = 0.5)', function()
    local T = data.transforms
    local raw = vals(x8)
    local function run(p)
      local l = data.DataLoader(ds, { batch_size = 10, transform = T.RandomHorizontalFlip(p), seed = 2 })
      return vals(l:iter()())
    end
    local function flipped(out, n)   -- sample n (1-based) mirrored?
      local same, mirror = true, true
      for c = 0, 2 do for yy = 0, 5 do for xx = 0, 4 do
        local o = out[(n - 1) * 90 + c * 30 + yy * 5 + xx + 1]
        if math.abs(o - raw[(n - 1) * 90 + c * 30 + yy * 5 + xx + 1] / 255) > 1e-6 then same = false end
        if math.abs(o - raw[(n - 1) * 90 + c * 30 + yy * 5 + (4 - xx) + 1] / 255) > 1e-6 then mirror = false end
      end end end
      assert.is_true(same or mirror, 'sample ' .. n .. ' is neither the image nor its mirror')
      return mirror and not same
    end
    local all, none, some = run(1), run(0), run(0.5)
    local nflip = 0
    for n = 1, 10 do
      assert.is_true(flipped(all, n))
      assert.is_false(flipped(none, n))
      if flipped(some, n) then nflip = nflip + 1 end
    end
    assert.is_true(nflip > 0 and nflip < 10, 'p = 0.5 flipped ' .. nflip .. ' of 10')
  end)

  it('RandomCrop shifts a window over the zero-padded image (padding -> -mean/std after Normalize)', function()
    local T = data.transforms
    local raw = vals(x8)
    local l = data.DataLoader(ds, { batch_size = 10, seed = 5,
      transform = T.Compose { T.RandomCrop({ 4, 3 }, { padding = 2 }), T.Normalize(0.2, 0.5) } })
    local x = l:iter()()
    assert.same({ 10, 3, 4, 3 }, x:size())
    local out = vals(x)
    local offsets, padded = {}, 0
    for n = 1, 10 do
      local found
      for oy = -2, 6 + 2 - 4 do
        for ox = -2, 5 + 2 - 3 do
          local ok = true
          for c = 0, 2 do for i = 0, 3 do for j = 0, 2 do
            local sy, sx = oy + i, ox + j
            local v = 0
            if sy >= 0 and sy < 6 and sx >= 0 and sx < 5 then v = raw[(n - 1) * 90 + c * 30 + sy * 5 + sx + 1] end
            if math.abs((v / 255 - 0.2) / 0.5 - out[(n - 1) * 36 + c * 12 + i * 3 + j + 1]) > 1e-5 then ok = false end
          end end end
          if ok then found = oy .. ',' .. ox; if oy < 0 or ox < 0 or oy > 2 or ox > 2 then padded = padded + 1 end end
        end
      end
      assert.is_not_nil(found, 'sample ' .. n .. ' is no window of the padded image')
      offsets[found] = true
    end
    local distinct = 0
    for _ in pairs(offsets) do distinct = distinct + 1 end
    assert.is_true(distinct > 2, 'crops should move')
    assert.is_true(padded > 0, 'some crops should reach into the padding')
    -- Normalize before the crop: padding stays 0
    local l2 = data.DataLoader(ds, { batch_size = 10, seed = 5,
      transform = T.Compose { T.Normalize(0.2, 0.5), T.RandomCrop({ 4, 3 }, { padding = 2 }) } })
    local z = 0
    for _, v in ipairs(vals(l2:iter()())) do if v == 0 then z = z + 1 end end
    assert.is_true(z > 0)
    -- crops narrower than the padding (every offset, flipped or not) stay in bounds
    local tiny = data.DataLoader(ds, { batch_size = 10, seed = 9,
      transform = T.Compose { T.RandomCrop(1, { padding = 3 }), T.RandomHorizontalFlip() } })
    for _ = 1, 3 do
      local tv = vals(tiny:iter()())
      for n = 1, 10 do
        for c = 0, 2 do
          local v, ok = tv[(n - 1) * 3 + c + 1], false
          if v == 0 then ok = true end
          for k = 1, 30 do if math.abs(raw[(n - 1) * 90 + c * 30 + k] / 255 - v) < 1e-6 then ok = true end end
          assert.is_true(ok)
        end
      end
    end
    assert.matches('crop 9x3 does not fit',
      err_of(data.DataLoader, ds, { transform = T.RandomCrop({ 9, 3 }, { padding = 1 }) }), 1, true)
  end)

  it('CenterCrop takes the middle window', function()
    local T = data.transforms
    local x = T.CenterCrop({ 2, 3 })(x8:select(1, 1))
    assert.same({ 3, 2, 3 }, x:size())
    local raw, out = vals(x8), vals(x)
    for c = 0, 2 do for i = 0, 1 do for j = 0, 2 do
      assert.near(raw[c * 30 + (i + 2) * 5 + (j + 1) + 1] / 255, out[c * 6 + i * 3 + j + 1], 1e-6)
    end end end
  end)

  it('shards each epoch over num_replicas ranks (padded by wrapping, like DistributedSampler)', function()
    local big = data.TensorDataset(lunet.zeros(11, 1), range_labels(11))
    local function epoch(rank, e, workers)
      local l = data.DataLoader(big, { batch_size = 2, shuffle = true, seed = 4, num_replicas = 3, rank = rank,
        workers = workers })
      l:set_epoch(e)
      local out = {}
      for _, y in l:iter() do for _, v in ipairs(vals(y)) do out[#out + 1] = v end end
      return out, #l
    end
    local full = data.DataLoader(big, { batch_size = 11, shuffle = true, seed = 4 })
    for e = 1, 2 do
      full:set_epoch(e)
      local order = vals(select(2, full:iter()()))
      for r = 0, 2 do
        local got, nb = epoch(r, e, r)
        assert.equal(2, nb)
        assert.equal(4, #got)           -- ceil(11 / 3)
        for k = 1, 4 do assert.equal(order[(r + (k - 1) * 3) % 11 + 1], got[k]) end
      end
    end
    assert.matches('rank 3 must be below num_replicas 3',
      err_of(data.DataLoader, big, { num_replicas = 3, rank = 3 }), 1, true)
  end)

  it('allocates nothing per batch in the steady state (C path)', function()
    local T = data.transforms
    local syn = data.Synthetic { n = 300, shape = { 3, 8, 8 } }
    local l = data.DataLoader(syn, { batch_size = 32, shuffle = true, workers = 2,
      transform = { T.RandomCrop(8, { padding = 2 }), T.Normalize(0.5, 0.2) } })   -- a list composes
    for _ in l:iter() do end
    collectgarbage(); collectgarbage()
    lunet.synchronize()
    local before = lunet.memory_allocated()
    local n = 0
    for _ = 1, 3 do for x in l:iter() do n = n + x:size(1) end end
    assert.equal(900, n)
    assert.equal(before, lunet.memory_allocated())
  end)

  it('resumes from state_dict mid-epoch with the same remaining batches', function()
    local tf = data.transforms.Compose { data.transforms.RandomCrop(5, { padding = 1 }),
      data.transforms.RandomHorizontalFlip() }
    local function opts(seed) return { batch_size = 3, shuffle = true, seed = seed, workers = 2, transform = tf } end
    local ref = {}
    local a = data.DataLoader(ds, opts(21))
    for e = 1, 2 do for x, y in a:iter() do ref[#ref + 1] = { vals(x), vals(y) } end end
    assert.equal(8, #ref)

    local b = data.DataLoader(ds, opts(21))
    local it = b:iter()
    it(); it()
    local st = b:state_dict()
    assert.same({ 1, 2, 21 }, { st.epoch, st.position, st.seed })

    local c = data.DataLoader(ds, opts(999))   -- the state's seed wins
    c:load_state_dict(st)
    local got = {}
    for e = 1, 2 do for x, y in c:iter() do got[#got + 1] = { vals(x), vals(y) } end end
    assert.equal(6, #got)
    for k = 1, 6 do assert.same(ref[k + 2], got[k]) end
    assert.same({ 2, 4 }, { c:state_dict().epoch, c:state_dict().position })
    assert.matches('position 9 is past the 4 batches',
      err_of(c.load_state_dict, c, { epoch = 1, position = 9, seed = 1 }), 1, true)
  end)

  it('keeps a batch intact until the next-but-one batch; copy = true gives fresh tensors', function()
    -- one worker, one batch ahead: a ring of 3 slots, batch 4 reuses batch 1's
    local l = data.DataLoader(ds, { batch_size = 2, workers = 1, prefetch = 1 })
    local it = l:iter()
    local x1 = it()
    local v1 = vals(x1)
    local x2 = it()
    os.execute('sleep 0.05')           -- the worker fills batch 3 meanwhile
    assert.same(v1, vals(x1))          -- batch 1 intact while batch 2 is in use
    assert.are_not.same(v1, vals(x2))
    it()
    local x4 = it()
    assert.same(vals(x4), vals(x1))    -- x1 was a view of the slot batch 4 now holds
    assert.are_not.same(v1, vals(x1))
    local lc = data.DataLoader(ds, { batch_size = 2, copy = true })
    local kept = {}
    for x in lc:iter() do kept[#kept + 1] = x end
    assert.equal(5, #kept)
    local raw, first = vals(x8:narrow(1, 1, 2)), vals(kept[1])
    for i = 1, #raw do assert.near(raw[i] / 255, first[i], 1e-6) end
  end)

  it('refuses a backward through a batch the loader refilled since (copy = true: the gradients of every batch)', function()
    local nn = lunet.nn
    local X, Y = lunet.randn(12, 4), lunet.tensor({ 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3 }):long()
    local tds = data.TensorDataset(X, Y)
    local function summed_loss(opts)
      lunet.manual_seed(7)
      local m = nn.Linear(4, 3)
      local crit = nn.CrossEntropyLoss()
      local total
      for x, y in data.DataLoader(tds, opts):iter() do   -- (3 batches kept in one graph)
        local l = crit(m(x), y)
        total = total and total + l or l
      end
      return m, total
    end
    -- the views: batch 1's buffer held batch 3 at the backward (the gradient was batch 3's twice, silently)
    local _, total = summed_loss({ batch_size = 4 })
    local ok, err = pcall(function() total:backward() end)
    assert.is_false(ok)
    assert.matches('backward: a tensor that linear saved for its gradient ({4, 4} float32) was changed in place', err, 1, true)
    assert.matches('a DataLoader refills a batch two batches later: clone() it, or pass copy = true', err, 1, true)
    -- copies: the gradient of the whole set at once
    local m, copied = summed_loss({ batch_size = 4, copy = true })
    copied:backward()
    lunet.manual_seed(7)
    local ref = nn.Linear(4, 3)
    local whole = nn.CrossEntropyLoss({ reduction = 'sum' })(ref(X), Y) / 4
    whole:backward()
    assert.is_true((m.weight.grad - ref.weight.grad):abs():max():item() < 1e-5)
  end)
end)

describe('DataLoader with queued devices (LUNET_CPU_DEVICES=2)', function()
  it('does not refill a slot that queued work still reads', function()
    local script = tmpname('.lua')
    write(script, [[
      local lunet = require 'lunet'
      local data = lunet.data
      local n = 48
      local x = lunet.arange(n * 6):fmod(251):view(n, 1, 2, 3):byte()
      local ds = data.TensorDataset(x, lunet.arange(1, n + 1))
      local w = lunet.randn(300, 300)
      for _, workers in ipairs({0, 2}) do
        for _, dev in ipairs({'cpu:0', 'cpu:1'}) do
          local kept, labels = {}, {}
          for xb, yb in data.DataLoader(ds, {batch_size = 4, workers = workers}):iter() do
            for _ = 1, 3 do w = w:matmul(w):mul_(1e-3) end      -- keep cpu:0 busy
            kept[#kept + 1] = (xb * 1):to(dev)                  -- queued behind it
            labels[#labels + 1] = yb:clone():to(dev)
          end
          for k, t in ipairs(kept) do
            local v = t:to('cpu:0'):read()
            local l = labels[k]:to('cpu:0'):read()
            for i = 0, 23 do
              local want = ((k - 1) * 24 + i) % 251 / 255
              assert(math.abs(v[i] - want) < 1e-6, ('batch %d value %d: %g, expected %g (workers %d, %s)')
                :format(k, i, v[i], want, workers, dev))
            end
            assert(tonumber(l[0]) == (k - 1) * 4 + 1, ('labels of batch %d: %s (workers %d, %s)'):format(k, tostring(l[0]), workers, dev))
          end
        end
      end
      print('ok')
    ]])
    local lib = os.getenv('LUNET_LIB')
    local pipe = io.popen(('LUNET_CPU_DEVICES=2 %s luajit %s 2>&1'):format(
      lib and ("LUNET_LIB='" .. lib .. "'") or '', script))
    local out = pipe:read('*a')
    pipe:close()
    assert(out:match('ok\n$'), out)
  end)
end)

describe('datasets', function()
  it('Subset and random_split: sizes, disjoint cover, loader over a subset', function()
    local x8 = pattern(12, 1, 2, 2)
    local ds = data.TensorDataset(x8, range_labels(12))
    local sub = data.Subset(ds, { 12, 3, 5 })
    assert.equal(3, #sub)
    local _, y = sub:get(1)
    assert.equal(12, y)
    local parts = data.random_split(ds, { 8, 4 }, 7)
    assert.equal(8, #parts[1])
    assert.equal(4, #parts[2])
    local seen = {}
    for _, p in ipairs(parts) do
      for i = 1, #p do
        local _, yy = p:get(i)
        assert.is_nil(seen[yy])
        seen[yy] = true
      end
    end
    for i = 1, 12 do assert.is_true(seen[i]) end
    assert.same({ 9, 3 }, { #data.random_split(ds, { 0.75, 0.25 }, 1)[1], #data.random_split(ds, { 0.75, 0.25 }, 1)[2] })
    -- the C loader follows the (nested) subset's rows
    local nested = data.Subset(parts[1], { 2, 1 })
    local _, e1 = parts[1]:get(2)
    local _, e2 = parts[1]:get(1)
    local xb, yb = data.DataLoader(nested, { batch_size = 2, workers = 1 }):iter()()
    assert.same({ e1, e2 }, vals(yb))
    assert.near(vals(x8:select(1, e1))[1] / 255, vals(xb)[1], 1e-6)
    assert.matches('random_split: lengths sum to 11', err_of(data.random_split, ds, { 8, 3 }), 1, true)
    assert.matches('Subset: index 13 is out of range 1..12', err_of(data.Subset, ds, { 13 }), 1, true)
  end)

  it('a Lua-defined dataset goes through ds:get and is stacked; a sample transform runs per sample', function()
    local Squares = data.Dataset:extend('Squares')
    function Squares:__init(n) self.n = n end
    function Squares:__len() return self.n end
    function Squares:get(i) return lunet.tensor { i, -i }, i * i end
    local sq = Squares(5)
    assert.equal(5, #sq)
    assert.same({ 3, -3 }, sq[3]:totable())       -- ds[i] is the input of ds:get(i)
    assert.equal(9, select(2, sq:get(3)))
    local l = data.DataLoader(sq, { batch_size = 2, transform = function(x) return x * 10 end })
    assert.equal(3, #l)
    local xs, ys = {}, {}
    for x, y in l:iter() do
      assert.equal('int64', y.dtype)
      for _, v in ipairs(vals(x)) do xs[#xs + 1] = v end
      for _, v in ipairs(vals(y)) do ys[#ys + 1] = v end
    end
    assert.same({ 10, -10, 20, -20, 30, -30, 40, -40, 50, -50 }, xs)
    assert.same({ 1, 4, 9, 16, 25 }, ys)
    -- shuffled Lua path: a permutation of the samples
    local sh = {}
    for _, y in data.DataLoader(sq, { batch_size = 5, shuffle = true, seed = 1 }):iter() do sh = vals(y) end
    table.sort(sh)
    assert.same({ 1, 4, 9, 16, 25 }, sh)
    -- a Subset of a Lua dataset
    local _, ysub = data.DataLoader(data.Subset(sq, { 4, 2 }), { batch_size = 2 }):iter()()
    assert.same({ 16, 4 }, vals(ysub))
    -- C transforms on the stacked float images of a Lua dataset
    local Imgs = data.Dataset:extend('Imgs')
    function Imgs:__len() return 3 end
    function Imgs:get(i) return lunet.full({ 2, 1, 3 }, i / 10) end
    local xb = data.DataLoader(Imgs(), { batch_size = 3,
      transform = data.transforms.Compose { data.transforms.Normalize({ 0.1, 0.2 }, { 0.5, 2 }),
        data.transforms.RandomHorizontalFlip(1) } }):iter()()
    assert.same({ 3, 2, 1, 3 }, xb:size())
    local got = vals(xb)
    for n = 1, 3 do
      for c = 1, 2 do
        for j = 1, 3 do
          assert.near((n / 10 - ({ 0.1, 0.2 })[c]) / ({ 0.5, 2 })[c], got[(n - 1) * 6 + (c - 1) * 3 + j], 1e-6)
        end
      end
    end
  end)

  it('TensorDataset checks its tensors and indices; Synthetic is a function of its seed', function()
    assert.matches('TensorDataset: x has 3 samples but y has 2',
      err_of(data.TensorDataset, lunet.zeros(3, 2), lunet.zeros(2)), 1, true)
    local td = data.TensorDataset(lunet.tensor { { 1, 2 }, { 3, 4 } }, lunet.tensor { 5, 6 })
    local x, y = td:get(2)
    assert.same({ 3, 4 }, x:totable())
    assert.equal(6, y)
    assert.matches('TensorDataset:get: index 3 out of range 1..2', err_of(td.get, td, 3), 1, true)
    -- raw (non-image) rows keep their dtype through the C loader
    local xb, yb = data.DataLoader(td, { batch_size = 2 }):iter()()
    assert.same({ { 1, 2 }, { 3, 4 } }, xb:totable())
    assert.same({ 5, 6 }, yb:totable())

    local s1 = data.Synthetic { n = 20, shape = { 3, 8, 8 }, classes = 4, seed = 3 }
    local s2 = data.Synthetic { n = 20, shape = { 3, 8, 8 }, classes = 4, seed = 3 }
    local s3 = data.Synthetic { n = 20, shape = { 3, 8, 8 }, classes = 4, seed = 4 }
    assert.equal(20, #s1)
    assert.same(vals(s1.x), vals(s2.x))
    assert.same(vals(s1.y), vals(s2.y))
    assert.are_not.same(vals(s1.x), vals(s3.x))
    local counts = {}
    for _, v in ipairs(vals(s1.y)) do
      assert.is_true(v >= 1 and v <= 4)
      counts[v] = true
    end
    assert.is_true(counts[1] and counts[4] and true)
    local bx, by = data.DataLoader(s1, { batch_size = 8 }):iter()()
    assert.same({ 8, 3, 8, 8 }, bx:size())
    assert.same({ 8 }, by:size())
  end)
end)
