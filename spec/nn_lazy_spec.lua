-- nn.LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d,
-- LazyBatchNorm1d/2d/3d and LazyInstanceNorm1d/2d/3d against PyTorch 1.13
-- (spec/fixtures/nn_lazy.safetensors, tools/gen_nn_lazy_fixtures.py): the
-- inferred sizes and shapes, outputs and float64 gradients with torch's
-- weights; a torch lazy model's state_dict loaded into an unmaterialized
-- one; optimizers built before the first forward; :to() before it;
-- printing, summary, DataParallel, clone; the errors.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local fx = require 'support.fixtures'
local nn, optim = lunet.nn, lunet.optim

local T, cases = fx.load_fixture('nn_lazy')
local REGULAR = { LazyLinear = 'Linear' }

local function regular_of(op) return nn[REGULAR[op] or op:sub(5)] end
local function make(case) return nn[case.op](unpack(case.args)) end
local function get(case, k) return T[case.name .. '.' .. k] end

describe('lazy modules', function()
  it('infer their size at the first forward and become the regular module, as torch', function()
    assert.is_true(#cases >= 16)
    for _, case in ipairs(cases) do
      local m = make(case)
      assert.is_true(m:has_uninitialized_params(), case.name)
      assert.equal(0, m[case.field], case.name)
      assert.equal('nn.' .. case.op, m.__name)
      local y = m(get(case, 'x'))
      assert.equal(regular_of(case.op), getmetatable(m), case.name)
      assert.is_nil(m.has_uninitialized_params, case.name)
      assert.equal(case.size, m[case.field], case.name)
      assert.same(get(case, 'out'):size(), y:size(), case.name)
      local sd, n = m:state_dict(), 0
      for k, shape in pairs(case.shapes) do
        n = n + 1
        assert.same(shape, sd[k]:size(), case.name .. ' ' .. k)
      end
      for _ in pairs(sd) do n = n - 1 end
      assert.equal(0, n, case.name .. ': the same state_dict keys')
    end
  end)

  it("equal torch's outputs and float64 gradients with torch's weights", function()
    for _, case in ipairs(cases) do
      local m = make(case)
      m(get(case, 'x'))
      m:double()
      lunet.no_grad(function()
        for _, p in ipairs({ 'weight', 'bias' }) do
          if get(case, p) then m[p]:copy_(get(case, p)) end
        end
      end)
      local x = get(case, 'x'):double():requires_grad_()
      local y = m(x)
      assert.is_true(fx.maxdiff(y, get(case, 'out')) < 1e-10, case.name)
      ;(y * get(case, 'dout'):double()):sum():backward()
      assert.is_true(fx.maxdiff(x.grad, get(case, 'dx')) < 1e-10, case.name .. ' dx')
      for _, p in ipairs({ 'weight', 'bias' }) do
        if get(case, p) then assert.is_true(fx.maxdiff(m[p].grad, get(case, 'd' .. p)) < 1e-10, case.name .. ' d' .. p) end
      end
    end
  end)

  it('gradcheck through a freshly materialized module', function()
    local x = lunet.randn(2, 3, 5, { dtype = 'float64' }):requires_grad_()
    local m = nn.LazyConv1d(2, 3, { dtype = 'float64' })
    assert.is_true(gradcheck(function(a) return m(a) end, { x }))
    local l = nn.LazyLinear(2, { dtype = 'float64' })
    assert.is_true(gradcheck(function(a) return l(a) end, { lunet.randn(3, 4, { dtype = 'float64' }):requires_grad_() }))
  end)

  it("load a torch lazy model's state_dict before any forward (torch's _lazy_load_hook)", function()
    local model = nn.Sequential { nn.LazyConv2d(4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(5) }
    local sd = {}
    for _, k in ipairs({ '0.weight', '0.bias', '3.weight', '3.bias' }) do sd[k] = T['sd.' .. k] end
    model:load_state_dict(sd)
    assert.equal(nn.Conv2d, getmetatable(model[1]))
    assert.equal(nn.Linear, getmetatable(model[4]))
    assert.equal(3, model[1].in_channels)
    assert.equal(64, model[4].in_features)
    assert.is_true(fx.maxdiff(model(T['sd.x']), T['sd.out']) < 1e-5)
    -- a size mismatch still raises, as the regular module's
    local bad = nn.Sequential { nn.LazyLinear(4) }
    assert.matches('size mismatch', fx.err_of(bad.load_state_dict, bad, { ['0.weight'] = lunet.zeros(4, 3), ['0.bias'] = lunet.zeros(5) }))
  end)

  it('save their placeholders in state_dict; an unmaterialized state_dict loads and leaves them lazy', function()
    local a = nn.Sequential { nn.LazyLinear(3), nn.LazyBatchNorm1d() }
    local sd = a:state_dict()
    assert.same({ 0 }, sd['0.weight']:size())
    assert.same({ 0 }, sd['1.running_mean']:size())
    assert.equal(0, sd['1.num_batches_tracked']:item())
    local b = nn.Sequential { nn.LazyLinear(3), nn.LazyBatchNorm1d() }
    b:load_state_dict(sd)
    assert.is_true(b[1]:has_uninitialized_params())
    assert.is_true(b[2]:has_uninitialized_params())
    -- and a real one materializes the norm too (running stats and all)
    a(lunet.randn(4, 2))
    b:load_state_dict(a:state_dict())
    assert.equal(nn.BatchNorm1d, getmetatable(b[2]))
    assert.equal(1, b[2].num_batches_tracked:item())
    assert.is_true(fx.maxdiff(b[2].running_mean, a[2].running_mean) == 0)
    -- a lazy norm without affine: its running_mean gives the size
    local n = nn.LazyInstanceNorm1d({ affine = false })   -- (tracking: torch's lazy default)
    n:load_state_dict({ running_mean = lunet.zeros(5), running_var = lunet.ones(5), num_batches_tracked = lunet.zeros({}, { dtype = 'int64' }) })
    assert.equal(5, n.num_features)
  end)

  it('an optimizer built over the placeholders trains the materialized parameters (in place)', function()
    local m = nn.Sequential { nn.LazyLinear(3), nn.ReLU(), nn.LazyLinear(1) }
    local params = m:parameters()
    assert.equal(4, #params)
    local opt = optim.Adam(params, { lr = 0.1 })
    local x = lunet.randn(8, 5)
    m(x)
    for i, p in ipairs(m:parameters()) do assert.equal(params[i], p) end   -- the same Lua objects
    assert.same({ 3, 5 }, params[1]:size())
    assert.is_true(params[1].requires_grad)
    local w = params[1]:clone()
    opt:zero_grad(); m(x):pow(2):sum():backward(); opt:step()
    assert.is_true(fx.maxdiff(w, params[1]) > 0)
    assert.equal(8 * 0 + 3 * 5 + 3 + 3 + 1, m:num_parameters())
  end)

  it('keep a :to() before the first forward (dtype and device) and requires_grad_(false)', function()
    local m = nn.LazyConv2d(2, 3):to('float64')
    assert.equal('float64', m.weight.dtype)
    m:requires_grad_(false)
    local y = m(lunet.randn(1, 3, 4, 4, { dtype = 'float64' }))
    assert.equal('float64', m.weight.dtype)
    assert.equal('float64', y.dtype)
    assert.is_false(m.weight.requires_grad)
    local b = nn.LazyBatchNorm2d({ dtype = 'float64' })
    assert.equal('float64', b.running_mean.dtype)
    b(lunet.randn(2, 3, 2, 2, { dtype = 'float64' }))
    assert.equal('float64', b.running_var.dtype)
    assert.equal('int64', b.num_batches_tracked.dtype)
  end)

  it('print as uninitialized, then as the regular module; summary materializes them', function()
    local m = nn.LazyLinear(3, false)
    assert.equal('nn.LazyLinear(0 -> 3, no bias, uninitialized)', m:repr())
    assert.matches('^nn.LazyLinear%(0 %-> 3, no bias, uninitialized%)\n0 parameters', tostring(m))
    assert.equal('nn.LazyBatchNorm2d(0, uninitialized)', nn.LazyBatchNorm2d():repr())
    assert.equal('nn.LazyConvTranspose2d(0 -> 4, 3x3, stride 2, uninitialized)', nn.LazyConvTranspose2d(4, 3, 2):repr())
    m(lunet.randn(2, 4))
    assert.equal('nn.Linear(4 -> 3, no bias)', m:repr())
    local s = lunet.summary(nn.Sequential { nn.LazyLinear(3), nn.ReLU() }, { 2, 5 })
    assert.equal(18, s.total_params)
    assert.equal('nn.Linear', s.rows[2].class)
  end)

  it('run forward pre hooks after materializing, and clone while lazy', function()
    local m = nn.LazyLinear(2)
    local seen
    m:register_forward_pre_hook(function(mod) seen = mod.weight:size() end)
    m(lunet.randn(1, 3))
    assert.same({ 2, 3 }, seen)
    local c = nn.LazyLinear(2):clone()
    assert.is_true(c:has_uninitialized_params())
    c(lunet.randn(1, 4))
    assert.same({ 2, 4 }, c.weight:size())
    local f = nn.LazyLinear(2)
    assert.same({ 1, 2 }, f:forward(lunet.randn(1, 3)):size())   -- forward called directly too
    assert.equal(nn.Linear, getmetatable(f))
  end)

  it('must be materialized before DataParallel or DistributedDataParallel wraps them', function()
    local DP = lunet.parallel.DataParallel
    assert.matches('DataParallel: nn.LazyLinear has uninitialized parameters: run a forward',
      fx.err_of(DP, nn.Sequential { nn.LazyLinear(2) }, { devices = { 'cpu:0' } }))
    assert.matches('DistributedDataParallel: nn.LazyConv2d has uninitialized parameters',
      fx.err_of(lunet.parallel.DistributedDataParallel, nn.Sequential { nn.ReLU(), nn.LazyConv2d(2, 3) }))
    local m = nn.Sequential { nn.LazyLinear(2) }
    m(lunet.randn(2, 3))
    local dp = DP(m, { devices = { 'cpu:0' } })
    assert.same({ 4, 2 }, dp(lunet.randn(4, 3)):size())
  end)

  it('raise clear errors', function()
    local e = fx.err_of
    assert.matches('nn.LazyLinear: expected %(out_features', e(nn.LazyLinear))
    assert.matches("nn.LazyLinear: unknown option 'biass'", e(nn.LazyLinear, 3, { biass = false }))
    assert.matches('nn.LazyLinear: out_features must be an integer >= 0, got 2.5', e(nn.LazyLinear, 2.5))
    assert.matches('nn.LazyConv2d: expected %(out_channels, kernel_size', e(nn.LazyConv2d, 4))
    assert.matches('nn.LazyConv2d: out_channels 5 must be divisible by groups 2', e(nn.LazyConv2d, 5, 3, { groups = 2 }))
    assert.matches("nn.LazyConvTranspose1d: unknown option 'pad'", e(nn.LazyConvTranspose1d, 4, 3, { pad = 1 }))
    assert.matches('nn.LazyBatchNorm1d: momentum must be in', e(nn.LazyBatchNorm1d, { momentum = 2 }))
    assert.matches('nn.LazyInstanceNorm2d: too many arguments', e(nn.LazyInstanceNorm2d, 1, 2, 3, 4, 5))
    -- the input: its kind and dims, before anything is materialized
    local c = nn.LazyConv2d(4, 3)
    assert.matches('nn.LazyConv2d: expected a 3%-d or 4%-d input, got 2%-d', e(c, lunet.randn(3, 3)))
    assert.matches('nn.LazyConv2d: input must be a tensor, got string', e(c, 'x'))
    assert.is_true(c:has_uninitialized_params())
    assert.matches('nn.LazyLinear: expected an at least 1%-d input, got 0%-d', e(nn.LazyLinear(2), lunet.tensor(1)))
    assert.matches('nn.LazyBatchNorm2d: expected a 4%-d input, got 3%-d', e(nn.LazyBatchNorm2d(), lunet.randn(3, 2, 2)))
    -- the inferred size breaks the regular module's rule: at the forward, as torch
    assert.matches('nn.LazyConv2d: in_channels 3 and out_channels 4 must be divisible by groups 2',
      e(nn.LazyConv2d(4, 3, { groups = 2 }), lunet.randn(1, 3, 5, 5)))
    -- a second forward with another size raises as the regular module does
    local l = nn.LazyLinear(2)
    l(lunet.randn(2, 3))
    assert.is_false(pcall(l, lunet.randn(2, 4)))
    local b = nn.LazyBatchNorm1d()
    b(lunet.randn(4, 3))
    assert.matches('nn.BatchNorm1d: input has 5 channels, expected 3', e(b, lunet.randn(4, 5)))
    -- torch 1.13's lazy instance norm defaults: affine, tracking
    local i = nn.LazyInstanceNorm2d()
    i(lunet.randn(2, 3, 4))
    assert.equal('nn.InstanceNorm2d(2, affine, running stats)', i:repr())
    -- a non-contiguous input
    local t = nn.LazyLinear(2)
    assert.same({ 4, 2 }, t(lunet.randn(3, 4):t()):size())
    assert.equal(3, t.in_features)
    -- an empty batch materializes and runs as the regular module
    local z = nn.LazyLinear(2)
    assert.same({ 0, 2 }, z(lunet.randn(0, 3)):size())
  end)
end)
