-- Training trajectories against PyTorch 1.13: a small CNN trained by
-- lunet.fit (SGD with momentum and weight decay, Adam, gradient accumulation,
-- DataParallel over 2 and 3 devices with accumulation) ends every epoch with
-- the parameters PyTorch's loop gives from the same initial parameters and
-- data (spec/fixtures/trajectory.lua, from tools/gen_trajectory_fixtures.py):
-- float64 to 1e-12, float32 to 1e-6 (measured: 2e-16 and 6e-8), relative to
-- each tensor's largest value (at least 1).
local lunet = require 'lunet'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local fx = dofile('spec/fixtures/trajectory.lua')
local TOL = { float32 = 1e-6, float64 = 1e-12 }

local function model_of(dtype)
  local m = nn.Sequential {
    nn.Conv2d(2, 2, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(18, fx.classes),
  }
  lunet.no_grad(function()
    for i, p in ipairs(m:parameters()) do p:copy_(lunet.tensor(fx.init[i]):view(p:size())) end
  end)
  return m:to(dtype)
end

local function loader_of(case)
  local x = lunet.tensor(fx.x):view(fx.n, unpack(fx.shape)):to(case.dtype)
  local y = lunet.tensor(fx.y, { dtype = 'int64' })
  return data.DataLoader(data.TensorDataset(x, y), { batch_size = case.batch_size })
end

local function check_epoch(case, params, e, where)
  local want = case.expected[e]
  assert.are.equal(#want, #params)
  for i, p in ipairs(params) do
    local b = lunet.tensor(want[i], { dtype = 'float64' })
    local a = p:to('cpu:0'):to('float64'):view(-1)
    local scale = math.max(b:abs():max():item(), 1)
    local d = (a - b):abs():max():item() / scale
    assert.is_true(d <= TOL[case.dtype], ('%s %s (%s), epoch %d, parameter %d: relative difference %g (tolerance %g)')
      :format(case.name, case.dtype, where, e, i, d, TOL[case.dtype]))
  end
end

-- lunet.fit one epoch at a time (the optimizer's state carries over), the
-- parameters compared after each
local function run(case, model, params, where)
  local opt = optim[case.optimizer](params, case.opts)
  local loader = loader_of(case)
  for e = 1, fx.epochs do
    lunet.fit(model, loader, { epochs = 1, optimizer = opt, quiet = true, progress = false,
      accumulate = (model.accumulate == nil and case.accumulate ~= 1) and case.accumulate or nil })
    check_epoch(case, rawget(model, 'module') and model.module:parameters() or model:parameters(), e, where)
  end
end

describe('training trajectories against PyTorch', function()
  it('the trajectories move (the fixture is not trivial)', function()
    for _, case in ipairs(fx.cases) do
      local first, last = case.expected[1][1], case.expected[fx.epochs][1]
      local moved = 0
      for j = 1, #first do moved = math.max(moved, math.abs(first[j] - last[j])) end
      assert.is_true(moved > 1e-3, case.name .. ' barely moves: ' .. moved)
    end
  end)

  describe('one device', function()
    for _, case in ipairs(fx.cases) do
      it(('%s %s (batch %d, accumulate %d)'):format(case.name, case.dtype, case.batch_size, case.accumulate), function()
        local m = model_of(case.dtype)
        run(case, m, m:parameters(), 'one device')
      end)
    end
  end)

  for _, N in ipairs({ 2, 3 }) do
    describe(('DataParallel over %d devices'):format(N), function()
      setup(function() lunet.set_cpu_devices(N) end)
      teardown(function()
        jit.flush()
        for _ = 1, 4 do collectgarbage() end
        pcall(lunet.synchronize)
        lunet.set_cpu_devices(1)
      end)
      for _, case in ipairs(fx.cases) do
        if case.accumulate > 1 then
          it(('%s %s (batch %d, accumulate %d)'):format(case.name, case.dtype, case.batch_size, case.accumulate), function()
            local dp = lunet.parallel.DataParallel(model_of(case.dtype), { accumulate = case.accumulate })
            run(case, dp, dp:parameters(), N .. ' devices')
            for k = 2, N do
              for i, p in ipairs(dp.params[k]) do
                assert.is_true(p:to('cpu:0'):eq(dp.params[1][i]):all():item(),
                  ('parameter %d of replica %d differs from replica 1'):format(i, k))
              end
            end
          end)
        end
      end
    end)
  end
end)
