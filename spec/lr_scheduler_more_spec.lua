-- lunet.optim's ReduceLROnPlateau, SequentialLR, ChainedScheduler,
-- CosineAnnealingWarmRestarts, ConstantLR, PolynomialLR, MultiplicativeLR and
-- CyclicLR against PyTorch 1.13's lr (and momentum) sequences
-- (spec/fixtures/lr_scheduler_more.lua, from tools/gen_lr_scheduler_fixtures.py).
local lunet = require 'lunet'
local optim = lunet.optim
local fx = require 'fixtures.lr_scheduler_more'

-- the generator's named functions
local FUNCS = {
  const95 = function() return 0.95 end,
  inv = function(e) return 1 / (1 + 0.05 * e) end,
  halving = function(x) return 0.5 ^ x end,
  recip = function(x) return 1 / (1 + 0.1 * x) end,
}

local function resolve(opts)
  local o = {}
  for k, v in pairs(opts) do
    if k == 'lr_lambda' or k == 'scale_fn' then
      if type(v) == 'table' then
        local fs = {}
        for i, n in ipairs(v) do fs[i] = FUNCS[n] end
        v = fs
      else
        v = FUNCS[v]
      end
    end
    o[k] = v
  end
  return o
end

local function make(case)
  local groups = {}
  for i, lr in ipairs(case.lrs) do groups[i] = {params = {lunet.zeros(1)}, lr = lr} end
  local oo = {lr = case.lrs[1]}
  for k, v in pairs(case.extra) do oo[k] = v end
  local opt = optim[case.optimizer](groups, oo)
  if case.subs then
    local subs = {}
    for i, s in ipairs(case.subs) do subs[i] = optim[s.name](opt, resolve(s.opts)) end
    if case.scheduler == 'ChainedScheduler' then return opt, optim.ChainedScheduler(subs) end
    local o = resolve(case.opts)
    o.schedulers = subs
    return opt, optim[case.scheduler](opt, o)
  end
  return opt, optim[case.scheduler](opt, resolve(case.opts))
end

local function momentum(g) return g.betas and g.betas[1] or g.momentum or 0 end

local function near(a, b) return a == b or math.abs(a - b) <= 1e-12 * math.max(math.abs(a), math.abs(b)) + 1e-17 end

local function check(case, opt, sched, i)
  local last = sched:get_last_lr()
  for gi = 1, #case.lrs do
    local lr, want = opt.param_groups[gi].lr, case.lr[i][gi]
    assert(near(lr, want), ('%s step %d group %d: lr %.17g, PyTorch %.17g'):format(case.name, i - 1, gi, lr, want))
    assert(last[gi] == lr, ('%s step %d: get_last_lr() %.17g, group lr %.17g'):format(case.name, i - 1, last[gi], lr))
    local m, wm = momentum(opt.param_groups[gi]), case.momentum[i][gi]
    assert(near(m, wm), ('%s step %d group %d: momentum %.17g, PyTorch %.17g'):format(case.name, i - 1, gi, m, wm))
  end
end

-- the i-th step (i >= 1) as the generator took it; some metrics as tensors
local function step(case, sched, i)
  if case.metrics then
    local m = case.metrics[i]
    if i % 3 == 0 then m = lunet.tensor(m, {dtype = 'float64'}) elseif i % 3 == 1 then m = lunet.tensor({m}, {dtype = 'float64'}) end
    sched:step(m)
  elseif case.epochs and case.epochs[i] then
    sched:step(case.epochs[i])
  else
    sched:step()
  end
end

