-- lunet.data.transforms: RandomApply, RandomChoice, RandomOrder (C group
-- ops), RandomPerspective / F.perspective, ElasticTransform /
-- F.elastic_transform, CenterCrop larger than the image, against torchvision
-- 0.14 (tools/gen_transforms_random_fixtures.py).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local data = lunet.data
local T = data.transforms
local F = T.functional
local err_of = fx.err_of

local function same(a, b) return a:size(1) == b:size(1) and #a:size() == #b:size() and fx.maxdiff(a, b) == 0 end

describe('data.transforms (random composition, perspective, elastic)', function()
  local t, cases = fx.load_fixture('data_transforms_random')

  it('F.perspective, F.elastic_transform, CenterCrop match torchvision within 1e-5', function()
    local n, worst = 0, 0
    for _, c in ipairs(cases) do
      local x, want = t[c.name .. '.x'], t[c.name .. '.out']
      local outs
      if c.op == 'perspective' then
        outs = { F.perspective(x, c.startpoints, c.endpoints, { interpolation = c.interpolation, fill = c.fill }) }
      elseif c.op == 'elastic' then
        -- (the tensor-op composition; the C op's sampler is checked against it below)
        outs = { F.elastic_transform(x, t[c.name .. '.disp'], c.interpolation, c.fill) }
      else
        -- the fixed path (CenterCrop alone) and the ops path (in a Compose with other ops)
        outs = { T.CenterCrop(c.size)(x), T.Compose { T.CenterCrop(c.size), T.RandomVerticalFlip(0) }(x) }
      end
      for _, got in ipairs(outs) do
        assert.same(want:size(), got:size(), c.name)
        local d = fx.maxdiff(got, want)
        assert.is_true(d < 1e-5, c.name .. ': ' .. d)
        worst = math.max(worst, d)
      end
      n = n + 1
    end
    assert.equal(17, n)
    print(('\n  perspective/elastic/center_crop vs torchvision: %d cases, max abs diff %.3g'):format(n, worst))
  end)

  it('CenterCrop larger than the image pads zeros before a Normalize (-mean/std), in a DataLoader too', function()
    local x = lunet.rand(2, 3, 4, 5)
    local got = T.Compose { T.CenterCrop { 6, 5 }, T.Normalize(0.5, 0.25) }(x)
    assert.same({ 2, 3, 6, 5 }, got:size())
    assert.is_true(fx.maxdiff(got:narrow(3, 1, 1), lunet.full({ 2, 3, 1, 5 }, -2)) == 0)
    assert.is_true(fx.maxdiff(got:narrow(3, 2, 4), (x - 0.5) / 0.25) < 1e-6)
    local l = data.DataLoader(data.TensorDataset(x), { batch_size = 2, transform = T.CenterCrop(7) })
    for bx in l:iter() do assert.same({ 2, 3, 7, 7 }, bx:size()) end
  end)

  it("ElasticTransform: torchvision's blurred uniform displacement, sampled as F.elastic_transform", function()
    local x = lunet.rand(3, 20, 23)
    for _, tf in ipairs { T.ElasticTransform(40, 2), T.ElasticTransform({ 30, 10 }, { 1.5, 2.5 }, { fill = 0.3 }),
        T.ElasticTransform(20, 0, 'nearest') } do
      for key = 1, 3 do
        local disp, noise = T.elastic_displacement(tf, 20, 23, { key = key, seed = 5 })
        assert.is_true(noise:min():item() >= -1 and noise:max():item() < 1, tostring(tf))
        local a, s = tf.alpha, tf.sigma
        local dx, dy = noise:narrow(1, 1, 1), noise:narrow(1, 2, 1)
        if s[1] > 0 then
          local function k(v) local q = math.floor(8 * v + 1) return q % 2 == 0 and q + 1 or q end
          dx = F.gaussian_blur(dx, { k(s[1]), k(s[1]) }, s)
          dy = F.gaussian_blur(dy, { k(s[2]), k(s[2]) }, s)
        end
        local want = lunet.stack({ dx[1] * a[1] / 20, dy[1] * a[2] / 23 }, 3):unsqueeze(1)
        assert.is_true(fx.maxdiff(disp, want) < 1e-6, tostring(tf))
        local got = tf(x, { key = key, seed = 5 })
        local ref = F.elastic_transform(x, disp, tf.interp, tf.fill)
        assert.is_true(fx.maxdiff(got, ref) < 1e-5, tostring(tf) .. ': ' .. fx.maxdiff(got, ref))
      end
    end
    local _, noise = T.elastic_displacement(T.ElasticTransform(), 60, 60, { key = 9 })
    assert.is_true(math.abs(noise:mean():item()) < 0.02 and math.abs(noise:std():item() - 1 / math.sqrt(3)) < 0.02)
    local a = T.elastic_displacement(T.ElasticTransform(), 30, 30, { key = 2 })
    assert.is_false(same(a, T.elastic_displacement(T.ElasticTransform(), 30, 30, { key = 3 })))
    assert.is_true(same(a, T.elastic_displacement(T.ElasticTransform(), 30, 30, { key = 2 })))
  end)

  it('RandomPerspective: with probability p, identity at distortion 0, draws keyed', function()
    local x = lunet.rand(3, 16, 18)
    assert.is_true(fx.maxdiff(T.RandomPerspective(0, { p = 1 })(x), x) < 1e-6)
    assert.is_true(same(T.RandomPerspective(0.5, { p = 0 })(x), x))
    local tf, hits = T.RandomPerspective(0.6, 0.3), 0
    for k = 1, 300 do
      local o = tf(x, { key = k, seed = 2 })
      if same(o, x) then hits = hits + 1 end
      if k < 4 then assert.is_true(same(o, tf(x, { key = k, seed = 2 }))) end
    end
    assert.is_true(hits > 180 and hits < 240, hits)
    -- the corners move at most distortion_scale * half the side inward
    local o = T.RandomPerspective(0.25, { p = 1, fill = 7 })(lunet.ones(1, 16, 16), { key = 4 })
    assert.equal(1, o[1][9][9]:item())
    assert.is_true(o:eq(7):sum():item() > 0)
  end)

  it('RandomApply: all of its list or none, with probability p; nested Compose', function()
    local x = lunet.rand(3, 6, 7)
    local a = T.RandomApply({ T.RandomVerticalFlip(1), T.Compose { T.Grayscale(3), T.RandomInvert(1) } }, 0.3)
    local want = F.invert(F.rgb_to_grayscale(F.vflip(x), 3))
    local hits = 0
    for k = 1, 400 do
      local o = a(x, { key = k, seed = 1 })
      if same(o, want) then hits = hits + 1 else assert.is_true(same(o, x)) end
    end
    assert.is_true(hits > 90 and hits < 150, hits)
    assert.is_true(same(T.RandomApply({ T.Resize(4) }, { p = 1 })(x), F.resize(x, 4)))
    assert.equal('RandomApply({RandomVerticalFlip(1)}, {p = 0.5})', tostring(T.RandomApply { T.RandomVerticalFlip(1) }))
  end)

  it('RandomChoice: one item by the weights p; RandomOrder: every item, each order equally often', function()
    local x = lunet.rand(3, 6, 7)
    local items = { T.RandomVerticalFlip(1), T.Grayscale(3), T.Compose { T.RandomInvert(1), T.RandomVerticalFlip(1) } }
    local outs = { F.vflip(x), F.rgb_to_grayscale(x, 3), F.vflip(F.invert(x)) }
    local ch = T.RandomChoice(items, { p = { 1, 0, 3 } })
    local count = { 0, 0, 0 }
    for k = 1, 800 do
      local o, hit = ch(x, { key = k, seed = 3 }), nil
      for q = 1, 3 do if same(o, outs[q]) then hit = q end end
      assert.is_true(hit ~= nil)
      count[hit] = count[hit] + 1
    end
    assert.equal(0, count[2])
    assert.is_true(count[1] > 160 and count[1] < 240, count[1])
    local eq, c2 = T.RandomChoice { T.RandomVerticalFlip(1), T.RandomInvert(1) }, 0
    for k = 1, 400 do if same(eq(x, { key = k }), F.invert(x)) then c2 = c2 + 1 end end
    assert.is_true(c2 > 160 and c2 < 240, c2)
    -- solarize and brightness do not commute: the two orders are told apart
    local s, b = T.RandomSolarize(0.5, 1), T.ColorJitter { brightness = { 1.6, 1.6 } }
    local ord, ab, ba = T.RandomOrder { s, b }, F.adjust_brightness(F.solarize(x, 0.5), 1.6), F.solarize(F.adjust_brightness(x, 1.6), 0.5)
    assert.is_true(fx.maxdiff(ab, ba) > 0.1)
    local n_ab = 0
    for k = 1, 400 do
      local o = ord(x, { key = k, seed = 8 })
      if fx.maxdiff(o, ab) < 1e-6 then n_ab = n_ab + 1 else assert.is_true(fx.maxdiff(o, ba) < 1e-6) end
    end
    assert.is_true(n_ab > 160 and n_ab < 240, n_ab)
    -- three items: all 6 orders turn up
    local tags = {}
    local o3 = T.RandomOrder { T.Pad(1), T.Resize { 9, 9 }, T.RandomCrop(5) }
    assert.matches('random order: its transforms change the size', err_of(o3, x))
    local o6 = T.RandomOrder { T.RandomSolarize(0.5, 1), T.ColorJitter { brightness = { 1.6, 1.6 } }, T.RandomInvert(1) }
    for k = 1, 300 do tags[tostring(o6(x, { key = k }):sum():item())] = true end
    local nt = 0
    for _ in pairs(tags) do nt = nt + 1 end
    assert.equal(6, nt)
  end)

  it('the same batches at any worker count; empty and non-contiguous inputs', function()
    local xu = (lunet.rand(10, 3, 12, 14) * 255):floor():byte()
    local ds = data.TensorDataset(xu, lunet.arange(0, 10))
    local tf = T.Compose { T.RandomCrop(12, { padding = 2 }),
      T.RandomApply({ T.ColorJitter { brightness = 0.4 }, T.RandomChoice { T.GaussianBlur(3), T.RandomInvert(1) } }),
      T.RandomOrder { T.RandomPerspective(), T.RandomSolarize(0.6) }, T.ElasticTransform(20, 1.5), T.Normalize(0.5, 0.25) }
    local runs = {}
    for _, w in ipairs { 0, 1, 2 } do
      local l = data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 7, workers = w, transform = tf })
      local xs = {}
      for _ = 1, 2 do for bx in l:iter() do xs[#xs + 1] = bx:clone() end end
      runs[w] = xs
    end
    for q = 1, #runs[0] do
      assert.is_true(same(runs[0][q], runs[1][q]) and same(runs[0][q], runs[2][q]))
    end
    local x = lunet.rand(2, 3, 9, 8)
    local nc = x:transpose(3, 4)
    assert.is_false(nc:is_contiguous())
    for _, f in ipairs { T.RandomPerspective(0.5, 1), T.ElasticTransform(10, 1), T.RandomApply { T.RandomInvert(1) },
        function(v) return F.perspective(v, { { 0, 0 }, { 8, 0 }, { 8, 7 }, { 0, 7 } }, { { 1, 1 }, { 7, 0 }, { 8, 6 }, { 0, 7 } }) end,
        function(v) return F.elastic_transform(v, lunet.zeros(1, v:size(-2), v:size(-1), 2) + 0.1, { fill = 0.5 }) end } do
      assert.is_true(same(f(nc), f(nc:contiguous())))
      assert.same({ 0, 3, 9, 8 }, f(lunet.rand(0, 3, 9, 8)):size())
    end
  end)

  it('bad parameters and options are named errors', function()
    local x = lunet.rand(3, 8, 9)
    assert.matches('RandomApply: expects a non-empty list of transforms', err_of(T.RandomApply, {}), 1, true)
    assert.matches('RandomApply: item 2 is not a lunet.data.transforms transform', err_of(T.RandomApply, { T.RandomInvert(), 3 }), 1, true)
    assert.matches('RandomApply: p must be in [0, 1], got 2', err_of(T.RandomApply, { T.RandomInvert() }, 2), 1, true)
    assert.matches("RandomApply: unknown option 'prob'", err_of(T.RandomApply, { T.RandomInvert() }, { prob = 1 }), 1, true)
    assert.matches('RandomChoice: p has 1 weights for 2 transforms', err_of(T.RandomChoice, { T.RandomInvert(), T.Grayscale(3) }, { p = { 1 } }), 1, true)
    assert.matches('RandomChoice: p[2] must be a finite number >= 0', err_of(T.RandomChoice, { T.RandomInvert(), T.Grayscale(3) }, { p = { 1, -1 } }), 1, true)
    assert.matches('RandomChoice: the weights p must have a positive sum', err_of(T.RandomChoice, { T.RandomInvert() }, { p = { 0 } }), 1, true)
    assert.matches("RandomChoice: unknown option 'weights'", err_of(T.RandomChoice, { T.RandomInvert() }, { weights = { 1 } }), 1, true)
    assert.matches('RandomOrder: takes only the list of transforms', err_of(T.RandomOrder, { T.RandomInvert() }, 0.5), 1, true)
    assert.matches('random apply: its transforms change the size', err_of(T.RandomApply { T.Resize(4) }, x), 1, true)
    assert.matches('random choice: item 2 gives', err_of(T.RandomChoice { T.Resize(4), T.RandomInvert() }, x), 1, true)
    assert.matches('RandomPerspective: distortion_scale must be in [0, 1], got 1.5', err_of(T.RandomPerspective, 1.5), 1, true)
    assert.matches('RandomPerspective: p must be in [0, 1]', err_of(T.RandomPerspective, 0.5, 3), 1, true)
    assert.matches("RandomPerspective: interpolation must be 'nearest' or 'bilinear'", err_of(T.RandomPerspective, 0.5, { interpolation = 'bicubic' }), 1, true)
    assert.matches("RandomPerspective: unknown option 'fil'", err_of(T.RandomPerspective, 0.5, { fil = 1 }), 1, true)
    assert.matches('perspective fill has 2 values for 3 channels', err_of(T.RandomPerspective(0.5, { fill = { 1, 2 } }), x), 1, true)
    assert.matches('perspective: endpoints must be 4 points', err_of(F.perspective, x, { { 0, 0 }, { 1, 0 }, { 1, 1 }, { 0, 1 } }, { { 0, 0 } }), 1, true)
    assert.matches('perspective: startpoints[3] must be {x, y}', err_of(F.perspective, x, { { 0, 0 }, { 1, 0 }, { 1 }, { 0, 1 } }, { { 0, 0 }, { 1, 0 }, { 1, 1 }, { 0, 1 } }), 1, true)
    assert.matches('perspective_coeffs: the points are degenerate', err_of(F.perspective, x, { { 0, 0 }, { 1, 0 }, { 2, 0 }, { 3, 0 } }, { { 0, 0 }, { 1, 0 }, { 2, 0 }, { 3, 0 } }), 1, true)
    assert.matches("perspective: unknown option 'mode'", err_of(F.perspective, x, { { 0, 0 }, { 1, 0 }, { 1, 1 }, { 0, 1 } }, { { 0, 0 }, { 1, 0 }, { 1, 1 }, { 0, 1 } }, { mode = 'nearest' }), 1, true)
    assert.matches('ElasticTransform: alpha must be a number >= 0', err_of(T.ElasticTransform, -1), 1, true)
    assert.matches('ElasticTransform: sigma must be a number >= 0', err_of(T.ElasticTransform, 5, { 1, 2, 3 }), 1, true)
    assert.matches('ElasticTransform: sigma must be both 0 or both > 0', err_of(T.ElasticTransform, 5, { 0, 2 }), 1, true)
    assert.matches("ElasticTransform: unknown option 'fills'", err_of(T.ElasticTransform, 5, 1, { fills = 0 }), 1, true)
    assert.matches('elastic sigma (5, 5) needs a blur kernel of 41, too large for the 8x9 image', err_of(T.ElasticTransform(), x), 1, true)
    assert.matches('elastic_transform: displacement must be (1, 8, 9, 2)', err_of(F.elastic_transform, x, lunet.zeros(1, 9, 8, 2)), 1, true)
    assert.matches('elastic_transform: displacement must be a tensor', err_of(F.elastic_transform, x, 1), 1, true)
    assert.matches("elastic_transform: unknown option 'alpha'", err_of(F.elastic_transform, x, lunet.zeros(1, 8, 9, 2), { alpha = 1 }), 1, true)
    assert.matches('elastic_displacement: no ElasticTransform', err_of(T.elastic_displacement, T.RandomInvert(), 5, 5), 1, true)
    assert.equal('RandomPerspective(0.5, {p = 0.5, interpolation = "bilinear", fill = {0}})', tostring(T.RandomPerspective()))
    assert.equal('ElasticTransform({50, 50}, {5, 5}, {interpolation = "bilinear", fill = {0}})', tostring(T.ElasticTransform()))
  end)
end)
