-- lunet.data.transforms: hue, Grayscale/RandomGrayscale, RandomRotation,
-- RandomAffine, GaussianBlur, Pad (C ops run in the Compose's order) and
-- their fixed-parameter functional forms, against torchvision 0.14
-- (tools/gen_transforms_more2_fixtures.py).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local data = lunet.data
local T = data.transforms
local F = T.functional
local err_of = fx.err_of

describe('data.transforms (hue, grayscale, rotation, affine, blur, pad)', function()
  local t, cases = fx.load_fixture('data_transforms_more2')

  local function run(c, x)
    if c.op == 'hue' then return F.adjust_hue(x, c.factor)
    elseif c.op == 'gray' then return F.rgb_to_grayscale(x, c.n)
    elseif c.op == 'rotate' then
      return F.rotate(x, c.angle, { interpolation = c.interpolation, expand = c.expand, center = c.center, fill = c.fill })
    elseif c.op == 'affine' then
      return F.affine(x, c.angle, c.translate, c.scale, c.shear, { interpolation = c.interpolation, fill = c.fill,
        center = c.center })
    elseif c.op == 'blur' then return F.gaussian_blur(x, c.kernel_size, c.sigma)
    else return F.pad(x, c.padding, c.fill, c.padding_mode) end
  end

  it('fixed-parameter forms match torchvision', function()
    local n = 0
    for _, c in ipairs(cases) do
      local x, want = t[c.name .. '.x'], t[c.name .. '.out']
      local got = run(c, x)
      assert.same(want:size(), got:size(), c.name)
      local d = fx.maxdiff(got, want)
      assert.is_true(d < 2e-6, c.name .. ': ' .. d)
      n = n + 1
    end
    assert.equal(36, n)
  end)

  it('take uint8 (scaled by 1/255 first), batches, non-contiguous and empty inputs', function()
    local xu = (lunet.rand(2, 3, 7, 6) * 255):floor():byte()
    local xf = xu:float() / 255
    for _, tf in ipairs { T.Pad({ 1, 2, 3, 4 }, { padding_mode = 'reflect' }), T.GaussianBlur(3, { sigma = 0.8 }),
      T.RandomRotation({ 25, 25 }, { interpolation = 'bilinear' }), T.Grayscale(3) } do
      assert.is_true(fx.maxdiff(tf(xu), tf(xf)) < 1e-6, tostring(tf))
      assert.is_true(fx.maxdiff(tf(xf)[2], tf(xf[2])) == 0, tostring(tf))
    end
    local nc = lunet.rand(3, 6, 7):transpose(2, 3)   -- (3, 7, 6), not contiguous
    assert.is_false(nc:is_contiguous())
    assert.is_true(fx.maxdiff(F.rotate(nc, 40), F.rotate(nc:contiguous(), 40)) == 0)
    assert.same({ 0, 1, 7, 6 }, T.Grayscale()(lunet.rand(0, 3, 7, 6)):size())
    assert.same({ 0, 3, 9, 12 }, T.Pad({ 3, 1 })(lunet.rand(0, 3, 7, 6)):size())
  end)

  it('Grayscale(1) makes one channel: a Normalize after it takes one mean, the loader batches (N, 1, H, W)', function()
    local x = lunet.rand(3, 5, 4)
    local tf = T.Compose { T.Grayscale(), T.Normalize(0.5, 0.25) }
    assert.is_true(fx.maxdiff(tf(x), (F.rgb_to_grayscale(x) - 0.5) / 0.25) < 1e-6)
    local ds = data.TensorDataset((lunet.rand(6, 3, 5, 4) * 255):floor():byte(), lunet.arange(0, 6))
    for bx in data.DataLoader(ds, { batch_size = 4, transform = tf }):iter() do
      assert.equal(1, bx:size(2))
    end
    assert.matches('normalize has 3 mean/std values for 1 channels',
      err_of(T.Compose { T.Grayscale(), T.Normalize({ 1, 2, 3 }, { 1, 1, 1 }) }, x), 1, true)
    -- RandomGrayscale keeps 3 equal channels on about p of the samples
    local grays = 0
    for k = 1, 300 do
      local o = T.RandomGrayscale(0.3)(x, { key = k, seed = 2 })
      if fx.maxdiff(o, F.rgb_to_grayscale(x, 3)) == 0 then grays = grays + 1 else assert.is_true(fx.maxdiff(o, x) == 0) end
    end
    assert.is_true(grays > 60 and grays < 120, 'grays ' .. grays)
  end)

  it('ColorJitter hue: shifts uniform in [-h, h]; with fixed factors one of the 24 orders of the four', function()
    -- a pure red pixel shifted by f (|f| < 1/6) becomes (1, 6f, 0) or (1, 0, -6f)
    local x = lunet.stack({ lunet.ones(2, 2), lunet.zeros(2, 2), lunet.zeros(2, 2) }, 1)
    local tf = T.ColorJitter { hue = 0.15 }
    local lo, hi, sum = 1, -1, 0
    for k = 1, 400 do
      local o = tf(x, { key = k, seed = 6 })
      local f = (o[2][1][1]:item() - o[3][1][1]:item()) / 6
      lo, hi, sum = math.min(lo, f), math.max(hi, f), sum + f
    end
    assert.is_true(lo >= -0.15 - 1e-6 and lo < -0.14 and hi <= 0.15 + 1e-6 and hi > 0.14, lo .. ' ' .. hi)
    assert.is_true(math.abs(sum / 400) < 0.015, 'mean ' .. sum / 400)
    assert.is_true(fx.maxdiff(T.ColorJitter { hue = { 0.2, 0.2 } }(x, { key = 3 }), F.adjust_hue(x, 0.2)) == 0)
    local img = lunet.rand(3, 4, 5)
    local b, c, s, h = F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue
    local fs = { function(v) return b(v, 1.3) end, function(v) return c(v, 0.6) end,
      function(v) return s(v, 1.7) end, function(v) return h(v, -0.3) end }
    local want = {}
    local function perms(a, n)
      if n == 0 then
        local v = img
        for _, q in ipairs(a) do v = fs[q](v) end
        want[#want + 1] = v
        return
      end
      for i = 1, n do a[n], a[i] = a[i], a[n]; perms(a, n - 1); a[n], a[i] = a[i], a[n] end
    end
    perms({ 1, 2, 3, 4 }, 4)
    local cj = T.ColorJitter { brightness = { 1.3, 1.3 }, contrast = { 0.6, 0.6 }, saturation = { 1.7, 1.7 }, hue = { -0.3, -0.3 } }
    local used, distinct = {}, 0
    for k = 1, 80 do
      local o, which = cj(img, { key = k }), nil
      for q, w in ipairs(want) do if fx.maxdiff(o, w) < 1e-6 then which = q end end
      assert.is_not_nil(which, 'key ' .. k)
      if not used[which] then used[which], distinct = true, distinct + 1 end
    end
    assert.is_true(distinct >= 14, 'orders ' .. distinct)
  end)

  -- (x, y) pixel-coordinate planes: bilinear sampling is exact on them, so
  -- the output's centre pixels give back the inverse map's slope and offset
  local function coords(H, W)
    local r = lunet.arange(0, H):float():reshape(H, 1):expand(H, W)
    local c = lunet.arange(0, W):float():reshape(1, W):expand(H, W)
    return lunet.stack({ c, r }, 1)
  end

  it('RandomRotation: angles uniform in degrees; {a, a} with expand is rotate(expand = true)', function()
    local x = coords(41, 41)
    local tf = T.RandomRotation({ -10, 30 }, { interpolation = 'bilinear' })
    local lo, hi, sum = 99, -99, 0
    for k = 1, 300 do
      local o = tf(x, { key = k, seed = 3 })
      local dx, dy = o[1][21][22]:item() - o[1][21][21]:item(), o[2][21][22]:item() - o[2][21][21]:item()
      local a = math.deg(math.atan2(dy, dx))   -- turned by a: a step along an output row is (cos a, sin a) in the source
      assert.is_true(math.abs(dx * dx + dy * dy - 1) < 1e-4)
      lo, hi, sum = math.min(lo, a), math.max(hi, a), sum + a
    end
    assert.is_true(lo >= -10.001 and lo < -9 and hi <= 30.001 and hi > 29, lo .. ' ' .. hi)
    assert.is_true(math.abs(sum / 300 - 10) < 1.5, 'mean ' .. sum / 300)
    local y = lunet.rand(3, 9, 6)
    local fixed = T.RandomRotation({ 35, 35 }, { expand = true, fill = { 0.1, 0.2, 0.3 } })
    local want = F.rotate(y, 35, { expand = true, fill = { 0.1, 0.2, 0.3 } })
    assert.same(want:size(), fixed(y, { key = 5 }):size())
    assert.is_true(fx.maxdiff(fixed(y, { key = 5 }), want) == 0)
    -- fill 0 (the transform's default) goes through the fill mask: rotate(fill = {0}), not rotate()
    assert.is_true(fx.maxdiff(T.RandomRotation({ 20, 20 }, 'bilinear')(y), F.rotate(y, 20, 'bilinear', false, nil, 0)) == 0)
  end)

  it('RandomAffine: integer translations within translate * size, scale and angle in range', function()
    local H, W = 40, 50
    local x = coords(H, W)
    local tf = T.RandomAffine(0, { translate = { 0.1, 0.2 }, scale = { 0.8, 1.25 }, interpolation = 'bilinear' })
    local txs, tys, smin, smax = {}, {}, 9, 0
    for k = 1, 300 do
      local o = tf(x, { key = k, seed = 11, epoch = 1 })
      local s = 1 / (o[1][21][26]:item() - o[1][21][25]:item())
      -- source column of output column j (0-based): (j + 0.5 - W/2 - tx) / s + W/2 - 0.5
      local tx = (24 + 0.5 - W / 2) - s * (o[1][21][25]:item() - W / 2 + 0.5)
      local ty = (20 + 0.5 - H / 2) - s * (o[2][21][25]:item() - H / 2 + 0.5)
      assert.is_true(math.abs(tx - math.floor(tx + 0.5)) < 1e-3 and math.abs(ty - math.floor(ty + 0.5)) < 1e-3, tx .. ' ' .. ty)
      tx, ty = math.floor(tx + 0.5), math.floor(ty + 0.5)
      assert.is_true(math.abs(tx) <= 5 and math.abs(ty) <= 8)
      txs[tx], tys[ty] = true, true
      smin, smax = math.min(smin, s), math.max(smax, s)
    end
    for v = -4, 4 do assert.is_true(txs[v], 'tx ' .. v) end
    for v = -7, 7 do assert.is_true(tys[v], 'ty ' .. v) end
    assert.is_true(smin >= 0.8 - 1e-4 and smin < 0.82 and smax <= 1.25 + 1e-4 and smax > 1.22, smin .. ' ' .. smax)
    -- degrees, scale {1, 1}, shear {s, s}: the same as affine with those, fill 0 through the mask
    local y = lunet.rand(3, 8, 9)
    local one = T.RandomAffine({ 12, 12 }, { shear = { 7, 7, -3, -3 }, interpolation = 'bilinear' })
    assert.is_true(fx.maxdiff(one(y, { key = 2 }), F.affine(y, 12, { 0, 0 }, 1, { 7, -3 }, { interpolation = 'bilinear', fill = 0 })) < 1e-6)
  end)

  it('GaussianBlur: one sigma uniform in the range for both axes', function()
    local x = lunet.zeros(1, 15, 15)
    x[1][8][8] = 1   -- the output is the 2-d kernel: tap ratios give sigma
    local tf = T.GaussianBlur({ 5, 7 }, { sigma = { 0.5, 1.5 } })
    local lo, hi = 9, 0
    for k = 1, 300 do
      local o = tf(x, { key = k, seed = 1 })
      local sx = math.sqrt(-0.5 / math.log(o[1][8][9]:item() / o[1][8][8]:item()))
      local sy = math.sqrt(-0.5 / math.log(o[1][9][8]:item() / o[1][8][8]:item()))
      assert.is_true(math.abs(sx - sy) < 1e-3 * sx, sx .. ' ' .. sy)
      lo, hi = math.min(lo, sx), math.max(hi, sx)
    end
    assert.is_true(lo >= 0.5 - 1e-3 and lo < 0.52 and hi <= 1.5 + 1e-3 and hi > 1.48, lo .. ' ' .. hi)
    assert.is_true(fx.maxdiff(T.GaussianBlur(3, 0.9)(x), F.gaussian_blur(x, 3, 0.9)) == 0)
  end)

  it('the same batches via the DataLoader at 0, 1 and 2 workers and via tf(x, {key, seed, epoch})', function()
    local xu = (lunet.rand(10, 3, 12, 14) * 255):floor():byte()
    local ds = data.TensorDataset(xu, lunet.arange(0, 10))
    local tf = T.Compose { T.Pad(2, { padding_mode = 'symmetric' }), T.RandomRotation(20), T.RandomAffine(10,
      { translate = { 0.1, 0.1 }, scale = { 0.9, 1.1 }, shear = 5, interpolation = 'bilinear' }), T.CenterCrop(12),
      T.ColorJitter(0.3, 0.3, 0.3, 0.1), T.RandomGrayscale(0.3), T.GaussianBlur(3), T.Normalize(0.5, 0.25) }
    local runs = {}
    for _, w in ipairs { 0, 1, 2 } do
      local l = data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 7, workers = w, transform = tf })
      local xs, ys = {}, {}
      for _ = 1, 2 do for bx, by in l:iter() do xs[#xs + 1], ys[#ys + 1] = bx:clone(), by:clone() end end
      runs[w] = { xs, ys }
    end
    for q = 1, #runs[0][1] do
      assert.is_true(fx.maxdiff(runs[0][1][q], runs[1][1][q]) == 0)
      assert.is_true(fx.maxdiff(runs[0][1][q], runs[2][1][q]) == 0)
    end
    local bx, by = runs[0][1][1], runs[0][2][1]
    for k = 1, by:size(1) do
      local r = by[k]:item()
      assert.is_true(fx.maxdiff(bx[k], tf(xu[r + 1], { key = r + 1, seed = 7, epoch = 1 })) == 0)
    end
    assert.is_true(fx.maxdiff(tf(xu[1], { key = 1, seed = 7, epoch = 1 }), tf(xu[1], { key = 1, seed = 7, epoch = 2 })) > 0)
  end)

  it('errors name the transform and the problem', function()
    local x = lunet.rand(3, 5, 5)
    assert.matches('Grayscale: num_output_channels must be 1 or 3', err_of(T.Grayscale, 2), 1, true)
    assert.matches('RandomGrayscale: p must be in [0, 1]', err_of(T.RandomGrayscale, -0.1), 1, true)
    assert.matches('ColorJitter: hue must be in [0, 0.5]', err_of(T.ColorJitter, { hue = 0.6 }), 1, true)
    assert.matches('ColorJitter: hue must have -0.5 <= min <= max <= 0.5', err_of(T.ColorJitter, { hue = { -0.6, 0 } }), 1, true)
    assert.matches('adjust_hue: hue_factor must be in [-0.5, 0.5]', err_of(F.adjust_hue, x, 0.7), 1, true)
    assert.matches('RandomRotation: degrees must be a number >= 0', err_of(T.RandomRotation, -5), 1, true)
    assert.matches('RandomRotation: degrees must have', err_of(T.RandomRotation, { 10, -10 }), 1, true)
    assert.matches("RandomRotation: interpolation must be 'nearest' or 'bilinear', got 'bicubic'",
      err_of(T.RandomRotation, 10, { interpolation = 'bicubic' }), 1, true)
    assert.matches('RandomRotation: expand = true changes the size', err_of(T.RandomRotation, 10, { expand = true }), 1, true)
    assert.matches("RandomRotation: unknown option 'expnd'", err_of(T.RandomRotation, 10, { expnd = true }), 1, true)
    assert.matches('rotate: angle must be a finite number', err_of(F.rotate, x, 0 / 0), 1, true)
    assert.matches('RandomAffine: translate must be {a, b} with values in [0, 1]', err_of(T.RandomAffine, 0, { translate = { 0.5, 2 } }), 1, true)
    assert.matches('RandomAffine: scale must have', err_of(T.RandomAffine, 0, { scale = { 0, 1 } }), 1, true)
    assert.matches('RandomAffine: shear must be a number, {min, max}', err_of(T.RandomAffine, 0, { shear = { 1, 2, 3 } }), 1, true)
    assert.matches('affine: scale must be a positive number', err_of(F.affine, x, 0, { 0, 0 }, 0, 0), 1, true)
    assert.matches('affine fill has 2 values for 3 channels', err_of(F.affine, x, 5, { 0, 0 }, 1, 0, { fill = { 1, 2 } }), 1, true)
    assert.matches('GaussianBlur: kernel_size must be an odd positive integer', err_of(T.GaussianBlur, 4), 1, true)
    assert.matches('GaussianBlur: sigma must have', err_of(T.GaussianBlur, 3, { sigma = { 2, 1 } }), 1, true)
    assert.matches('gaussian blur kernel 11x3 (x by y) is too large for the 5x5 image', err_of(F.gaussian_blur, x, { 11, 3 }), 1, true)
    assert.matches('Pad: padding must be an integer >= 0', err_of(T.Pad, { 1, 2, 3 }), 1, true)
    assert.matches("Pad: padding_mode must be 'constant', 'edge', 'reflect' or 'symmetric'", err_of(T.Pad, 1, { padding_mode = 'wrap' }), 1, true)
    assert.matches("Pad: option 'fill' must be a number", err_of(T.Pad, 1, { fill = { 1, 2 } }), 1, true)
    assert.matches('reflect padding (5, 0, 0, 0) must be less than the 5x5 image', err_of(F.pad, x, { 5, 0, 0, 0 }, 0, 'reflect'), 1, true)
    assert.matches('grayscale needs 1 or 3 channels, got 2', err_of(T.RandomGrayscale(0.5), lunet.rand(2, 4, 4)), 1, true)
    assert.matches("hue needs 1 or 3 channels, got 4", err_of(T.ColorJitter { hue = 0.1 }, lunet.rand(4, 4, 4)), 1, true)
    assert.equal('RandomRotation({-10, 10}, {interpolation = "nearest", expand = false, fill = {0}})', tostring(T.RandomRotation(10)))
    assert.equal('ColorJitter{brightness = {0.5, 1.5}, hue = {-0.2, 0.2}}', tostring(T.ColorJitter(0.5, 0, 0, 0.2)))
    assert.equal('Pad({1, 2, 1, 2}, {fill = 0, padding_mode = "edge"})', tostring(T.Pad({ 1, 2 }, 0, 'edge')))
  end)
end)
