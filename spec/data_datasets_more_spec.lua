-- lunet.data.MNIST / KMNIST / EMNIST and CIFAR100 on tiny files written here
-- in torchvision's layouts (root/<Name>/raw/<IDX files>; the CIFAR-100 binary
-- version's cifar-100-binary/{train,test}.bin), and their named errors.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local data = lunet.data

local function write(path, bytes)
  local f = assert(io.open(path, 'wb'))
  f:write(bytes)
  f:close()
  return path
end

local function be32(v)
  return string.char(math.floor(v / 2 ^ 24) % 256, math.floor(v / 2 ^ 16) % 256, math.floor(v / 256) % 256, v % 256)
end

-- n images of h x w (pixel k of image i: (i * 7 + k) % 256) and labels
local function idx_images(n, h, w)
  local px = {}
  for i = 0, n - 1 do for k = 0, h * w - 1 do px[#px + 1] = string.char((i * 7 + k) % 256) end end
  return string.char(0, 0, 8, 3) .. be32(n) .. be32(h) .. be32(w) .. table.concat(px)
end
local function idx_labels(labels) return string.char(0, 0, 8, 1) .. be32(#labels) .. string.char(unpack(labels)) end

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute('mkdir -p ' .. d))
  return d
end

-- root/<name>/raw with the train and test files of prefix (train, test)
local function idx_tree(name, train_prefix, test_prefix, train_labels, test_labels)
  local root = tmpdir()
  local raw = root .. '/' .. name .. '/raw/'
  assert(os.execute('mkdir -p ' .. raw))
  write(raw .. train_prefix .. '-images-idx3-ubyte', idx_images(#train_labels, 28, 28))
  write(raw .. train_prefix .. '-labels-idx1-ubyte', idx_labels(train_labels))
  write(raw .. test_prefix .. '-images-idx3-ubyte', idx_images(#test_labels, 28, 28))
  write(raw .. test_prefix .. '-labels-idx1-ubyte', idx_labels(test_labels))
  return root
end

describe('MNIST and KMNIST', function()
  it("find torchvision's root/<Name>/raw layout; labels + 1 index classes", function()
    for _, name in ipairs({ 'MNIST', 'KMNIST' }) do
      local root = idx_tree(name, 'train', 't10k', { 3, 0, 9 }, { 5, 1 })
      local train, test = data[name](root), data[name] { root = root, train = false }
      assert.are.equal(3, #train)
      assert.are.equal(2, #test)
      assert.are.same({ 4, 1, 10 }, train.y:totable())
      assert.are.same({ 6, 2 }, test.y:totable())
      local x, y = train:get(2)
      assert.are.same({ 1, 28, 28 }, x:size())
      assert.are.equal('float32', x.dtype)
      assert.is_true(math.abs(x[1][1][2]:item() - 8 / 255) < 1e-6)   -- (image 1, pixel 1: 7 + 1)
      assert.are.equal(name == 'MNIST' and '0' or 'o', train.classes[y])
      assert.matches(name .. '%(train, 3 samples', tostring(train))
      os.execute('rm -rf ' .. root)
    end
  end)

  it('names the missing files and where they go', function()
    local e = fx.err_of(data.KMNIST, '/nonexistent')
    assert.matches('KMNIST: cannot find train%-images%-idx3%-ubyte%.gz .* under /nonexistent or /nonexistent/KMNIST/raw', e)
    assert.matches('KMNIST: lunet does not download datasets .*codh%.rois%.ac%.jp', fx.err_of(data.KMNIST, { download = true }))
  end)
end)

describe('EMNIST', function()
  it('reads a split by its file names; classes are torchvision 0.14s', function()
    local root = idx_tree('EMNIST', 'emnist-letters-train', 'emnist-letters-test', { 1, 26, 3 }, { 2 })
    local ds = data.EMNIST(root, 'letters')
    assert.are.equal(3, #ds)
    assert.are.same({ 2, 27, 4 }, ds.y:totable())
    assert.are.equal('a', ds.classes[ds.y[1]:item()])
    assert.are.equal('z', ds.classes[ds.y[2]:item()])
    assert.are.equal(27, #ds.classes)
    assert.are.equal(1, #data.EMNIST { root = root, split = 'letters', train = false })
    assert.matches('EMNIST%(letters, train, 3 samples', tostring(ds))
    os.execute('rm -rf ' .. root)
  end)

  it('the class lists of every split equal torchvision 0.14s', function()
    local C = require('lunet.data.EMNIST').CLASSES
    assert.are.equal(62, #C.byclass)
    assert.are.equal('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', table.concat(C.byclass))
    assert.are.equal('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabdefghnqrt', table.concat(C.bymerge))
    assert.are.same(C.bymerge, C.balanced)
    assert.are.equal('0123456789', table.concat(C.digits))
    assert.are.same(C.digits, C.mnist)
  end)

  it('split is required and checked; missing files are named', function()
    assert.matches('EMNIST: split is required', fx.err_of(data.EMNIST, '/nonexistent'))
    assert.matches("EMNIST: split must be 'byclass', .* or 'mnist', got 'letter'", fx.err_of(data.EMNIST, '/x', 'letter'))
    assert.matches('EMNIST: cannot find emnist%-digits%-test%-images%-idx3%-ubyte',
      fx.err_of(data.EMNIST, '/nonexistent', 'digits', false))
  end)
end)

describe('CIFAR100', function()
  -- record r: coarse r % 20, fine (r * 3) % 100, pixels (r + k) % 256
  local function records(first, count)
    local parts = {}
    for r = first, first + count - 1 do
      local px = {}
      for k = 0, 3071 do px[k + 1] = string.char((r + k) % 256) end
      parts[#parts + 1] = string.char(r % 20, (r * 3) % 100) .. table.concat(px)
    end
    return table.concat(parts)
  end

  it('reads the binary version with fine labels, coarse by label_mode', function()
    local root = tmpdir()
    assert(os.execute('mkdir -p ' .. root .. '/cifar-100-binary'))
    write(root .. '/cifar-100-binary/train.bin', records(30, 4))
    write(root .. '/cifar-100-binary/test.bin', records(0, 2))
    local ds = data.CIFAR100(root)
    assert.are.equal(4, #ds)
    assert.are.same({ 91, 94, 97, 100 }, ds.y:totable())   -- (fine 90, 93, 96, 99, + 1)
    assert.are.same({ 11, 12, 13, 14 }, ds.coarse_labels:totable())
    assert.are.equal(100, #ds.classes)
    assert.are.equal('wolf', ds.classes[98])
    local x = ds:get(1)
    assert.are.same({ 3, 32, 32 }, x:size())
    assert.is_true(math.abs(x[2][1][1]:item() - ((30 + 1024) % 256) / 255) < 1e-6)
    local c = data.CIFAR100 { root = root, train = false, label_mode = 'coarse' }
    assert.are.same({ 1, 2 }, c.y:totable())
    assert.are.same({ 1, 4 }, c.fine_labels:totable())
    assert.are.equal(20, #c.classes)
    assert.are.equal('aquatic_mammals', c.classes[1])
    assert.matches('CIFAR100%(test, coarse labels, 2 samples', tostring(c))
    local imgs, fine, coarse = data.read_cifar100(root .. '/cifar-100-binary/test.bin')
    assert.are.same({ 2, 3, 32, 32 }, imgs:size())
    assert.are.same({ 1, 4 }, fine:totable())
    assert.are.same({ 1, 2 }, coarse:totable())
    os.execute('rm -rf ' .. root)
  end)

  it('names bad files, options and missing files', function()
    local root = tmpdir()
    write(root .. '/train.bin', records(0, 1):sub(1, 3000))
    local e = fx.err_of(data.CIFAR100, root)
    assert.matches('3000 bytes, not a whole number of 3074%-byte records', e)
    local bad = records(0, 2)
    write(root .. '/train.bin', bad:sub(1, 3074 + 1) .. string.char(100) .. bad:sub(3074 + 3))
    assert.matches('record 1 has fine label 100, expected 0..99', fx.err_of(data.CIFAR100, root))
    write(root .. '/train.bin', string.char(20) .. bad:sub(2))
    assert.matches('record 0 has coarse label 20, expected 0..19', fx.err_of(data.CIFAR100, root))
    os.execute('rm -rf ' .. root)
    assert.matches("CIFAR100: label_mode must be 'fine' or 'coarse', got 'super'",
      fx.err_of(data.CIFAR100, { root = root, label_mode = 'super' }))
    assert.matches('CIFAR100: cannot find test%.bin under .*cifar%-100%-binary', fx.err_of(data.CIFAR100, root, false))
  end)
end)
