-- data.transforms.FiveCrop / TenCrop and functional.five_crop / ten_crop
-- against torchvision 0.14 (tools/gen_five_crop_fixtures.py writes the
-- fixtures), their views, the stacking recipe in a DataLoader, and errors.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local T = lunet.data.transforms
local F = T.functional

local ref, cases = fx.load_fixture('five_crop')

local function run(c, x, as_module)
  local size = c.size
  if c.op == 'five_crop' then return as_module and T.FiveCrop(size)(x) or F.five_crop(x, size) end
  if as_module then return T.TenCrop(size, { vertical_flip = c.vertical_flip or false })(x) end
  return F.ten_crop(x, size, c.vertical_flip)
end

describe('data.transforms five_crop / ten_crop', function()
  it("give torchvision's crops (corners, then center; ten: then of the flipped image)", function()
    assert.equal(11, #cases)
    for _, c in ipairs(cases) do
      local x = ref[c.name .. '.x']
      for _, as_module in ipairs({ false, true }) do
        local out = run(c, x, as_module)
        assert.equal(c.n, #out, c.name)
        for k = 1, c.n do
          local want = ref[('%s.out%d'):format(c.name, k)]
          assert.are.same(want:size(), out[k]:size(), c.name)
          assert.equal('float32', out[k].dtype, c.name)
          if c.uint8 then   -- ToTensor first, as every lunet transform
            assert.truthy(fx.maxdiff(out[k], want:float():div(255)) < 1e-7, c.name .. ' ' .. k)
          else
            assert.equal(0, fx.maxdiff(out[k], want), c.name .. ' ' .. k)
          end
        end
      end
    end
  end)

  it("center piece is CenterCrop's, on uint8 and float, odd and even margins", function()
    local u = lunet.rand(3, 9, 11):mul(255):to('uint8')
    for _, s in ipairs({ { 4, 4 }, { 5, 6 }, { 2, 3 }, { 9, 11 }, { 1, 1 } }) do
      assert.equal(0, fx.maxdiff(F.five_crop(u, s)[5], T.CenterCrop(s)(u)))
      local f = u:float():div(255)
      assert.equal(0, fx.maxdiff(T.TenCrop(s)(f)[5], T.CenterCrop(s)(f)))
    end
  end)

  it("a float image's crops are views of it; a non-contiguous image gives the same crops", function()
    local x = lunet.rand(3, 6, 8)
    local crops = F.ten_crop(x, 3)
    local nt = lunet.rand(3, 8, 6):transpose(2, 3)
    local a, b = F.five_crop(nt, { 2, 5 }), F.five_crop(nt:contiguous(), { 2, 5 })
    for k = 1, 5 do assert.equal(0, fx.maxdiff(a[k], b[k])) end
    x:fill_(0)
    for k = 1, 5 do assert.equal(0, crops[k]:abs():sum():item()) end   -- (the flipped ones are copies)
    assert.truthy(crops[6]:abs():sum():item() > 0)
    local empty = F.five_crop(lunet.rand(0, 3, 5, 5), 2)   -- an empty batch
    assert.are.same({ 0, 3, 2, 2 }, empty[5]:size())
  end)

  it('stack into (10, C, h, w) per image, in a DataLoader as the usual recipe', function()
    local ds = lunet.data.ImageFolder('spec/fixtures/folder', { transform = function(img)
      return lunet.stack(T.TenCrop(4)(T.Resize(6)(img)))
    end })
    local x, y = lunet.data.DataLoader(ds, { batch_size = 2 })()
    assert.are.same({ 2, 10, 3, 4, 4 }, x:size())
    assert.are.same({ 2 }, y:size())
    local one = T.Resize(6)(lunet.data.read_image(ds.samples[1][1], { mode = 'RGB' }))
    assert.equal(0, fx.maxdiff(x[1][5], T.CenterCrop(4)(one)))
    assert.equal(0, fx.maxdiff(x[1][6], F.hflip(one):narrow(2, 1, 4):narrow(3, 1, 4)))   -- the flipped top-left
  end)

  it('print as torchvision', function()
    assert.equal('FiveCrop({3, 4})', tostring(T.FiveCrop({ 3, 4 })))
    assert.equal('TenCrop({5, 5}, {vertical_flip = true})', tostring(T.TenCrop(5, true)))
    assert.equal('TenCrop({5, 5}, {vertical_flip = false})', tostring(T.TenCrop({ 5 })))
  end)

  it('reject bad sizes, inputs and options by name', function()
    local x = lunet.rand(3, 5, 7)
    for _, e in ipairs({
      { function() return T.FiveCrop({ 1, 2, 3 }) end, 'FiveCrop: size must be a number, {s} or {h, w}, got 3 values' },
      { function() return T.FiveCrop(0) end, 'FiveCrop: size must be positive integers, got 0' },
      { function() return T.TenCrop('a') end, 'TenCrop: size must be a number, {s} or {h, w}, got string' },
      { function() return T.FiveCrop(2, true) end, 'FiveCrop: takes only the size' },
      { function() return T.TenCrop(2, { vertical = true }) end, "TenCrop: unknown option 'vertical'" },
      { function() return T.TenCrop(2, 'yes') end, "TenCrop: option 'vertical_flip' must be a boolean" },
      { function() return F.five_crop(x, 6) end, 'five_crop: crop size {6, 6} is bigger than the input size {5, 7}' },
      { function() return F.ten_crop(x, { 2, 8 }) end, 'ten_crop: crop size {2, 8} is bigger than the input size {5, 7}' },
      { function() return F.ten_crop(x, 2, 1) end, 'ten_crop: vertical_flip must be true or false, got number' },
      { function() return F.five_crop({}, 2) end, 'five_crop: input must be a tensor (..., H, W), got table' },
      { function() return F.five_crop(lunet.rand(5), 2) end, 'five_crop: input must be (..., H, W), got 1-d' },
      { function() return T.Compose { T.FiveCrop(2) } end, 'Compose: item 1 is not a lunet.data.transforms transform' },
    }) do
      local msg = fx.err_of(e[1])
      assert.truthy(msg:find(e[2], 1, true), msg)
    end
  end)
end)
