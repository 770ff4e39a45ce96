-- lunet.data.encode_png / encode_jpeg / write_png / write_jpeg against
-- torchvision 0.14's io (the same bytes: both call the system's libpng and
-- libjpeg-turbo the same way), and lunet.utils.make_grid / save_image against
-- torchvision.utils (tools/gen_image_write_fixtures.py writes the fixtures).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local data, utils = lunet.data, lunet.utils

local ref, cases = fx.load_fixture('image_write')

local function tmpname(ext)
  local p = os.tmpname()
  os.remove(p)
  return p .. ext
end

local function slurp(p)
  local f = assert(io.open(p, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end

local function bytes_of(t) return require('ffi').string(t:data_ptr(), t:numel()) end

describe('data.encode_png / encode_jpeg', function()
  it('gives torchvision.io.encode_png and encode_jpeg bytes, byte for byte', function()
    local n = 0
    for _, c in ipairs(cases) do
      if c.op == 'encode' then
        local img = ref[c.name .. '.img']
        for _, level in ipairs(c.opts.levels) do
          local b = data.encode_png(img, { compression_level = level })
          assert.are.equal('uint8', b.dtype)
          assert.are.equal(bytes_of(ref[c.name .. '.png' .. level]), bytes_of(b), c.name .. ' png ' .. level)
          assert.are.equal(0, fx.maxdiff(data.decode_image(b), img))   -- (PNG: exact)
        end
        for _, q in ipairs(c.opts.qualities) do
          local b = data.encode_jpeg(img, q)   -- (quality by position, as torchvision)
          local key = c.name .. '.jpeg' .. q
          assert.are.equal(bytes_of(ref[key]), bytes_of(b), key)
          assert.are.equal(0, fx.maxdiff(data.decode_image(b), ref[key .. '.decoded']), key)
          n = n + 1
        end
      end
    end
    assert.are.equal(25, n)
  end)

  it('takes non-contiguous images, and gray+alpha / RGBA PNGs (torchvision 0.14 refuses them)', function()
    local img = ref['rgb.img']
    local t = img:permute(1, 3, 2):contiguous():permute(1, 3, 2)   -- (same values, other strides)
    assert.is_false(t:is_contiguous())
    assert.are.equal(bytes_of(ref['rgb.png6']), bytes_of(data.encode_png(t)))
    assert.are.equal(bytes_of(ref['rgb.jpeg75']), bytes_of(data.encode_jpeg(t)))
    for _, c in ipairs({ 2, 4 }) do
      local x = lunet.randint(0, 256, { c, 6, 9 }, { dtype = 'uint8' })
      assert.are.equal(0, fx.maxdiff(data.decode_image(data.encode_png(x)), x))
    end
  end)

  it('write_png / write_jpeg write those bytes to a file (and replace one)', function()
    local img = ref['tall.img']
    local p, j = tmpname('.png'), tmpname('.jpg')
    data.write_png(img, p)
    data.write_png(img, p, { compression_level = 9 })
    assert.are.equal(bytes_of(ref['tall.png9']), slurp(p))
    assert.are.equal(0, fx.maxdiff(data.read_image(p), img))
    data.write_jpeg(img, j, { quality = 95 })
    assert.are.equal(bytes_of(ref['tall.jpeg95']), slurp(j))
    data.write_jpeg(img, j)
    assert.are.equal(bytes_of(ref['tall.jpeg75']), slurp(j))
    os.remove(p); os.remove(j)
  end)

  it('names bad input', function()
    local img = ref['rgb.img']
    assert.matches('encode_png: image must be a uint8 tensor, got float32', fx.err_of(data.encode_png, img:float()))
    assert.matches('encode_jpeg: image must be a 3%-d', fx.err_of(data.encode_jpeg, img:select(1, 1)))
    assert.matches('encode_jpeg: image must have 1 or 3 channels, got 4',
      fx.err_of(data.encode_jpeg, lunet.zeros({ 4, 2, 2 }, { dtype = 'uint8' })))
    assert.matches('encode_png: image must have 1, 2, 3 or 4 channels, got 5',
      fx.err_of(data.encode_png, lunet.zeros({ 5, 2, 2 }, { dtype = 'uint8' })))
    assert.matches('encode_png: image height and width must be 1..65535, got 0x4',
      fx.err_of(data.encode_png, lunet.zeros({ 3, 0, 4 }, { dtype = 'uint8' })))
    assert.matches('encode_png: image must be a uint8 %(C, H, W%) tensor, got string', fx.err_of(data.encode_png, 'x'))
    for _, q in ipairs({ 0, 101, 75.5 }) do
      assert.matches('encode_jpeg: quality must be an integer in 1..100', fx.err_of(data.encode_jpeg, img, { quality = q }))
    end
    assert.matches('write_png: compression_level must be an integer in 0..9, got 10',
      fx.err_of(data.write_png, img, tmpname('.png'), 10))
    assert.matches("encode_png: unknown option 'level'", fx.err_of(data.encode_png, img, { level = 3 }))
    assert.matches("write_jpeg: path must be a non%-empty string", fx.err_of(data.write_jpeg, img, ''))
    assert.matches("write_png: .* is a directory", fx.err_of(data.write_png, img, '/tmp'))
    assert.matches("write_png: cannot write '/no/such/dir/x.png': No such file or directory",
      fx.err_of(data.write_png, img, '/no/such/dir/x.png'))
  end)
end)

describe('utils.make_grid / save_image', function()
  local function input_of(c)
    local x = ref[c.name .. '.x']
    if c.opts.list then
      local l = {}
      for i = 1, x:size(1) do l[i] = x:select(1, i) end
      return l
    end
    return x
  end
  local function opts_of(c)
    local o = {}
    for k, v in pairs(c.opts) do if k ~= 'list' then o[k] = v end end
    return o
  end

  it('equals torchvision.utils.make_grid for each option', function()
    local n = 0
    for _, c in ipairs(cases) do
      if c.op == 'make_grid' then
        local x = ref[c.name .. '.x']
        local before = x:clone()
        local g = utils.make_grid(input_of(c), opts_of(c))
        local r = ref[c.name .. '.out']
        assert.are.same(r:size(), g:size(), c.name)
        assert.is_true(fx.maxdiff(g, r) < 1e-6, c.name)
        assert.are.equal(0, fx.maxdiff(x, before))   -- (normalize works on a copy)
        n = n + 1
      end
    end
    assert.are.equal(11, n)
  end)

  it('save_image writes the pixels torchvision (PIL) writes, PNG exactly and JPEG too', function()
    for _, c in ipairs(cases) do
      if c.op == 'save_image' then
        local p = tmpname('.' .. c.ext)
        assert.are.equal(p, utils.save_image(ref[c.name .. '.x'], p, c.opts))
        local got, r = data.read_image(p, { mode = 'RGB' }), ref[c.name .. '.out']
        assert.are.same(r:size(), got:size(), c.name)
        assert.are.equal(0, fx.maxdiff(got, r), c.name)
        os.remove(p)
      end
    end
  end)

  it('save_image: format overrides the extension', function()
    local p = tmpname('.img')
    utils.save_image(ref['save_png.x'], p, { format = 'PNG', nrow = 3 })
    assert.are.equal(0, fx.maxdiff(data.read_image(p), ref['save_png.out']))
    os.remove(p)
  end)

  it('names bad input', function()
    local x = lunet.rand({ 2, 3, 4, 4 })
    assert.matches('make_grid: expected a tensor or a list of tensors, got number', fx.err_of(utils.make_grid, 3))
    assert.matches('make_grid: .*empty list', fx.err_of(utils.make_grid, {}))
    assert.matches('make_grid: list item 2 must be a tensor', fx.err_of(utils.make_grid, { x[1], 'a' }))
    assert.matches('make_grid: the images of the list must all have the same shape',
      fx.err_of(utils.make_grid, { x[1], lunet.rand({ 3, 5, 4 }) }))
    assert.matches('make_grid: tensor must be %(H, W%), %(C, H, W%) or %(B, C, H, W%), got 5%-d',
      fx.err_of(utils.make_grid, lunet.rand({ 1, 1, 1, 1, 1 })))
    assert.matches('make_grid: no images', fx.err_of(utils.make_grid, lunet.rand({ 0, 3, 4, 4 })))
    assert.matches('make_grid: nrow must be an integer >= 1, got 0', fx.err_of(utils.make_grid, x, { nrow = 0 }))
    assert.matches('make_grid: padding must be an integer >= 0', fx.err_of(utils.make_grid, x, { padding = 1.5 }))
    assert.matches('make_grid: value_range must be {min, max}', fx.err_of(utils.make_grid, x, { value_range = { 1 } }))
    assert.matches("make_grid: unknown option 'rows'", fx.err_of(utils.make_grid, x, { rows = 2 }))
    assert.matches('make_grid: normalize = true needs floating%-point images',
      fx.err_of(utils.make_grid, x:mul(255):to('uint8'), { normalize = true }))
    assert.matches("save_image: format must be 'png' or 'jpeg', got 'bmp'", fx.err_of(utils.save_image, x, 'a.bmp'))
    assert.matches('save_image: cannot tell the format', fx.err_of(utils.save_image, x, '/tmp/noext'))
    assert.matches('save_image: expected floating%-point images', fx.err_of(utils.save_image, x:to('uint8'), '/tmp/a.png'))
    assert.matches("save_image: unknown option 'quality'", fx.err_of(utils.save_image, x, '/tmp/a.jpg', { quality = 9 }))
  end)

  it('takes the deprecated range = {lo, hi} as value_range', function()
    local c
    for _, k in ipairs(cases) do if k.name == 'range' then c = k end end
    local g = utils.make_grid(ref['range.x'], { normalize = true, range = c.opts.value_range })
    assert.is_true(fx.maxdiff(g, ref['range.out']) < 1e-6)
  end)
end)