describe('lr schedulers match PyTorch 1.13', function()
  local seen = {}
  for _, case in ipairs(fx) do
    seen[case.scheduler] = true
    it(case.name .. ' (' .. case.scheduler .. ')', function()
      local opt, sched = make(case)
      local n = #case.lr
      check(case, opt, sched, 1)
      local resume_at = math.floor(n / 3)
      for i = 2, n do
        opt:step()
        step(case, sched, i - 1)
        check(case, opt, sched, i)
        if i == resume_at then
          -- resuming as in PyTorch: a fresh optimizer and scheduler, both
          -- state_dicts loaded; the rest of the sequence is the same
          local osd, sd = opt:state_dict(), sched:state_dict()
          opt, sched = make(case)
          opt:load_state_dict(osd)
          sched:load_state_dict(sd)
          check(case, opt, sched, i)
        end
      end
      assert.matches('^' .. case.scheduler .. '%(', tostring(sched))
    end)
  end
  it('covers every new scheduler', function()
    for _, s in ipairs({'ReduceLROnPlateau', 'SequentialLR', 'ChainedScheduler', 'CosineAnnealingWarmRestarts',
                        'ConstantLR', 'PolynomialLR', 'MultiplicativeLR', 'CyclicLR'}) do
      assert.is_true(seen[s], s)
      assert.are.equal(optim[s], optim.lr_scheduler[s])
    end
  end)
end)

