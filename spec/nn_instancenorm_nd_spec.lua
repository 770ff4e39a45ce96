-- nn.InstanceNorm1d and nn.InstanceNorm3d against PyTorch 1.13: outputs and
-- float64 gradients of input, weight and bias from
-- spec/fixtures/nn_instancenorm_nd.safetensors (tools/gen_nnsmall_fixtures.py),
-- batched and unbatched, affine or not, tracked statistics in training then
-- eval; float64 finite differences; non-contiguous and empty inputs;
-- printing; the errors. (InstanceNorm2d, which shares their class, keeps
-- its spec in nn_more_layers_spec.lua.)
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local fx, cases = fixtures.load_fixture('nn_instancenorm_nd')
local function get(case, k) return fx[case.name .. '.' .. k] end
local err = fixtures.err_of

describe('nn.InstanceNorm1d / InstanceNorm3d', function()
  it('match torch: forward and float64 gradients, batched and unbatched, affine or not', function()
    local n = 0
    for _, case in ipairs(cases) do
      if case.op ~= 'running' then
        n = n + 1
        for _, dtype in ipairs({ 'float32', 'float64' }) do
          local m = nn[case.op](3, { affine = case.opts.affine, dtype = dtype })
          local x = get(case, 'x'):to(dtype):clone():requires_grad_()
          if case.opts.affine then
            lunet.no_grad(function() m.weight:copy_(get(case, 'weight')); m.bias:copy_(get(case, 'bias')) end)
          end
          local out = m(x)
          assert.same(get(case, 'out'):size(), out:size())
          local tol = dtype == 'float32' and 1e-5 or 1e-12
          assert.is_true(fixtures.maxdiff(out, get(case, 'out')) < tol, case.name)
          ;(out * get(case, 'dout'):to(dtype)):sum():backward()
          local gtol = dtype == 'float32' and 1e-4 or 1e-10
          assert.is_true(fixtures.maxdiff(x.grad, get(case, 'dx')) < gtol, case.name .. ' dx')
          if case.opts.affine then
            assert.is_true(fixtures.maxdiff(m.weight.grad, get(case, 'dweight')) < gtol, case.name .. ' dweight')
            assert.is_true(fixtures.maxdiff(m.bias.grad, get(case, 'dbias')) < gtol, case.name .. ' dbias')
          end
        end
      end
    end
    assert.equal(8, n)
  end)

  it('match torch with track_running_stats: the statistics after training, then eval', function()
    local n = 0
    for _, case in ipairs(cases) do
      if case.op == 'running' then
        n = n + 1
        for _, dtype in ipairs({ 'float32', 'float64' }) do
          local tol = dtype == 'float32' and 1e-5 or 1e-12
          local m = nn['InstanceNorm' .. case.k .. 'd'](3, { momentum = case.momentum, affine = true,
            track_running_stats = true, dtype = dtype })
          lunet.no_grad(function() m.weight:copy_(get(case, 'weight')); m.bias:copy_(get(case, 'bias')) end)
          assert.is_true(fixtures.maxdiff(m(get(case, 'x'):to(dtype)), get(case, 'out')) < tol)
          assert.is_true(fixtures.maxdiff(m.running_mean, get(case, 'running_mean')) < tol)
          assert.is_true(fixtures.maxdiff(m.running_var, get(case, 'running_var')) < tol)
          assert.equal(0, m.num_batches_tracked:item())   -- (torch's InstanceNorm never counts)
          m:eval()
          assert.is_true(fixtures.maxdiff(m(get(case, 'x2'):to(dtype)), get(case, 'out_eval')) < tol)
        end
      end
    end
    assert.equal(2, n)
  end)

  it('pass float64 finite differences; F.instance_norm takes 3-d and 5-d input', function()
    local m1 = nn.InstanceNorm1d(2, { affine = true, dtype = 'float64' })
    assert.is_true(gradcheck(function(x) return m1(x) end, { lunet.randn({ 2, 2, 5 }, { dtype = 'float64' }):requires_grad_() }))
    local m3 = nn.InstanceNorm3d(2, { dtype = 'float64' })
    assert.is_true(gradcheck(function(x) return m3(x) end, { lunet.randn({ 2, 2, 2, 3 }, { dtype = 'float64' }):requires_grad_() }))
    local x1, x3 = lunet.randn(2, 3, 6), lunet.randn(1, 2, 2, 3, 2)
    assert.is_true(fixtures.maxdiff(F.instance_norm(x1), nn.InstanceNorm1d(3)(x1)) < 1e-6)
    assert.is_true(fixtures.maxdiff(F.instance_norm(x3), nn.InstanceNorm3d(2)(x3)) < 1e-6)
  end)

  it('take non-contiguous input and empty batches', function()
    local x = lunet.randn(2, 7, 3)
    local xt = x:transpose(2, 3)
    assert.is_false(xt:is_contiguous())
    assert.is_true(fixtures.maxdiff(nn.InstanceNorm1d(3)(xt), nn.InstanceNorm1d(3)(xt:contiguous())) < 1e-6)
    local x3 = lunet.randn(2, 4, 3, 2, 2):transpose(2, 3)
    assert.is_true(fixtures.maxdiff(nn.InstanceNorm3d(3)(x3), nn.InstanceNorm3d(3)(x3:contiguous())) < 1e-6)
    assert.same({ 0, 3, 5 }, nn.InstanceNorm1d(3)(lunet.zeros(0, 3, 5)):size())
  end)

  it('keep torch state_dict names; print', function()
    local m = nn.InstanceNorm3d(4, { affine = true, track_running_stats = true })
    local keys = {}
    for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.same({ 'bias', 'num_batches_tracked', 'running_mean', 'running_var', 'weight' }, keys)
    assert.equal('nn.InstanceNorm1d(3)', nn.InstanceNorm1d(3):repr())
    assert.equal('nn.InstanceNorm3d(4, eps 0.001, affine)', nn.InstanceNorm3d(4, 1e-3, 0.1, true):repr())
  end)

  it('refuse bad input and options', function()
    assert.matches('InstanceNorm1d: expected a 2%-d %(C, L%) or 3%-d %(N, C, L%) input, got 4%-d',
      err(function() return nn.InstanceNorm1d(3)(lunet.zeros(1, 3, 4, 4)) end))
    assert.matches('InstanceNorm3d: expected a 4%-d %(C, D, H, W%) or 5%-d',
      err(function() return nn.InstanceNorm3d(3)(lunet.zeros(3, 4, 4)) end))
    assert.matches('InstanceNorm1d: input has 2 channels, expected 3',
      err(function() return nn.InstanceNorm1d(3)(lunet.zeros(1, 2, 4)) end))
    assert.matches('InstanceNorm3d: num_features must be an integer', err(nn.InstanceNorm3d, 0))
    assert.matches('InstanceNorm1d', err(nn.InstanceNorm1d, 3, { bogus = 1 }))
    assert.matches('InstanceNorm1d: input must be a tensor', err(function() return nn.InstanceNorm1d(3)(5) end))
    assert.matches('more than 1 spatial element', err(function() return nn.InstanceNorm1d(3)(lunet.zeros(2, 3, 1)) end))
  end)
end)
