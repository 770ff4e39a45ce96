-- lunet.data.transforms beyond crop/flip/normalize: RandomVerticalFlip,
-- Resize, RandomResizedCrop, ColorJitter, RandomErasing (C ops run in the
-- Compose's order) and their fixed-parameter functional forms, against
-- torch references (tools/gen_transforms_fixtures.py).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local data = lunet.data
local T = data.transforms
local F = T.functional
local err_of = fx.err_of

describe('data.transforms (resize, resized crop, jitter, erasing)', function()
  local t, cases = fx.load_fixture('data_transforms_more')

  it('fixed-parameter forms match torch references', function()
    local n = 0
    for _, c in ipairs(cases) do
      local x, want = t[c.name .. '.x'], t[c.name .. '.out']
      local got
      if c.op == 'resize' then got = F.resize(x, c.size)
      elseif c.op == 'resized_crop' then got = F.resized_crop(x, c.box[1], c.box[2], c.box[3], c.box[4], c.size)
      elseif c.op == 'erase' then got = F.erase(x, c.box[1], c.box[2], c.box[3], c.box[4], c.value)
      else got = F['adjust_' .. c.op](x, c.factor) end
      assert.same(want:size(), got:size(), c.name)
      assert.is_true(fx.maxdiff(got, want) < 2e-6, c.name .. ': ' .. fx.maxdiff(got, want))
      n = n + 1
    end
    assert.equal(27, n)
  end)

  it('Resize(int) and {h, w} in a Compose, uint8 and float32, batched', function()
    local xu = (lunet.rand(2, 3, 9, 6) * 255):floor():byte()
    local xf = xu:float() / 255
    for _, size in ipairs { 4, { 5, 11 }, 12 } do
      local a, b = T.Resize(size)(xu), T.Resize(size)(xf)
      assert.is_true(fx.maxdiff(a, b) < 1e-6)
      assert.is_true(fx.maxdiff(b[2], F.resize(xf[2], size)) == 0)
    end
    assert.same({ 2, 3, 6, 4 }, T.Resize(4)(xu):size())   -- 9x6: shorter side 6 -> 4, longer int(4*9/6)
    -- Compose order: resize, then crop, then normalize
    local tf = T.Compose { T.Resize(8), T.CenterCrop(6), T.Normalize(0.5, 0.25) }
    local want = (F.resize(xf, 8):narrow(3, 4, 6):narrow(4, 2, 6) - 0.5) / 0.25   -- 12x8: offsets 3, 1 (0-based)
    assert.is_true(fx.maxdiff(tf(xu), want) < 1e-5)
  end)

  it('RandomResizedCrop: whole image when scale = ratio = the image, the central fallback otherwise', function()
    local x = lunet.rand(3, 10, 15)
    local whole = T.RandomResizedCrop({ 7, 4 }, { scale = { 1, 1 }, ratio = { 1.5, 1.5 } })
    assert.is_true(fx.maxdiff(whole(x, { key = 3, seed = 9 }), F.resize(x, { 7, 4 })) < 1e-6)
    -- no box of ratio 2..3 and full area fits 10x10: torchvision's fallback w = 10, h = round(10/2), centred
    local y = lunet.rand(3, 10, 10)
    local fb = T.RandomResizedCrop(6, { scale = { 1, 1 }, ratio = { 2, 3 } })
    assert.is_true(fx.maxdiff(fb(y, { key = 1 }), F.resized_crop(y, 2, 0, 5, 10, 6)) < 1e-6)
  end)

  -- a (2, H, W) image of row and column numbers: bilinear is exact on it, so
  -- output pixels 2 and 3 of a 4x4 output give the box back
  local function coords(H, W)
    local r = lunet.arange(0, H):float():reshape(H, 1):expand(H, W)
    local c = lunet.arange(0, W):float():reshape(1, W):expand(H, W)
    return lunet.stack({ r, c }, 1)
  end
  local function box_of(o)
    local sh, sw = o[1][3][1]:item() - o[1][2][1]:item(), o[2][1][3]:item() - o[2][1][2]:item()
    local bh, bw = math.floor(4 * sh + 0.5), math.floor(4 * sw + 0.5)
    return math.floor(o[1][2][1]:item() - 1.5 * sh + 0.5 + 0.5), math.floor(o[2][1][2]:item() - 1.5 * sw + 0.5 + 0.5), bh, bw
  end

  it('RandomResizedCrop: boxes inside the image, area share and ratio within bounds over many keys', function()
    local H, W = 48, 64
    local x = coords(H, W)
    local tf = T.RandomResizedCrop(4, { scale = { 0.2, 0.7 }, ratio = { 0.5, 2 } })
    local seen, sum = {}, 0
    for k = 1, 300 do
      local i, j, bh, bw = box_of(tf(x, { key = k, seed = 5, epoch = 2 }))
      assert.is_true(i >= 0 and j >= 0 and i + bh <= H and j + bw <= W, ('%d %d %d %d'):format(i, j, bh, bw))
      local share = bh * bw / (H * W)
      assert.is_true(share > 0.2 * 0.85 and share < 0.7 * 1.15, 'share ' .. share)
      assert.is_true(bw / bh > 0.5 * 0.85 and bw / bh < 2 * 1.15, 'ratio ' .. bw / bh)
      seen[('%d/%d/%d/%d'):format(i, j, bh, bw)] = true
      sum = sum + share
    end
    local distinct = 0
    for _ in pairs(seen) do distinct = distinct + 1 end
    assert.is_true(distinct > 200)
    assert.is_true(math.abs(sum / 300 - 0.45) < 0.05, 'mean share ' .. sum / 300)
  end)

  it('RandomVerticalFlip flips about p of the samples, each whole', function()
    local x = lunet.rand(3, 5, 4)
    local vf = F.vflip(x)
    assert.is_true(fx.maxdiff(vf:narrow(2, 1, 1), x:narrow(2, 5, 1)) == 0)
    local flips = 0
    for k = 1, 400 do
      local o = T.RandomVerticalFlip(0.3)(x, { key = k, seed = 1 })
      if fx.maxdiff(o, vf) == 0 then flips = flips + 1 else assert.is_true(fx.maxdiff(o, x) == 0) end
    end
    assert.is_true(flips > 90 and flips < 150, 'flips ' .. flips)
  end)

  it('ColorJitter: brightness factors uniform in range, a random order of the three per sample', function()
    local x = lunet.full({ 1, 4, 4 }, 0.5)
    local tf = T.ColorJitter { brightness = 0.5 }
    local lo, hi, sum = 9, 0, 0
    for k = 1, 400 do
      local f = tf(x, { key = k })[1][1][1]:item() / 0.5
      lo, hi, sum = math.min(lo, f), math.max(hi, f), sum + f
    end
    assert.is_true(lo >= 0.5 and lo < 0.55 and hi <= 1.5 and hi > 1.45 and math.abs(sum / 400 - 1) < 0.05)
    -- fixed factors ({f, f}) give one of the 6 orders, and over keys more than one
    local img = lunet.rand(3, 5, 6)
    local cj = T.ColorJitter { brightness = { 1.6, 1.6 }, contrast = { 0.4, 0.4 }, saturation = { 1.8, 1.8 } }
    local b, c, s = F.adjust_brightness, F.adjust_contrast, F.adjust_saturation
    local orders = {
      function(v) return s(c(b(v, 1.6), 0.4), 1.8) end, function(v) return c(s(b(v, 1.6), 1.8), 0.4) end,
      function(v) return s(b(c(v, 0.4), 1.6), 1.8) end, function(v) return b(s(c(v, 0.4), 1.8), 1.6) end,
      function(v) return c(b(s(v, 1.8), 1.6), 0.4) end, function(v) return b(c(s(v, 1.8), 0.4), 1.6) end }
    local used = {}
    for k = 1, 60 do
      local o, which = cj(img, { key = k, seed = 3 }), nil
      for q, fn in ipairs(orders) do if fx.maxdiff(o, fn(img)) < 1e-6 then which = q end end
      assert.is_not_nil(which)
      used[which] = true
    end
    local n = 0
    for _ in pairs(used) do n = n + 1 end
    assert.is_true(n >= 5)
  end)

  it('RandomErasing: p of the samples get one box of the value, area share within scale', function()
    local x = lunet.ones(3, 40, 40)
    local tf = T.RandomErasing { p = 0.5, scale = { 0.05, 0.2 }, value = { -1, -2, -3 } }
    local erased = 0
    for k = 1, 300 do
      local o = tf(x, { key = k, seed = 8 })
      local m = o[1]:eq(-1):float()
      local cnt = m:sum():item()
      if cnt > 0 then
        erased = erased + 1
        assert.is_true(o[3]:eq(-3):float():sum():item() == cnt)
        local rows, cols = m:sum(2):gt(0):float():sum():item(), m:sum(1):gt(0):float():sum():item()
        assert.equal(rows * cols, cnt)   -- one box
        assert.is_true(cnt / 1600 > 0.05 * 0.8 and cnt / 1600 < 0.2 * 1.2, 'share ' .. cnt / 1600)
      else
        assert.is_true(fx.maxdiff(o, x) == 0)
      end
    end
    assert.is_true(erased > 120 and erased < 180, 'erased ' .. erased)
  end)

  it('the same batches via the DataLoader at 0, 1 and 2 workers and via tf(x, {key, seed, epoch})', function()
    local xu = (lunet.rand(10, 3, 12, 14) * 255):floor():byte()
    local ds = data.TensorDataset(xu, lunet.arange(0, 10))
    local tf = T.Compose { T.RandomResizedCrop({ 8, 6 }), T.RandomHorizontalFlip(), T.RandomVerticalFlip(),
      T.ColorJitter(0.4, 0.4, 0.4), T.Normalize({ 0.5, 0.4, 0.3 }, { 0.2, 0.25, 0.3 }), T.RandomErasing() }
    local runs = {}
    for _, w in ipairs { 0, 1, 2 } do
      local l = data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 17, workers = w, transform = tf })
      local xs, ys = {}, {}
      for e = 1, 2 do for bx, by in l:iter() do xs[#xs + 1], ys[#ys + 1] = bx:clone(), by:clone() end end
      runs[w] = { xs, ys }
    end
    for q = 1, #runs[0][1] do
      assert.is_true(fx.maxdiff(runs[0][1][q], runs[1][1][q]) == 0)
      assert.is_true(fx.maxdiff(runs[0][1][q], runs[2][1][q]) == 0)
    end
    -- epoch 1's first batch sample by sample (y holds the 0-based row)
    local bx, by = runs[0][1][1], runs[0][2][1]
    for k = 1, by:size(1) do
      local r = by[k]:item()
      local want = tf(xu[r + 1], { key = r + 1, seed = 17, epoch = 1 })
      assert.is_true(fx.maxdiff(bx[k], want) == 0)
    end
    -- another epoch differs
    assert.is_true(fx.maxdiff(tf(xu[1], { key = 1, seed = 17, epoch = 1 }), tf(xu[1], { key = 1, seed = 17, epoch = 2 })) > 0)
  end)

  it("crop, flip and normalize give the fixed path's results when a vertical flip of p = 0 joins them", function()
    local xu = (lunet.rand(6, 3, 8, 8) * 255):floor():byte()
    local base = { T.RandomCrop(6, { padding = 2 }), T.RandomHorizontalFlip(), T.Normalize(0.4, 0.3) }
    for _, order in ipairs { { 1, 2, 3 }, { 3, 1, 2 } } do
      local l = { base[order[1]], base[order[2]], base[order[3]] }
      local a = T.Compose(l)(xu, { seed = 4 })
      table.insert(l, 2, T.RandomVerticalFlip(0))
      local b = T.Compose(l)(xu, { seed = 4 })
      assert.is_true(fx.maxdiff(a, b) < 1e-6)   -- padding: -mean/std before the Normalize, 0 after
    end
  end)

  it('errors name the transform and the problem', function()
    assert.matches('Resize: size must be a positive integer', err_of(T.Resize, 0), 1, true)
    assert.matches('Resize: takes only the size', err_of(T.Resize, 4, { antialias = true }), 1, true)
    assert.matches('RandomVerticalFlip: p must be in [0, 1]', err_of(T.RandomVerticalFlip, 2), 1, true)
    assert.matches("RandomResizedCrop: unknown option 'scales'", err_of(T.RandomResizedCrop, 4, { scales = { 1, 1 } }), 1, true)
    assert.matches('RandomResizedCrop: scale must have', err_of(T.RandomResizedCrop, 4, { scale = { 0.9, 0.1 } }), 1, true)
    assert.matches("RandomResizedCrop: option 'ratio' must be a table", err_of(T.RandomResizedCrop, 4, { ratio = 2 }), 1, true)
    assert.matches('ColorJitter: hue must be in [0, 0.5]', err_of(T.ColorJitter, { hue = 0.6 }), 1, true)
    assert.matches('ColorJitter: brightness must be a non-negative', err_of(T.ColorJitter, { brightness = -1 }), 1, true)
    assert.matches("ColorJitter: unknown option 'brightnes'", err_of(T.ColorJitter, { brightnes = 1 }), 1, true)
    assert.matches("RandomErasing: value = 'random' is not supported", err_of(T.RandomErasing, { value = 'random' }), 1, true)
    assert.matches('RandomErasing: scale must have 0 <= min <= max <= 1', err_of(T.RandomErasing, { scale = { 0.5, 2 } }), 1, true)
    assert.matches('RandomErasing: p must be in [0, 1]', err_of(T.RandomErasing, { p = 1.5 }), 1, true)
    -- checked against the image in C
    local x = lunet.rand(4, 5, 5)
    assert.matches('color jitter\'s contrast and saturation need 1 or 3 channels, got 4',
      err_of(T.ColorJitter { contrast = 0.5 }, x), 1, true)
    assert.matches('erasing has 2 values for 4 channels', err_of(T.RandomErasing { value = { 1, 2 } }, x), 1, true)
    assert.matches('crop box 3x3 at (3, 0) does not fit the 5x5 image', err_of(F.resized_crop, x, 3, 0, 3, 3, 2), 1, true)
    assert.matches('erasing box 1x9 at (0, 0) does not fit', err_of(F.erase, x, 0, 0, 1, 9, 0), 1, true)
    assert.matches('crop 7x7 does not fit the input 6x6', err_of(T.Compose { T.Resize(6), T.RandomCrop(7) }, x), 1, true)
    assert.matches('more than one Normalize', err_of(T.Compose { T.Resize(6), T.Normalize(0, 1), T.Normalize(0, 1) }, x), 1, true)
    assert.matches('adjust_contrast: factor must be a non-negative number', err_of(F.adjust_contrast, x, -1), 1, true)
    assert.matches('at most 12 transforms', err_of(T.Compose { T.Resize(5), T.RandomVerticalFlip(), T.RandomVerticalFlip(),
      T.RandomVerticalFlip(), T.RandomVerticalFlip(), T.RandomVerticalFlip(), T.RandomVerticalFlip(),
      T.RandomVerticalFlip(), T.RandomVerticalFlip(), T.RandomVerticalFlip(), T.RandomVerticalFlip(),
      T.RandomVerticalFlip(), T.RandomVerticalFlip() }, x), 1, true)
    -- tostring round-trips the parameters
    assert.equal('RandomResizedCrop({4, 4}, {scale = {0.5, 1}, ratio = {1, 2}})',
      tostring(T.RandomResizedCrop(4, { scale = { 0.5, 1 }, ratio = { 1, 2 } })))
  end)
end)
