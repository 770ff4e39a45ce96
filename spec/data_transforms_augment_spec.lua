-- lunet.data.transforms: the AutoAugment family (posterize, solarize,
-- autocontrast, equalize, sharpness, invert) and the policies AutoAugment,
-- RandAugment, TrivialAugmentWide, against torchvision 0.14
-- (tools/gen_transforms_augment_fixtures.py).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local data = lunet.data
local T = data.transforms
local F = T.functional
local err_of = fx.err_of

describe('data.transforms (AutoAugment family)', function()
  local t, cases = fx.load_fixture('data_transforms_augment')
  local spaces
  for _, c in ipairs(cases) do if c.op == 'spaces' then spaces = c.spaces end end

  local function run(c, x)
    if c.op == 'posterize' then return F.posterize(x, c.bits)
    elseif c.op == 'solarize' then return F.solarize(x, c.threshold)
    elseif c.op == 'autocontrast' then return F.autocontrast(x)
    elseif c.op == 'equalize' then return F.equalize(x)
    elseif c.op == 'sharpness' then return F.adjust_sharpness(x, c.factor)
    elseif c.op == 'invert' then return F.invert(x)
    else return F._apply_op(x, c.name_, c.magnitude, { interpolation = c.interpolation, fill = c.fill }) end
  end

  it('the single ops and _apply_op match torchvision (uint8 ops: its uint8 result / 255) within 2e-6', function()
    local n, worst = 0, 0
    for _, c in ipairs(cases) do
      if c.op ~= 'spaces' then
        local x, want = t[c.name .. '.x'], t[c.name .. '.out']
        local got = run(c, x)
        assert.same(want:size(), got:size(), c.name)
        local d = fx.maxdiff(got, want)
        assert.is_true(d < 2e-6, c.name .. ' (' .. c.op .. ' ' .. tostring(c.name_) .. '): ' .. d)
        if c.u8 then   -- the float image of the same pixels gives the same
          assert.is_true(fx.maxdiff(run(c, x:float() / 255), want) < 2e-6, c.name)
        end
        worst, n = math.max(worst, d), n + 1
      end
    end
    assert.equal(109, n)
    print(('\n  AutoAugment family vs torchvision: %d cases, max abs diff %.3g'):format(n, worst))
  end)

  local function img(c, h, w, seed)   -- a float image of uint8 pixels
    lunet.manual_seed(seed or 1)
    return (lunet.rand(c, h, w) * 255):floor() / 255
  end

  it('Random* forms: with probability p the F form, else the image as it is', function()
    local x, xe = img(3, 6, 7), img(3, 20, 30)
    local forms = {
      { T.RandomPosterize(2, 0.3), F.posterize(x, 2), x }, { T.RandomSolarize(0.5, { p = 0.3 }), F.solarize(x, 0.5), x },
      { T.RandomAutocontrast(0.3), F.autocontrast(x), x }, { T.RandomEqualize { p = 0.3 }, F.equalize(xe), xe },
      { T.RandomAdjustSharpness(2, 0.3), F.adjust_sharpness(x, 2), x }, { T.RandomInvert(0.3), F.invert(x), x } }
    for _, f in ipairs(forms) do
      local tf, want, src, hits = f[1], f[2], f[3], 0
      assert.is_true(fx.maxdiff(want, src) > 0, tostring(tf))
      for k = 1, 300 do
        local o = tf(src, { key = k, seed = 4 })
        if fx.maxdiff(o, want) == 0 then hits = hits + 1 else assert.is_true(fx.maxdiff(o, src) == 0, tostring(tf)) end
      end
      assert.is_true(hits > 60 and hits < 120, tostring(tf) .. ': ' .. hits)
    end
    assert.is_true(fx.maxdiff(T.RandomInvert(0)(x), x) == 0)
    assert.is_true(fx.maxdiff(T.RandomInvert(1)(x), 1 - x) == 0)
    assert.is_true(fx.maxdiff(T.RandomEqualize()(xe, { key = 3 }), T.RandomEqualize()(xe, { key = 3 })) == 0)
  end)

  it('take batches, non-contiguous and empty inputs; 2-pixel sides leave sharpness as it is', function()
    local xb = lunet.stack({ img(3, 9, 8, 1), img(3, 9, 8, 2) }, 1)
    for _, f in ipairs { function(v) return F.equalize(v) end, function(v) return F.adjust_sharpness(v, 1.5) end,
      function(v) return F._apply_op(v, 'Rotate', 20) end } do
      assert.is_true(fx.maxdiff(f(xb)[2], f(xb[2])) == 0)
      local nc = xb[1]:transpose(2, 3)
      assert.is_false(nc:is_contiguous())
      assert.is_true(fx.maxdiff(f(nc), f(nc:contiguous())) == 0)
      assert.same({ 0, 3, 9, 8 }, f(lunet.rand(0, 3, 9, 8)):size())
    end
    local thin = lunet.rand(3, 2, 9)
    assert.is_true(fx.maxdiff(F.adjust_sharpness(thin, 3), thin) == 0)
  end)

  local function find(list, v)
    for i, u in ipairs(list) do if u == v then return i end end
  end

  it("RandAugment: num_ops uniform picks of the 14 ops at torchvision's magnitudes[magnitude], both signs", function()
    for _, sp in ipairs(spaces.rand) do
      for _, m in ipairs { sp.bins - 1, math.floor(sp.bins / 2) } do
        local tf = T.RandAugment { num_ops = 3, magnitude = m, num_magnitude_bins = sp.bins }
        local count, neg, pos = {}, 0, 0
        for k = 1, 700 do
          local names, mags = T.policy_choices(tf, sp.h, sp.w, { key = k, seed = 5 })
          assert.equal(3, #names)
          for q, nm in ipairs(names) do
            local tab = sp.ops[nm]
            assert.is_not_nil(tab, nm)
            local want = #tab > 0 and tab[m + 1] or 0
            assert.equal(want, math.abs(mags[q]), nm .. ' bin ' .. m)
            if not sp.signed[nm] then assert.is_true(mags[q] >= 0, nm) end
            if sp.signed[nm] and want ~= 0 then
              if mags[q] < 0 then neg = neg + 1 else pos = pos + 1 end
            end
            count[nm] = (count[nm] or 0) + 1
          end
        end
        for nm in pairs(sp.ops) do
          assert.is_true((count[nm] or 0) > 100 and count[nm] < 200, nm .. ': ' .. tostring(count[nm]))
        end
        if pos + neg > 0 then assert.is_true(math.abs(pos - neg) < 0.15 * (pos + neg), pos .. ' ' .. neg) end
      end
    end
    local names = T.policy_choices(T.RandAugment { num_ops = 0 }, 8, 8)
    assert.equal(0, #names)
  end)

  it("TrivialAugmentWide: one op of the 14, a uniform bin of torchvision's wide space", function()
    for _, sp in ipairs(spaces.wide) do
      local tf = T.TrivialAugmentWide { num_magnitude_bins = sp.bins }
      local count, bins_seen, nbins = {}, {}, 0
      for k = 1, 1400 do
        local names, mags = T.policy_choices(tf, 32, 32, { key = k, seed = 9, epoch = 2 })
        assert.equal(1, #names)
        local nm, tab = names[1], sp.ops[names[1]]
        assert.is_not_nil(tab, nm)
        if #tab == 0 then assert.equal(0, mags[1], nm)
        else
          local b = find(tab, math.abs(mags[1]))
          assert.is_not_nil(b, nm .. ' ' .. mags[1])
          if nm ~= 'Posterize' and not bins_seen[b] then bins_seen[b], nbins = true, nbins + 1 end
        end
        count[nm] = (count[nm] or 0) + 1
      end
      assert.equal(sp.bins, nbins)
      for nm in pairs(sp.ops) do assert.is_true((count[nm] or 0) > 60 and count[nm] < 140, nm .. ': ' .. tostring(count[nm])) end
    end
  end)

  local SIGNED = { ShearX = true, ShearY = true, TranslateX = true, TranslateY = true, Rotate = true, Brightness = true,
    Color = true, Contrast = true, Sharpness = true }
  it("AutoAugment: a sub-policy's ops with their probabilities and torchvision's magnitudes at 10 bins", function()
    for pol, subs in pairs(spaces.auto) do
      local tf, applied, expect, signs = T.AutoAugment { policy = pol }, 0, 0, { 0, 0 }
      for _, sub in ipairs(subs) do expect = expect + (sub[1][2] + sub[2][2]) / #subs end
      local N = 2000
      for k = 1, N do
        local names, mags = T.policy_choices(tf, 32, 32, { key = k, seed = 1 })
        applied = applied + #names
        local ok = false   -- some sub-policy applies these ops (a subsequence of its two) at its magnitudes
        for _, sub in ipairs(subs) do
          for _, pick in ipairs { { 1, 2 }, { 1 }, { 2 }, {} } do
            local same = #pick == #names
            for q = 1, #names do
              local step = sub[pick[q] or 1]
              same = same and step[1] == names[q] and step[3] == math.abs(mags[q])
            end
            ok = ok or same
          end
        end
        assert.is_true(ok, pol .. ' key ' .. k .. ': ' .. table.concat(names, ', '))
        for q = 1, #names do if SIGNED[names[q]] and mags[q] ~= 0 then signs[mags[q] < 0 and 1 or 2] = signs[mags[q] < 0 and 1 or 2] + 1 end end
      end
      assert.is_true(math.abs(applied / N - expect) < 0.06, pol .. ': ' .. applied / N .. ' vs ' .. expect)
      assert.is_true(signs[1] > 0.4 * (signs[1] + signs[2]) and signs[2] > 0.4 * (signs[1] + signs[2]), pol)
    end
  end)

  it('each policy applies its choices as _apply_op does, the same at any worker count, keyed by seed', function()
    local x = img(3, 16, 18, 3)
    for _, tf in ipairs { T.AutoAugment { policy = 'svhn' }, T.RandAugment { num_ops = 4, magnitude = 20 },
      T.TrivialAugmentWide { interpolation = 'bilinear', fill = { 0.1, 0.2, 0.3 } },
      T.AutoAugment('cifar10', 'bilinear', 0.5) } do
      for k = 1, 25 do
        local names, mags = T.policy_choices(tf, 16, 18, { key = k, seed = 8 })
        local want = x
        for q = 1, #names do want = F._apply_op(want, names[q], mags[q], { interpolation = tf.interp, fill = tf.fill }) end
        assert.is_true(fx.maxdiff(tf(x, { key = k, seed = 8 }), want) == 0, tostring(tf) .. ' key ' .. k)
      end
      assert.is_true(fx.maxdiff(tf(x, { key = 1, seed = 8 }), tf(x, { key = 1, seed = 8 })) == 0)
    end
    local xu = (lunet.rand(10, 3, 12, 14) * 255):floor():byte()
    local ds = data.TensorDataset(xu, lunet.arange(0, 10))
    local tf = T.Compose { T.RandomCrop(12, { padding = 2 }), T.AutoAugment { policy = 'cifar10' }, T.RandAugment(),
      T.TrivialAugmentWide(), T.RandomPosterize(5), T.RandomSolarize(0.7), T.RandomAutocontrast(), T.RandomEqualize(),
      T.RandomAdjustSharpness(1.8), T.RandomInvert(0.2), T.Normalize(0.5, 0.25) }
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
    local a, b = tf(xu[1], { key = 1, seed = 7 }), tf(xu[1], { key = 1, seed = 8 })
    assert.is_true(fx.maxdiff(a, b) > 0)
  end)

  it('errors name the transform and the problem', function()
    local x = lunet.rand(3, 5, 5)
    assert.matches('RandomPosterize: bits must be an integer in [0, 8], got 9', err_of(T.RandomPosterize, 9), 1, true)
    assert.matches('posterize: bits must be an integer in [0, 8], got 2.5', err_of(F.posterize, x, 2.5), 1, true)
    assert.matches('solarize: threshold must be a number <= 1', err_of(F.solarize, x, 128), 1, true)
    assert.matches('RandomSolarize: threshold must be a number <= 1', err_of(T.RandomSolarize, 0 / 0), 1, true)
    assert.matches('adjust_sharpness: sharpness_factor must be a non-negative number', err_of(F.adjust_sharpness, x, -1), 1, true)
    assert.matches('RandomInvert: p must be in [0, 1], got 2', err_of(T.RandomInvert, 2), 1, true)
    assert.matches("RandomEqualize: unknown option 'q'", err_of(T.RandomEqualize, { q = 1 }), 1, true)
    assert.matches("RandomAdjustSharpness: unknown option 'prob'", err_of(T.RandomAdjustSharpness, 2, { prob = 1 }), 1, true)
    assert.matches("AutoAugment: policy must be 'imagenet', 'cifar10' or 'svhn', got 'mnist'", err_of(T.AutoAugment, { policy = 'mnist' }), 1, true)
    assert.matches("AutoAugment: unknown option 'polcy'", err_of(T.AutoAugment, { polcy = 'svhn' }), 1, true)
    assert.matches("RandAugment: interpolation must be 'nearest' or 'bilinear', got 'bicubic'", err_of(T.RandAugment, { interpolation = 'bicubic' }), 1, true)
    assert.matches('RandAugment: magnitude must be an integer in [0, 30], got 31', err_of(T.RandAugment, { magnitude = 31 }), 1, true)
    assert.matches('RandAugment: num_ops must be an integer in [0, 64], got 65', err_of(T.RandAugment, 65), 1, true)
    assert.matches('RandAugment: num_magnitude_bins must be an integer in [2,', err_of(T.RandAugment, { num_magnitude_bins = 1 }), 1, true)
    assert.matches('TrivialAugmentWide: num_magnitude_bins must be an integer', err_of(T.TrivialAugmentWide, 2.5), 1, true)
    assert.matches("TrivialAugmentWide: unknown option 'bins'", err_of(T.TrivialAugmentWide, { bins = 3 }), 1, true)
    assert.matches('TrivialAugmentWide: fill must be finite', err_of(T.TrivialAugmentWide, { fill = 1 / 0 }), 1, true)
    assert.matches('autoaugment fill has 2 values for 3 channels', err_of(T.AutoAugment { fill = { 1, 2 } }, x), 1, true)
    assert.matches('posterize needs 1 or 3 channels, got 4', err_of(F.posterize, lunet.rand(4, 5, 5), 3), 1, true)
    assert.matches('autoaugment needs 1 or 3 channels, got 2', err_of(T.RandAugment(), lunet.rand(2, 5, 5)), 1, true)
    assert.matches('_apply_op: unknown op Blur', err_of(F._apply_op, x, 'Blur', 1), 1, true)
    assert.matches('_apply_op: bits must be an integer in [0, 8], got 9', err_of(F._apply_op, x, 'Posterize', 9.5), 1, true)
    assert.matches('_apply_op: Brightness magnitude must be >= -1', err_of(F._apply_op, x, 'Brightness', -2), 1, true)
    assert.matches('policy_choices: no AutoAugment', err_of(T.policy_choices, T.RandomInvert(), 5, 5), 1, true)
    assert.equal('RandAugment{num_ops = 2, magnitude = 9, num_magnitude_bins = 31, interpolation = "nearest", fill = nil}',
      tostring(T.RandAugment()))
    assert.equal('AutoAugment{policy = "svhn", interpolation = "bilinear", fill = {0.5}}', tostring(T.AutoAugment('svhn', 'bilinear', 0.5)))
    assert.equal('RandomPosterize(4, {p = 0.5})', tostring(T.RandomPosterize(4)))
    assert.equal('RandomInvert({p = 0.25})', tostring(T.RandomInvert(0.25)))
  end)
end)
