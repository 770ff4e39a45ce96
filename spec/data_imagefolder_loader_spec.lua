-- ImageFolder in the DataLoader's C workers (the files source): the same
-- batches as the Lua path (a Lua loader function forces it) at 0, 1 and 2
-- workers, images of different sizes, Subsets and batch samplers, and a
-- corrupt or missing file as a named error from that batch's step.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local data = lunet.data
local T = data.transforms

local dir = debug.getinfo(1, 'S').source:match('^@(.*/)') or 'spec/'
local images = dir .. 'fixtures/images/'

local function slurp(p)
  local f = assert(io.open(p, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end

-- root/<rel> = the bytes given, under a new temporary folder
local function tree(files)
  local root = os.tmpname()
  os.remove(root)
  for rel, bytes in pairs(files) do
    assert(os.execute(('mkdir -p %q'):format((root .. '/' .. rel):match('^(.*)/'))) == 0)
    local f = assert(io.open(root .. '/' .. rel, 'wb'))
    f:write(bytes)
    f:close()
  end
  return root
end

local function lua_loader(p) return data.read_image(p, { mode = 'RGB' }) end

-- every batch of one epoch, cloned
local function epoch(l)
  local out = {}
  for x, y in l:iter() do out[#out + 1] = { x:clone(), y:clone() } end
  return out
end

local function same_batches(a, b)
  assert.are.equal(#a, #b)
  for k = 1, #a do
    assert.are.same(a[k][1]:size(), b[k][1]:size())
    assert.are.equal(a[k][1].dtype, b[k][1].dtype)
    assert.are.equal(0, fx.maxdiff(a[k][1], b[k][1]))
    assert.are.equal(b[k][2].dtype, a[k][2].dtype)
    assert.are.equal(0, fx.maxdiff(a[k][2], b[k][2]))
  end
end

describe('DataLoader over ImageFolder in C', function()
  local root
  setup(function()
    local files = {}
    for k, name in ipairs({ 'rgb.png', 'baseline.jpg', 'tall.png', 'gray.jpg', 'gray8.png', 'wide.JPEG',
      'rgba.png', 'progressive.jpg', 'palette8_trns.png', 'baseline444.jpg' }) do
      local ext = name:match('%.%w+$')
      files[('%s/%02d%s'):format(({ 'a', 'b', 'c' })[k % 3 + 1], k, ext)] = slurp(images .. name)
    end
    root = tree(files)
  end)
  teardown(function() os.execute(('rm -rf %q'):format(root)) end)

  local tf = T.Compose({ T.RandomResizedCrop(8), T.RandomHorizontalFlip(), T.ColorJitter{ brightness = 0.3 },
    T.Normalize({ 0.5, 0.4, 0.3 }, { 0.2, 0.25, 0.3 }) })

  it('takes the C path only with the default loader, no target_transform and a C transform', function()
    assert.is_true(data.DataLoader(data.ImageFolder(root, { transform = tf })).files)
    assert.is_true(data.DataLoader(data.ImageFolder(root)).files)
    assert.is_false(data.DataLoader(data.ImageFolder(root, { transform = tf, loader = lua_loader })).files)
    assert.is_false(data.DataLoader(data.ImageFolder(root, { transform = tf,
      target_transform = function(y) return y end })).files)
    assert.is_false(data.DataLoader(data.ImageFolder(root, { transform = function(x) return x:float() end })).files)
    assert.is_false(data.DataLoader(data.ImageFolder(root), { collate_fn = data.default_collate }).files)
  end)

  it('gives the Lua path\'s batches at 0, 1 and 2 workers, over two epochs (shuffle, random transforms)', function()
    local ref = data.DataLoader(data.ImageFolder(root, { transform = tf, loader = lua_loader }),
      { batch_size = 3, shuffle = true, seed = 7 })
    local want = { epoch(ref), epoch(ref) }
    assert.are.equal(4, #want[1])   -- (10 samples: the last batch has 1)
    for _, w in ipairs({ 0, 1, 2 }) do
      local l = data.DataLoader(data.ImageFolder(root, { transform = tf }), { batch_size = 3, shuffle = true, seed = 7,
        workers = w })
      assert.is_true(l.files)
      same_batches(epoch(l), want[1])
      same_batches(epoch(l), want[2])
      l:close()
    end
  end)

  it('batches images of their own sizes without a transform, remaking the slot for each size', function()
    local ref = epoch(data.DataLoader(data.ImageFolder(root, { loader = lua_loader }), { batch_size = 1 }))
    for _, w in ipairs({ 0, 2 }) do
      local l = data.DataLoader(data.ImageFolder(root), { batch_size = 1, workers = w })
      local got, held = {}, {}
      for x, y in l:iter() do
        got[#got + 1] = { x:clone(), y:clone() }
        held[#held + 1] = x   -- (a view: valid until the next-but-one batch)
        if #held >= 2 then assert.are.equal(0, fx.maxdiff(held[#held - 1], got[#got - 1][1])) end
      end
      same_batches(got, ref)
      local sizes = {}
      for _, b in ipairs(got) do sizes[b[1]:size(3) .. 'x' .. b[1]:size(4)] = true end
      assert.is_true(next(sizes, next(sizes)) ~= nil)   -- (more than one size)
    end
  end)

  it('serves Subsets and batch samplers, and copy = true', function()
    local ds = data.ImageFolder(root, { transform = tf })
    local sub = data.Subset(ds, { 9, 2, 5, 7, 1 })
    local want = epoch(data.DataLoader(data.Subset(data.ImageFolder(root, { transform = tf, loader = lua_loader }),
      { 9, 2, 5, 7, 1 }), { batch_size = 2, seed = 3 }))
    local l = data.DataLoader(sub, { batch_size = 2, seed = 3, workers = 2, copy = true })
    assert.is_true(l.files)
    same_batches(epoch(l), want)
    local bs = data.BatchSampler(data.SequentialSampler(ds), 4, false)
    local lb = data.DataLoader(ds, { batch_sampler = bs, seed = 3, workers = 1 })
    local lr = data.DataLoader(data.ImageFolder(root, { transform = tf, loader = lua_loader }),
      { batch_sampler = bs, seed = 3 })
    same_batches(epoch(lb), epoch(lr))
  end)

  it('names the two files when a batch\'s sizes differ', function()
    local l = data.DataLoader(data.ImageFolder(root, { transform = T.Resize(12) }), { batch_size = 10, workers = 1 })
    local e = fx.err_of(function() return l:iter()() end)
    assert.matches("DataLoader: sample %d+ input has shape {3,%d+,%d+}, sample 1 {3,%d+,%d+} %('.-/%d+%.%a+', '.-/%d+%.%a+'%)", e)
  end)

  it('names a truncated or missing file at that batch\'s step, then goes on with the next batch', function()
    local jpg = slurp(images .. 'baseline.jpg')
    local r = tree({ ['a/1.png'] = slurp(images .. 'rgb.png'), ['a/2.jpg'] = jpg:sub(1, math.floor(#jpg / 2)),
      ['b/3.jpg'] = jpg, ['b/4.png'] = slurp(images .. 'rgb.png') })
    local tf8 = T.Compose({ T.Resize({ 8, 8 }) })
    for _, w in ipairs({ 0, 1, 2 }) do
      local l = data.DataLoader(data.ImageFolder(r, { transform = tf8 }), { batch_size = 1, workers = w })
      local it = l:iter()
      assert.are.same({ 1, 3, 8, 8 }, it():size())
      local e = fx.err_of(it)
      assert.matches("DataLoader: '" .. r:gsub('%p', '%%%0') .. "/a/2%.jpg' is not a valid JPEG: the data ends early %(truncated%)", e)
      local x, y = it()   -- (the loader goes on)
      assert.are.same({ 1, 3, 8, 8 }, x:size())
      assert.are.equal(2, y[1]:item())
      assert.is_not_nil(it())
      assert.is_nil(it())
      local n = 0
      for _ in l:iter() do n = n + 1; if n == 1 then break end end   -- (a new epoch after the error)
      l:close()
      assert.matches('used after close', fx.err_of(it))
    end
    local ds = data.ImageFolder(r, { transform = tf8 })
    os.remove(r .. '/b/3.jpg')   -- (gone after the folder was listed)
    local l = data.DataLoader(ds, { batch_size = 2, workers = 2 })
    local it = l:iter()
    assert.matches("is not a valid JPEG", fx.err_of(it))
    assert.matches("DataLoader: cannot open '.-/b/3%.jpg'", fx.err_of(it))
    assert.is_nil(it())
    l:close()
    -- closing while the workers are busy: no hang
    local l2 = data.DataLoader(data.ImageFolder(root, { transform = tf }), { batch_size = 1, workers = 2, prefetch = 8 })
    l2:iter()()
    l2:close()
    os.execute(('rm -rf %q'):format(r))
  end)

  it('a crop larger than an image is an error naming the file', function()
    local l = data.DataLoader(data.ImageFolder(root, { transform = T.RandomCrop(40) }), { batch_size = 2 })
    assert.matches("DataLoader: '.-/%d+%.%a+': crop 40x40 does not fit the input %d+x%d+", fx.err_of(l:iter()))
  end)

  it('a CenterCrop larger than the images zero-pads them, as in the tensor call', function()
    local ds = data.ImageFolder(root, { transform = T.CenterCrop(40) })
    local x = data.DataLoader(ds, { batch_size = 1 }):iter()()
    assert.same({ 1, 3, 40, 40 }, x:size())
    assert.is_true(fx.maxdiff(x[1], ds:get(1)) == 0)
  end)
end)
