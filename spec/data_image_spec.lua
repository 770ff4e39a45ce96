-- lunet.data.read_image / decode_image (JPEG, PNG decoded in C) against
-- torchvision 0.14's io.read_image and PIL, and ImageFolder against
-- torchvision's (tools/gen_image_fixtures.py writes the fixtures).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local json = require 'lunet.json'
local data = lunet.data
local T = data.transforms

local dir = debug.getinfo(1, 'S').source:match('^@(.*/)') or 'spec/'
local images = dir .. 'fixtures/images/'
local ref, cases, meta = fx.load_fixture('image_decode')
local folder = json.decode(meta.folder)

local function slurp(p)
  local f = assert(io.open(p, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end

describe('data.read_image', function()
  it('decodes every kind as torchvision.io.read_image and PIL, bit for bit', function()
    local n = 0
    for _, c in ipairs(cases) do
      -- (CMYK in RGB: a named error; a 4-bit palette in UNCHANGED: torchvision
      -- 0.14 returns the packed bytes, lunet the indices; its alpha modes of a
      -- palette without tRNS misread the rows, lunet adds an opaque alpha)
      if c.ref == 'palette4.png.GRAY_ALPHA' or c.ref == 'palette4.png.RGB_ALPHA' then
        local x = data.read_image(images .. c.file, { mode = c.mode })
        assert.are.same({ c.mode == 'RGB_ALPHA' and 4 or 2, 13, 17 }, x:size())
        assert.are.equal(255, x:select(1, x:size(1)):min():item())
        local y = data.read_image(images .. c.file, { mode = c.mode == 'RGB_ALPHA' and 'RGB' or 'GRAY' })
        assert.are.equal(0, fx.maxdiff(x:narrow(1, 1, x:size(1) - 1), y))
      elseif c.ref == 'palette4.png.UNCHANGED' then
        local x = data.read_image(images .. c.file)
        assert.are.same({ 1, 13, 17 }, x:size())
        assert.is_true(x:max():item() <= 15)
      elseif c.ref and c.file:match('^gray[124][_.]') and c.mode:match('ALPHA') then
        -- (torchvision 0.14's alpha for 1/2/4-bit gray is 2^depth - 1, lunet's 255)
        local x, r = data.read_image(images .. c.file, { mode = c.mode }), ref[c.ref]
        local n = x:size(1) - 1
        assert.are.same(r:size(), x:size())
        assert.are.equal(0, fx.maxdiff(x:narrow(1, 1, n), r:narrow(1, 1, n)))
        assert.are.equal(255, x:select(1, n + 1):min():item())
      elseif c.ref and not (c.pil and c.file == 'cmyk.jpg') then
        local x = data.read_image(images .. c.file, { mode = c.mode })
        local r = ref[c.ref]
        assert.are.equal('uint8', x.dtype)
        assert.are.same(r:size(), x:size(), c.ref)
        assert.are.equal(0, fx.maxdiff(x, r), c.ref)
        n = n + 1
      end
    end
    assert.is_true(n > 80)
  end)

  it('decode_image of the bytes (a string or a uint8 tensor) equals read_image', function()
    for _, f in ipairs({ 'baseline.jpg', 'progressive.jpg', 'palette8_trns.png', 'rgb_interlaced.png' }) do
      local a = data.read_image(images .. f, { mode = 'RGB' })
      local s = slurp(images .. f)
      assert.are.equal(0, fx.maxdiff(data.decode_image(s, { mode = 'RGB' }), a))
      local t = lunet.empty({ #s }, { dtype = 'uint8' })
      require('ffi').copy(t:data_ptr(), s, #s)
      assert.are.equal(0, fx.maxdiff(data.decode_image(t, { mode = 'RGB' }), a))
    end
  end)

  it('16-bit PNGs keep the high byte (torchvision 0.14 refuses them)', function()
    local x = data.read_image(images .. 'rgba16.png')
    assert.are.same({ 4, 13, 17 }, x:size())
    assert.are.same({ 3, 13, 17 }, data.read_image(images .. 'gray_alpha16.png', { mode = 'RGB' }):size())
  end)

  it('names what torchvision refuses: alpha modes of a JPEG, CMYK JPEGs', function()
    for _, c in ipairs(cases) do
      if c.torchvision_error and c.file:match('%.[jJ][pP][eE]?[gG]$') then
        local e = fx.err_of(data.read_image, images .. c.file, { mode = c.mode })
        assert.matches('read_image: .*' .. c.file:gsub('%.', '%%.'), e)
        assert.matches(c.mode:match('ALPHA') and 'not supported' or 'CMYK', e)
      end
    end
  end)

  it('bad arguments and files are named errors', function()
    assert.matches("read_image: cannot open 'nope.png'", fx.err_of(data.read_image, 'nope.png'))
    assert.matches('read_image: .*not a regular file', fx.err_of(data.read_image, images))
    assert.matches('not a JPEG or PNG', fx.err_of(data.read_image, dir .. 'data_image_spec.lua'))
    assert.matches("read_image: mode must be", fx.err_of(data.read_image, images .. 'rgb.png', { mode = 'CMYK' }))
    assert.matches("read_image: unknown option 'mod'", fx.err_of(data.read_image, images .. 'rgb.png', { mod = 'RGB' }))
    assert.matches('read_image: path must be a string', fx.err_of(data.read_image, 3))
    assert.matches('decode_image: data must be a contiguous 1%-D uint8', fx.err_of(data.decode_image, lunet.zeros(3)))
    assert.matches('not a JPEG or PNG', fx.err_of(data.decode_image, ''))
  end)

  it('every prefix of a JPEG and a PNG is a named error, never a crash', function()
    for _, f in ipairs({ 'baseline.jpg', 'progressive.jpg', 'rgb.png', 'rgb_interlaced.png' }) do
      local s = slurp(images .. f)
      for n = 0, #s - 1 do
        local ok, e = pcall(data.decode_image, s:sub(1, n), { mode = 'RGB' })
        -- (a PNG cut inside IEND's CRC still has all its pixels: libpng decodes it)
        if ok then assert.is_true(f:match('png$') and n >= #s - 12, f .. ' prefix ' .. n)
        else assert.matches('^.-decode_image: ', tostring(e)) end
      end
    end
  end)

  it('byte flips decode as the libraries do or are named errors', function()
    for _, f in ipairs({ 'baseline.jpg', 'gray.jpg', 'rgb.png', 'palette4.png' }) do
      local s = slurp(images .. f)
      for k = 1, #s do
        local b = string.char(bit.bxor(s:byte(k), 0x5a))
        local ok, e = pcall(data.decode_image, s:sub(1, k - 1) .. b .. s:sub(k + 1), { mode = 'RGB' })
        if ok then assert.are.equal(3, e:size(1))
        else assert.matches('^.-decode_image: ', tostring(e)) end
      end
    end
  end)

  it('corruption: library warnings decode, damaged critical data and early ends are named errors', function()
    local png, jpg = slurp(images .. 'rgb.png'), slurp(images .. 'baseline.jpg')
    local want = data.decode_image(png)
    -- (rgb.png: IHDR ends at 33, IEND is its last 12 bytes; an ancillary chunk with a bad CRC is dropped)
    assert.is_true(fx.maxdiff(want, data.decode_image(png:sub(1, 33) .. '\0\0\0\3tEXtk\0v\0\0\0\0' .. png:sub(34))) == 0)
    -- the chunks after the image data are not read (as torchvision): no IEND, or garbage for it
    assert.is_true(fx.maxdiff(want, data.decode_image(png:sub(1, #png - 12))) == 0)
    assert.is_true(fx.maxdiff(want, data.decode_image(png:sub(1, #png - 12) .. 'garbage')) == 0)
    local idat_crc = #png - 13   -- (the last byte of IDAT's CRC)
    local bad = png:sub(1, idat_crc - 1) .. string.char(bit.bxor(png:byte(idat_crc), 1)) .. png:sub(idat_crc + 1)
    assert.matches("decode_image: '<bytes>' is not a valid PNG: IDAT: CRC error", fx.err_of(data.decode_image, bad))
    -- libjpeg's corrupt-data warnings: the image decodes (zeroed entropy bytes); the end of data is an error
    local z = jpg:sub(1, #jpg - 40) .. ('\0'):rep(20) .. jpg:sub(#jpg - 19)
    assert.same({ 3, 13, 17 }, data.decode_image(z):size())
    assert.matches('is not a valid JPEG: the data ends early', fx.err_of(data.decode_image, jpg:sub(1, #jpg - 2)))
  end)

  it('refuses absurd sizes, saying the limit', function()
    -- a PNG header claiming 100000 x 1 pixels, with its CRC right
    local function crc32(s)
      local c = 0xffffffff
      for i = 1, #s do
        c = bit.bxor(c, s:byte(i))
        for _ = 1, 8 do c = bit.band(c, 1) ~= 0 and bit.bxor(bit.rshift(c, 1), 0xedb88320) or bit.rshift(c, 1) end
      end
      return bit.bnot(c)
    end
    local function be32(v) return string.char(bit.band(bit.rshift(v, 24), 255), bit.band(bit.rshift(v, 16), 255),
      bit.band(bit.rshift(v, 8), 255), bit.band(v, 255)) end
    local body = 'IHDR' .. be32(100000) .. be32(1) .. '\8\2\0\0\0'
    local png = '\137PNG\r\n\26\n' .. be32(13) .. body .. be32(crc32(body)) .. be32(0) .. 'IDAT' .. be32(crc32('IDAT'))
    assert.matches('100000 pixels, more than the limit %(65535 per side', fx.err_of(data.decode_image, png))
  end)

  -- progressive.jpg with its DC refinement scan (Ss = Se = 0, Ah = 1) repeated
  -- until it has `total` scans: each repeat ORs the same bit into each DC
  -- again, so libjpeg decodes the original image (tools/gen_jpeg_scans_corpus.py)
  local function with_scans(total)
    local s = slurp(images .. 'progressive.jpg')
    local i, scans, dc = 3, 0, nil
    while s:byte(i + 1) ~= 0xD9 do
      local m = s:byte(i + 1)
      local j = i + 2 + s:byte(i + 2) * 256 + s:byte(i + 3)
      if m == 0xDA then
        scans = scans + 1
        while not (s:byte(j) == 255 and s:byte(j + 1) ~= 0 and (s:byte(j + 1) < 0xD0 or s:byte(j + 1) > 0xD7)) do j = j + 1 end
        local ns = s:byte(i + 4)
        if s:sub(i + 5 + 2 * ns, i + 7 + 2 * ns) == '\0\0\16' then dc = { i, j } end
      end
      i = j
    end
    return s:sub(1, dc[2] - 1) .. s:sub(dc[1], dc[2] - 1):rep(total - scans) .. s:sub(dc[2])
  end

  it('refuses a progressive JPEG of more than 500 scans (as TurboJPEG), quickly', function()
    local orig = data.decode_image(slurp(images .. 'progressive.jpg'))
    for _, mode in ipairs({ 'UNCHANGED', 'GRAY', 'RGB' }) do
      local x = data.decode_image(with_scans(500), { mode = mode })
      assert.are.equal(0, fx.maxdiff(x, data.decode_image(slurp(images .. 'progressive.jpg'), { mode = mode })), mode)
    end
    assert.are.same(orig:size(), data.decode_image(with_scans(500)):size())
    local t0 = lunet.clock()
    for _, total in ipairs({ 501, 5000 }) do
      assert.matches("decode_image: '.-': a progressive JPEG with more than 500 scans",
        fx.err_of(data.decode_image, with_scans(total)))
    end
    local corpus = dir .. '../tools/corpus/image/progressive_501_scans.jpg'
    assert.are.equal(with_scans(501), slurp(corpus))
    assert.matches("read_image: '.-progressive_501_scans.jpg': a progressive JPEG with more than 500 scans",
      fx.err_of(data.read_image, corpus))
    assert.is_true(lunet.clock() - t0 < 2)
  end)
end)

-- the fixture's tree under a new temporary folder
local function build_tree(tree)
  local root = os.tmpname()
  os.remove(root)
  assert(os.execute(('mkdir -p %q'):format(root)) == 0)
  for _, entry in ipairs(tree) do
    local link, target = entry:match('^(.-)%->(.*)$')
    if link then
      assert(os.execute(('ln -s %q %q'):format(target, root .. '/' .. link)) == 0)
    elseif entry:sub(-1) == '/' then
      assert(os.execute(('mkdir -p %q'):format(root .. '/' .. entry)) == 0)
    else
      local rel, src = entry:match('^(.-)=(.*)$')
      assert(os.execute(('mkdir -p %q'):format((root .. '/' .. rel):match('^(.*)/'))) == 0)
      local f = assert(io.open(root .. '/' .. rel, 'wb'))
      f:write(slurp(images .. src))
      f:close()
    end
  end
  return root
end

describe('data.ImageFolder', function()
  local root
  setup(function() root = build_tree(folder.tree) end)
  teardown(function() os.execute(('rm -rf %q'):format(root)) end)

  it('has torchvision classes, class_to_idx (1-based) and samples in its order', function()
    local ds = data.ImageFolder(root)
    assert.are.same(folder.classes, ds.classes)
    for k, v in pairs(folder.class_to_idx) do assert.are.equal(v + 1, ds.class_to_idx[k]) end
    assert.are.equal(#folder.samples, #ds)
    for i, s in ipairs(folder.samples) do
      assert.are.equal(root .. '/' .. s[1], ds.samples[i][1])
      assert.are.equal(s[2] + 1, ds.samples[i][2])
      assert.are.equal(s[2] + 1, ds.targets[i])
    end
    local x, y = ds:get(1)
    assert.are.equal(0, fx.maxdiff(ds[1], x))
    assert.are.same({ 3, 13, 17 }, x:size())
    assert.are.equal('float32', x.dtype)
    assert.are.equal(1, y)
    assert.are.equal(0, fx.maxdiff(x:mul(255):round(), data.read_image(ds.samples[1][1], { mode = 'RGB' })))
    assert.matches('ImageFolder%(%d+ samples, 4 classes', tostring(ds))
  end)

  it('errors as torchvision: empty class, no class folder, bad options', function()
    local r2 = build_tree({ 'a/x.png=rgb.png', 'b/', 'b/readme.txt=rgb.png' })
    local e = fx.err_of(data.ImageFolder, r2)
    os.execute(('rm -rf %q'):format(r2))
    assert.matches('ImageFolder: Found no valid file for the classes b%. Supported extensions are: %.jpg, %.jpeg', e)
    assert.are.equal(folder.empty_error:gsub('emptyish', 'b'), e:match('ImageFolder: (.*)$'))
    assert.matches("Couldn't find any class folder in", fx.err_of(data.ImageFolder, images))
    assert.matches('ImageFolder: cannot open the folder', fx.err_of(data.ImageFolder, root .. '/nope'))
    assert.matches('not both', fx.err_of(data.ImageFolder, root, { extensions = { '.png' }, is_valid_file = print }))
    assert.matches("ImageFolder: unknown option 'transforms'", fx.err_of(data.ImageFolder, root, { transforms = {} }))
  end)

  it('extensions, is_valid_file and DatasetFolder with a loader', function()
    local ds = data.ImageFolder(root, { extensions = { '.PNG', '.jpg' } })
    local want = 0
    for _, s in ipairs(folder.samples) do if s[1]:lower():match('%.png$') or s[1]:lower():match('%.jpg$') then want = want + 1 end end
    assert.are.equal(want, #ds)
    for _, s in ipairs(ds.samples) do assert.matches('%.[pPjJ][nNpP][gG]$', s[1]) end
    ds = data.ImageFolder(root, { is_valid_file = function() return true end })
    assert.are.equal(#folder.samples + 2, #ds)   -- (and cat/notes.txt, link/notes.txt)
    ds = data.DatasetFolder(root, { loader = function(p) return data.read_image(p, { mode = 'GRAY' }) end,
      extensions = { '.png', '.jpg' }, target_transform = function(y) return y * 10 end })
    local x, y = ds:get(1)
    assert.are.same({ 1, 13, 17 }, x:size())
    assert.are.equal(10, y)
    assert.matches('DatasetFolder: needs extensions or is_valid_file', fx.err_of(data.DatasetFolder, root))
  end)

  it('a DataLoader batch with Resize + CenterCrop + Normalize equals torchvision within 1e-5', function()
    local tf = T.Compose({ T.Resize(12), T.CenterCrop(10), T.Normalize({ 0.5, 0.4, 0.3 }, { 0.2, 0.25, 0.3 }) })
    local ds = data.ImageFolder(root, { transform = tf })
    local x, y = data.DataLoader(ds, { batch_size = #ds })()
    assert.are.same(ref['folder.batch']:size(), x:size())
    assert.is_true(fx.maxdiff(x, ref['folder.batch']) < 1e-5)
    assert.are.equal(#ds, y:size(1))
    assert.are.equal('int64', y.dtype)
  end)

  it('names the two sizes when the transforms do not end at one size', function()
    local ds = data.ImageFolder(root, { transform = T.Resize(12) })
    local e = fx.err_of(function() return data.DataLoader(ds, { batch_size = 4 })() end)
    assert.matches('DataLoader: sample %d input has shape {3,%d+,%d+}, sample 1 {3,%d+,%d+}', e)
  end)

  it('gives the same batches at 0, 1 and 2 workers (random transforms, shuffle)', function()
    local tf = T.Compose({ T.RandomResizedCrop(8), T.RandomHorizontalFlip(), T.Normalize({ 0.5 }, { 0.5 }) })
    local ds = data.ImageFolder(root, { transform = tf })
    local got = {}
    for _, w in ipairs({ 0, 1, 2 }) do
      local l = data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 5, workers = w, drop_last = true })
      got[w] = {}
      for x, y in l:iter() do got[w][#got[w] + 1] = { x:clone(), y:clone() } end
      assert.are.equal(math.floor(#ds / 4), #got[w])
    end
    for _, w in ipairs({ 1, 2 }) do
      for b = 1, #got[0] do
        assert.are.equal(0, fx.maxdiff(got[w][b][1], got[0][b][1]))
        assert.are.equal(0, fx.maxdiff(got[w][b][2], got[0][b][2]))
      end
    end
  end)
end)
