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
end)