describe('lr schedulers: positional options, state, printing', function()
  local function sgd(momentum)
    return optim.SGD({{params = {lunet.zeros(1)}, lr = 0.1}, {params = {lunet.zeros(1)}, lr = 0.01}}, {lr = 0.1, momentum = momentum})
  end

  it('take PyTorch\'s positional order', function()
    local a, b = sgd(), sgd()
    local p1 = optim.ReduceLROnPlateau(a, 'max', 0.5, 0)
    local p2 = optim.ReduceLROnPlateau(b, {mode = 'max', factor = 0.5, patience = 0})
    for _, m in ipairs({1, 2, 2, 1, 3, 3}) do p1:step(m); p2:step(m) end
    assert.are.same(p2:get_last_lr(), p1:get_last_lr())
    -- (reduced at the 3rd, 4th and 6th metrics: no improvement, patience 0)
    assert.are.same({0.1 * 0.5 ^ 3, 0.01 * 0.5 ^ 3}, p1:get_last_lr())
    a, b = sgd(), sgd()
    local w1, w2 = optim.CosineAnnealingWarmRestarts(a, 3, 2, 0.001), optim.CosineAnnealingWarmRestarts(b, {T_0 = 3, T_mult = 2, eta_min = 0.001})
    a, b = sgd(0.9), sgd(0.9)
    local c1 = optim.CyclicLR(a, 0.01, 0.1, 4, nil, 'triangular2')
    local c2 = optim.CyclicLR(b, {base_lr = 0.01, max_lr = 0.1, step_size_up = 4, mode = 'triangular2'})
    for _ = 1, 12 do w1:step(); w2:step(); c1:step(); c2:step() end
    assert.are.same(w2:get_last_lr(), w1:get_last_lr())
    assert.are.same(c2:get_last_lr(), c1:get_last_lr())
    a = sgd()
    local s1, s2 = optim.ConstantLR(a, 0.5, 2), optim.PolynomialLR(a, 4, 2)
    local seq = optim.SequentialLR(a, {s1, s2}, {2})
    for _ = 1, 3 do seq:step() end
    assert.are.same({0.1 * (1 - 1 / 4) ^ 2, 0.01 * (1 - 1 / 4) ^ 2}, seq:get_last_lr())
  end)

  it('ReduceLROnPlateau: min_lr per group, state_dict before any metric, and printing', function()
    local opt = sgd()
    local s = optim.ReduceLROnPlateau(opt, {patience = 0, factor = 0.5, min_lr = {0.04, 0.001}})
    assert.are.same({0.1, 0.01}, s:get_last_lr())   -- not stepped when made
    assert.is_nil(s:state_dict().best)              -- (no infinity: a checkpoint's JSON has none)
    for _ = 1, 4 do s:step(1) end
    assert.are.same({0.04, 0.00125}, s:get_last_lr())
    assert.are.equal(0, s.num_bad_epochs)
    assert.matches('ReduceLROnPlateau%(mode=min, factor=0.5, patience=0, best=1', tostring(s))
    local chained = optim.ChainedScheduler({optim.ConstantLR(opt), optim.ExponentialLR(opt, 0.9)})
    assert.matches('^ChainedScheduler%(ConstantLR, ExponentialLR; lr=', tostring(chained))
  end)

  it('CosineAnnealingWarmRestarts: step(epoch) then step() goes on from that epoch', function()
    local opt = sgd()
    local s = optim.CosineAnnealingWarmRestarts(opt, {T_0 = 5})
    s:step(7.5)
    assert.are.equal(7, s.last_epoch)
    assert.is_true(near(0.1 * (1 + math.cos(math.pi * 2.5 / 5)) / 2, s:get_last_lr()[1]))
    s:step()
    assert.are.equal(8, s.last_epoch)
    assert.is_true(near(0.1 * (1 + math.cos(math.pi * 3.5 / 5)) / 2, s:get_last_lr()[1]))
  end)
end)

describe('lr schedulers: bad input', function()
  local function sgd(momentum) return optim.SGD({lunet.zeros(1)}, {lr = 0.1, momentum = momentum}) end
  local function raises(f, msg)
    local ok, err = pcall(f)
    assert.is_false(ok)
    assert.matches(msg, tostring(err), 1, true)
    return tostring(err)
  end

  it('name the scheduler and the problem', function()
    local opt = sgd()
    raises(function() optim.ReduceLROnPlateau(opt, {mode = 'mean'}) end, "ReduceLROnPlateau: mode must be 'min' or 'max', got 'mean'")
    raises(function() optim.ReduceLROnPlateau(opt, {factor = 1}) end, 'ReduceLROnPlateau: factor must be in [0, 1), got 1')
    raises(function() optim.ReduceLROnPlateau(opt, {threshold_mode = 'relative'}) end, "ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs'")
    raises(function() optim.ReduceLROnPlateau(opt, {min_lr = {0, 0}}) end, 'ReduceLROnPlateau: expected 1 min_lrs (one per param group), got 2')
    raises(function() optim.ReduceLROnPlateau(opt, {patence = 2}) end, "ReduceLROnPlateau: unknown option 'patence' (did you mean 'patience'?)")
    raises(function() optim.ReduceLROnPlateau(opt, {patience = '2'}) end, "ReduceLROnPlateau: option 'patience' must be a number, got string")
    local p = optim.ReduceLROnPlateau(opt)
    raises(function() p:step() end, 'ReduceLROnPlateau:step: expected the metric to watch (step(val_loss)), got nil')
    raises(function() p:step(lunet.tensor{1, 2}) end, 'ReduceLROnPlateau:step: metric must be a number or a one-element tensor, got a tensor of 2 elements')
    raises(function() optim.ReduceLROnPlateau({}) end, 'ReduceLROnPlateau: first argument must be an optimizer')

    local other = sgd()
    local a, b = optim.ConstantLR(opt), optim.ExponentialLR(other, 0.9)
    raises(function() optim.SequentialLR(opt, {schedulers = {a, b}, milestones = {2}}) end,
      'SequentialLR: all schedulers must belong to the same optimizer; schedulers[2] has another one')
    raises(function() optim.SequentialLR(opt, {schedulers = {a, a}, milestones = {2, 3}}) end,
      'SequentialLR: expected one milestone fewer than schedulers: got 2 schedulers and 2 milestones')
    raises(function() optim.SequentialLR(opt, {schedulers = {a}}) end, 'SequentialLR: option milestones is required')
    raises(function() optim.SequentialLR(opt, {schedulers = {a, 3}, milestones = {2}}) end, 'SequentialLR: schedulers[2] is number, expected a scheduler')
    raises(function() optim.SequentialLR(opt, {schedulers = {a, p}, milestones = {2}}) end,
      'SequentialLR: schedulers[2] is a ReduceLROnPlateau, which steps on a metric')
    raises(function() optim.ChainedScheduler({a, b}) end, 'ChainedScheduler: all schedulers must belong to the same optimizer')
    raises(function() optim.ChainedScheduler() end, 'ChainedScheduler: expected the list of schedulers')
    raises(function() optim.ChainedScheduler({schedulers = {a}, milestone = 1}) end, "ChainedScheduler: unknown option 'milestone'")

    raises(function() optim.CosineAnnealingWarmRestarts(opt, {T_0 = 2.5}) end, 'CosineAnnealingWarmRestarts: T_0 must be a positive integer, got 2.5')
    raises(function() optim.CosineAnnealingWarmRestarts(opt, {T_0 = 2, T_mult = 0}) end, 'CosineAnnealingWarmRestarts: T_mult must be an integer >= 1, got 0')
    raises(function() optim.CosineAnnealingWarmRestarts(opt, {}) end, 'CosineAnnealingWarmRestarts: option T_0 is required')
    local w = optim.CosineAnnealingWarmRestarts(opt, 2)
    raises(function() w:step(-1) end, 'CosineAnnealingWarmRestarts:step: expected a non-negative epoch, got -1')
    raises(function() w:step('1') end, 'CosineAnnealingWarmRestarts:step: epoch must be a number, got string')

    raises(function() optim.ConstantLR(opt, {factor = 1.5}) end, 'ConstantLR: factor must be in (0, 1], got 1.5')
    raises(function() optim.ConstantLR(opt, {total_iter = 3}) end, "ConstantLR: unknown option 'total_iter' (did you mean 'total_iters'?)")
    raises(function() optim.PolynomialLR(opt, {total_iters = 0}) end, 'PolynomialLR: total_iters must be a positive integer, got 0')
    raises(function() optim.PolynomialLR(opt, {power = 'two'}) end, "PolynomialLR: option 'power' must be a number, got string")
    raises(function() optim.MultiplicativeLR(opt, {}) end, 'MultiplicativeLR: option lr_lambda is required')
    raises(function() optim.MultiplicativeLR(opt, {lr_lambda = {FUNCS.inv, FUNCS.inv}}) end, 'MultiplicativeLR: expected 1 lr_lambdas, got 2')
    local m = optim.MultiplicativeLR(opt, function() return 'x' end)
    raises(function() m:step() end, 'MultiplicativeLR: lr_lambda(1) returned x, expected a number')

    raises(function() optim.CyclicLR(opt, {max_lr = 0.1}) end, 'CyclicLR: option base_lr is required')
    raises(function() optim.CyclicLR(sgd(0.9), {base_lr = 0.01, max_lr = 0.1, mode = 'sine'}) end,
      "CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range' (or give scale_fn), got 'sine'")
    raises(function() optim.CyclicLR(sgd(0.9), {base_lr = {0.01, 0.02}, max_lr = 0.1}) end, 'CyclicLR: expected 1 values for base_lr, got 2')
    raises(function() optim.CyclicLR(sgd(0.9), {base_lr = 0.01, max_lr = 0.1, scale_fn = 2}) end,
      "CyclicLR: option 'scale_fn' must be a function, got number")
    -- as PyTorch 1.13: cycle_momentum (the default) needs a 'momentum' option
    local adam = optim.Adam({lunet.zeros(1)}, {lr = 0.1})
    raises(function() optim.CyclicLR(adam, {base_lr = 0.01, max_lr = 0.1}) end,
      'CyclicLR: optimizer must support momentum with `cycle_momentum` option enabled')
    assert.are.same({0.01}, optim.CyclicLR(adam, {base_lr = 0.01, max_lr = 0.1, cycle_momentum = false}):get_last_lr())
    raises(function() p:load_state_dict(3) end, 'ReduceLROnPlateau:load_state_dict: expected a table, got number')
    local seq = optim.SequentialLR(opt, {a, optim.ConstantLR(opt)}, {2})
    raises(function() seq:load_state_dict({_schedulers = {}}) end, 'SequentialLR:load_state_dict: expected the states of 2 schedulers')
  end)

  it("point at the caller's line", function()
    local opt = sgd()
    local err = raises(function() optim.ReduceLROnPlateau(opt, {mode = 'mean'}) end, 'ReduceLROnPlateau: mode')
    assert.matches('lr_scheduler_more_spec.lua:%d+: ReduceLROnPlateau', err)
    local p = optim.ReduceLROnPlateau(opt)
    err = raises(function() p:step() end, 'ReduceLROnPlateau:step')
    assert.matches('lr_scheduler_more_spec.lua:%d+: ReduceLROnPlateau:step', err)
    err = raises(function() optim.CyclicLR(optim.Adam({lunet.zeros(1)}, {lr = 0.1}), {base_lr = 0.01, max_lr = 0.1}) end, 'CyclicLR')
    assert.matches('lr_scheduler_more_spec.lua:%d+: CyclicLR', err)
    err = raises(function() optim.SequentialLR(opt, {schedulers = {optim.ConstantLR(opt)}, milestones = {1}}) end, 'SequentialLR')
    assert.matches('lr_scheduler_more_spec.lua:%d+: SequentialLR', err)
  end)
end)

describe('lunet.fit with the new schedulers', function()
  local nn, data = lunet.nn, lunet.data
  local function setup()
    lunet.manual_seed(3)
    local model = nn.Sequential(nn.Linear(4, 3))
    local opt = optim.SGD(model:parameters(), {lr = 0.1})
    local ds = data.TensorDataset(lunet.randn(16, 4), lunet.randint(1, 4, {16}):long())
    return model, opt, data.DataLoader(ds, {batch_size = 8})
  end

  it('steps ReduceLROnPlateau with the validation loss, or the training loss without one', function()
    for _, with_val in ipairs({true, false}) do
      local model, opt, loader = setup()
      local sched = optim.ReduceLROnPlateau(opt, {patience = 0, factor = 0.5})
      local fed = {}
      local step = sched.step
      sched.step = function(self, m) fed[#fed + 1] = m; return step(self, m) end
      local hist = lunet.fit(model, loader, {epochs = 3, optimizer = opt, scheduler = sched, quiet = true, progress = false,
        val_loader = with_val and loader or nil})
      assert.are.equal(3, #fed)
      for e, rec in ipairs(hist) do
        assert.are.equal(with_val and rec.val_loss or rec.train_loss, fed[e])
        assert.is_number(fed[e])
      end
      assert.are.equal(opt.param_groups[1].lr, sched:get_last_lr()[1])
    end
  end)

  it('steps a SequentialLR each epoch, and refuses a per-step ReduceLROnPlateau', function()
    local model, opt, loader = setup()
    local sched = optim.SequentialLR(opt, {schedulers = {optim.LinearLR(opt, {start_factor = 0.5, total_iters = 2}),
      optim.ExponentialLR(opt, 0.5)}, milestones = {2}})
    local hist = lunet.fit(model, loader, {epochs = 4, optimizer = opt, scheduler = sched, quiet = true, progress = false})
    for e, want in ipairs({0.05, 0.075, 0.1, 0.05}) do   -- (the lr each epoch trained with)
      assert(math.abs(hist[e].lr - want) < 1e-15, ('epoch %d: lr %.17g, expected %g'):format(e, hist[e].lr, want))
    end
    local ok, err = pcall(lunet.fit, model, loader, {epochs = 1, optimizer = opt, scheduler = optim.ReduceLROnPlateau(opt),
      scheduler_step = 'step', quiet = true, progress = false})
    assert.is_false(ok)
    assert.matches("fit: a ReduceLROnPlateau steps on the epoch's loss: it needs scheduler_step = 'epoch'", err, 1, true)
  end)
end)
