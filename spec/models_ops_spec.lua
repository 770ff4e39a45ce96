-- lunet.models.ops (torchvision.ops.misc's Conv2dNormActivation and
-- SqueezeExcitation, torchvision.ops' stochastic_depth) against
-- torchvision 0.14 (spec/fixtures/models_ops.safetensors,
-- tools/gen_models_ops_fixtures.py): module trees, state_dict keys in
-- order, eval outputs and input gradients (float64), options and errors,
-- the ONNX round trip.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local ops = require 'lunet.models.ops'
local nn = lunet.nn

local T, cases = fx.load_fixture('models_ops')

local function build(c)
  local opts = {}
  for k, v in pairs(c.opts) do
    if type(v) == 'string' then opts[k] = nn[v]
    elseif k == 'norm_layer' and v == true then opts[k] = nn.BatchNorm2d
    else opts[k] = v end
  end
  if c.kind == 'cna' then return ops.Conv2dNormActivation(c.args[1], c.args[2], opts) end
  return ops.SqueezeExcitation(c.args[1], c.args[2], opts)
end

local function keys_of(m)
  local out = {}
  for _, e in ipairs(m._state_entries(m, '')) do out[#out + 1] = e[1] end
  return out
end

describe('lunet.models.ops against torchvision.ops', function()
  for _, c in ipairs(cases) do
    it(c.name, function()
      local m = build(c)
      assert.are.same(c.keys, keys_of(m))
      local sd = {}
      for _, k in ipairs(c.keys) do sd[k] = T[c.name .. '.sd.' .. k] end
      m:load_state_dict(sd)
      m:to('float64'):eval()
      local x = T[c.name .. '.x']:double():clone():requires_grad_()
      local out = m(x)
      assert.is_true(fx.rel(out, T[c.name .. '.out']) < 1e-10, c.name .. ' out ' .. fx.rel(out, T[c.name .. '.out']))
      local loss = (out * T[c.name .. '.dout']:double()):sum()
      loss:backward()
      assert.is_true(fx.rel(x.grad, T[c.name .. '.dx']) < 1e-10, c.name .. ' dx')
      -- float32, as a model runs it
      m:to('float32')
      local y = lunet.no_grad(function() return m(T[c.name .. '.x']) end)
      assert.is_true(fx.rel(y, T[c.name .. '.out']) < 1e-5)
    end)
  end

  it('Conv2dNormActivation: torchvision defaults (padding, bias without norm, inplace)', function()
    local m = ops.Conv2dNormActivation(3, 8, { kernel_size = 5, dilation = 2 })
    assert.matches('pad 4, dilation 2, no bias', tostring(m:get(1)))
    assert.is_nil(m:get(1).bias)
    assert.equal(8, m.out_channels)
    assert.is_true(m:get(3).inplace)
    local nb = ops.Conv2dNormActivation(3, 8, { norm_layer = false, inplace = false })
    assert.is_not_nil(nb:get(1).bias)
    assert.is_false(nb:get(2).inplace)
    -- norm_layer called as torchvision does: norm_layer(out_channels)
    local eps = ops.Conv2dNormActivation(3, 4, { norm_layer = function(c) return nn.BatchNorm2d(c, { eps = 1e-3 }) end })
    assert.equal(1e-3, eps:get(2).eps)
    assert.matches('models.Conv2dNormActivation', tostring(m))
  end)

  it('stochastic_depth: eval and p = 0 pass the input on; row and batch masks scaled by 1/(1-p)', function()
    local x = lunet.ones(4000, 3)
    assert.equal(x, ops.stochastic_depth(x, 0.3, 'row', false))
    assert.equal(x, ops.stochastic_depth(x, 0, 'batch', true))
    lunet.manual_seed(7)
    local y = ops.stochastic_depth(x, 0.25, 'row', true)
    -- every row all 0 or all 1/(1-p); about 3/4 of them kept
    local row_max, row_min = y:max(2), y:min(2)
    assert.is_true(fx.maxdiff(row_max, row_min) == 0)
    local kept = row_max:gt(0):sum():item()
    assert.is_true(math.abs(kept / 4000 - 0.75) < 0.04, 'kept ' .. kept)
    assert.is_true(math.abs(y:max():item() - 1 / 0.75) < 1e-6)
    local b = ops.stochastic_depth(x, 0.5, 'batch', true)
    assert.is_true(b:min():item() == b:max():item())
    -- p = 1: everything dropped, no division by 0
    assert.equal(0, ops.stochastic_depth(x, 1, 'row', true):abs():sum():item())
    -- the module follows train/eval
    local sd = ops.StochasticDepth(0.2, 'row')
    assert.matches('^models.StochasticDepth%(p=0.2, mode=row%)', tostring(sd))
    sd:eval()
    assert.equal(x, sd(x))
    -- gradients flow through the kept rows only
    sd:train()
    lunet.manual_seed(3)
    local xg = lunet.randn(50, 2):requires_grad_()
    local yg = sd(xg)
    yg:sum():backward()
    assert.is_true(fx.maxdiff(xg.grad, (yg / xg):detach()) < 1e-5)
  end)

  it('bad arguments are named errors', function()
    local function err(f, ...) return fx.err_of(f, ...) end
    assert.matches('models.StochasticDepth: drop probability has to be between 0 and 1, but got 1.5', err(ops.StochasticDepth, 1.5, 'row'))
    assert.matches("mode has to be either 'batch' or 'row'", err(ops.StochasticDepth, 0.1, 'col'))
    assert.matches('models.stochastic_depth: input must be a tensor', err(ops.stochastic_depth, 3, 0.1, 'row'))
    assert.matches("unknown option 'kernel'", err(ops.Conv2dNormActivation, 3, 8, { kernel = 3 }))
    assert.matches('in_channels must be an integer >= 1', err(ops.Conv2dNormActivation, 0, 8))
    assert.matches('norm_layer must be a constructor or false', err(ops.Conv2dNormActivation, 3, 8, { norm_layer = 3 }))
    assert.matches('squeeze_channels must be an integer >= 1', err(ops.SqueezeExcitation, 8, 1.5))
    assert.matches('scale_activation must be a constructor', err(ops.SqueezeExcitation, 8, 2, { scale_activation = 'x' }))
  end)

  it('exports to ONNX and loads back equal (SqueezeExcitation as torch writes it)', function()
    local m = nn.Sequential { ops.Conv2dNormActivation(3, 8, { activation_layer = nn.Hardswish }),
      ops.SqueezeExcitation(8, 4, { scale_activation = nn.Hardsigmoid }), ops.StochasticDepth(0.5, 'row'),
      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3) }
    m:eval()
    local x = lunet.randn(2, 3, 12, 12)
    local path = os.tmpname()
    lunet.onnx.export(m, x, path)
    local back = lunet.onnx.load(path)
    os.remove(path)
    assert.is_true(fx.rel(back(x), m(x)) < 1e-5)
  end)
end)
