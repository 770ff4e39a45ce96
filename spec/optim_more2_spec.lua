-- lunet.optim.Rprop, ASGD, LBFGS and optim.swa_utils (AveragedModel, SWALR,
-- update_bn) against PyTorch 1.13 (spec/fixtures/optim_more2.safetensors, from
-- tools/gen_optim_more2_fixtures.py).
local lunet = require 'lunet'
local optim, nn = lunet.optim, lunet.nn
local swa = optim.swa_utils
local fx = require 'support.fixtures'

local T, CASES = fx.load_fixture('optim_more2')
local SHAPES = {{2, 3}, {4}}
local TOL = {float32 = 1e-6, float64 = 1e-12}

local function by_kind(kind)
  local out = {}
  for _, c in ipairs(CASES) do if c.kind == kind then out[#out + 1] = c end end
  return out
end
local function find(name)
  for _, c in ipairs(CASES) do if c.name == name then return c end end
  error('no case ' .. name)
end

-- max |a - b| / max(1, max |b|)
local function near(a, b, tol, what)
  local d = fx.maxdiff(a:reshape(-1), b:reshape(-1))
  local scale = math.max(1, b:double():abs():max():item())
  if not (d / scale <= tol) then error(('%s: off by %g (tolerance %g)'):format(what, d, tol * scale), 2) end
end

local function flat(ps)
  local v = {}
  for i, p in ipairs(ps) do v[i] = p:reshape(-1) end
  return lunet.cat(v, 1)
end

-- ---- Rprop and ASGD ------------------------------------------------------------------------

-- the generator's gradient: g = p * a + b (tools/gen_optim_fixtures.py)
local function grad_of(p, k, s)
  local n, a, b = p:numel(), {}, {}
  for i = 1, n do a[i] = 0.5 + 0.1 * ((i + k) % 5); b[i] = 0.3 * math.sin(1.3 * s + 0.7 * i + k) end
  local dt = {dtype = p.dtype}
  return (p:reshape(-1) * lunet.tensor(a, dt) + lunet.tensor(b, dt)):view(p:size())
end

local function step_params(case)
  local init, ps, off = T[case.name .. '.init'], {}, 0
  for k, shape in ipairs(SHAPES) do
    local n = shape[2] and shape[1] * shape[2] or shape[1]
    ps[k] = init:narrow(1, off + 1, n):clone():view(shape)
    off = off + n
  end
  return ps
end

local function step_opt(case, ps)
  local cls = optim[case.optimizer]
  if #case.groups == 1 then return cls(ps, case.groups[1]) end
  local groups = {}
  for i, g in ipairs(case.groups) do
    local gg = {params = {ps[i]}}
    for k, v in pairs(g) do gg[k] = v end
    groups[i] = gg
  end
  return cls(groups)
end

local function run_steps(case, ps, opt, from, to)
  for s = from, to do
    for k, p in ipairs(ps) do
      local skip = false
      for _, x in ipairs(case.skips) do if k == 2 and x == s then skip = true end end
      p.grad = (not skip) and grad_of(p, k, s) or nil
    end
    opt:step()
    near(flat(ps), T[case.name .. '.traj'][s], TOL[case.dtype], ('%s step %d'):format(case.name, s))
    if case.optimizer == 'ASGD' then
      local ax = {}
      for k, p in ipairs(ps) do ax[k] = opt.state[p] and opt.state[p].ax or lunet.zeros_like(p) end
      near(flat(ax), T[case.name .. '.ax'][s], TOL[case.dtype], ('%s ax at step %d'):format(case.name, s))
    end
  end
end

describe('optim.Rprop and optim.ASGD match PyTorch over 20 steps', function()
  for _, case in ipairs(by_kind('steps')) do
    it(case.name, function()
      local ps = step_params(case)
      run_steps(case, ps, step_opt(case, ps), 1, 20)
    end)
  end

  for _, name in ipairs({'rprop_etas_sizes.float64', 'rprop_maximize_groups.float32', 'asgd_t0_wd.float64',
                         'asgd_maximize_groups.float64'}) do
    it('state_dict round trip resumes identically: ' .. name, function()
      local case = find(name)
      local ps = step_params(case)
      local opt = step_opt(case, ps)
      run_steps(case, ps, opt, 1, 10)
      local sd = opt:state_dict()
      local ps2 = {}
      for k, p in ipairs(ps) do ps2[k] = p:clone() end
      local opt2 = step_opt(case, ps2)
      opt2:load_state_dict(sd)
      run_steps(case, ps, opt, 11, 20)
      run_steps(case, ps2, opt2, 11, 20)
      for k = 1, #ps do assert.are.equal(0, fx.maxdiff(ps2[k], ps[k])) end
    end)
  end

  it('keeps state under torch names', function()
    local p = lunet.zeros(3, {dtype = 'float64'})
    local r = optim.Rprop({p}, {lr = 0.1})
    p.grad = lunet.ones(3, {dtype = 'float64'})
    r:step()
    local st = r:state_dict().state[1]
    assert.are.equal(1, st.step)
    assert.are.same({0.1 * 1, 0.1, 0.1}, st.step_size:totable())
    assert.are.same({1, 1, 1}, st.prev:totable())
    local a = optim.ASGD({p}, {lr = 0.1, t0 = 0})
    a:step(); a:step()
    st = a:state_dict().state[1]
    assert.are.equal(2, st.step)
    assert.are.equal(0.5, st.mu)
    assert.is_true(lunet.is_tensor(st.ax))
    assert.is_true(math.abs(st.eta - 0.1 / (1 + 1e-4 * 0.1 * 2) ^ 0.75) < 1e-8)
  end)

  it('rejects bad options with named errors', function()
    local p = {lunet.zeros(2)}
    assert.has_error(function() optim.Rprop(p, {etas = {1.5, 1.2}}) end,
      'Rprop: invalid eta values: 1.5, 1.2 (expected 0 < etaminus < 1 < etaplus)')
    assert.has_error(function() optim.Rprop(p, {step_sizes = {1}}) end,
      'Rprop: step_sizes must be a table of two numbers {min, max}')
    assert.has_error(function() optim.Rprop(p, {step_sizes = {1, 0.5}}) end,
      'Rprop: invalid step_sizes: 1, 0.5 (expected 0 <= min <= max)')
    assert.has_error(function() optim.Rprop(p, {eta = {0.5, 1.2}}) end,
      "Rprop: unknown option 'eta' (did you mean 'etas'?)")
    assert.has_error(function() optim.ASGD(p, {lr = -1}) end, 'ASGD: invalid learning rate: -1 (expected >= 0)')
    assert.has_error(function() optim.ASGD(p, {lambda = 1}) end, "ASGD: unknown option 'lambda' (did you mean 'lambd'?)")
    -- PyTorch's positional order
    local a = optim.ASGD(p, 0.1, 1e-3, 0.5, 10, 0.01)
    assert.are.same({0.1, 1e-3, 0.5, 10, 0.01}, {a.param_groups[1].lr, a.param_groups[1].lambd,
      a.param_groups[1].alpha, a.param_groups[1].t0, a.param_groups[1].weight_decay})
  end)
end)

-- ---- LBFGS ---------------------------------------------------------------------------------

local function lbfgs_problem(case)
  local init, ps, off = T[case.name .. '.init'], {}, 0
  for k, shape in ipairs(case.shapes) do
    local n = shape[1]
    ps[k] = init:narrow(1, off + 1, n):clone():view(shape)
    ps[k].requires_grad = true
    off = off + n
  end
  local d = {}
  for _, k in ipairs(case.data) do d[k] = T[case.name .. '.' .. k] end
  local loss
  if case.problem == 'lsq' then
    loss = function()
      local r = d.A:mv(ps[1]) + ps[2] - d.b
      return (r * r):mean()
    end
  elseif case.problem == 'logistic' then
    loss = function()
      local z = d.X:mv(ps[1]) + ps[2]
      return (z:exp():log1p() - d.y * z):mean() + (ps[1] * ps[1]):sum() * 0.05
    end
  else
    loss = function()
      local x1, x2 = ps[1]:narrow(1, 1, 1), ps[1]:narrow(1, 2, 1)
      local a, b = 1 - x1, x2 - x1 * x1
      return (a * a + b * b * 100):sum()
    end
  end
  return ps, loss
end

-- float64 to 1e-10. float32 is looser: torch keeps the line search's and the
-- two-loop recursion's scalars in float32 tensors and sums its dot products in
-- another order, and Rosenbrock's curved valley grows those 1-ulp differences
-- (to 1e-2 by the 4th step with strong_wolfe).
local LBFGS_TOL = {float32 = 2e-4, float64 = 1e-10}
local function lbfgs_tol(case)
  if case.dtype == 'float32' and case.problem == 'rosenbrock' then return 2e-2 end
  return LBFGS_TOL[case.dtype]
end

local function lbfgs_run(case, ps, opt, loss, from, to)
  local closure = function()
    opt:zero_grad()
    local l = loss()
    l:backward()
    return l
  end
  for s = from, to do
    local l = opt:step(closure)
    local what = ('%s step %d'):format(case.name, s)
    near(flat(ps), T[case.name .. '.traj'][s], lbfgs_tol(case), what)
    near(lunet.tensor({l:item()}, {dtype = 'float64'}), T[case.name .. '.loss']:narrow(1, s, 1),
      lbfgs_tol(case), what .. ' loss')
    if case.dtype == 'float64' then
      local st = opt.state[ps[1]]
      assert.are.same(T[case.name .. '.evals'][s]:totable(), {st.func_evals, st.n_iter}, what .. ' evals')
    end
  end
end

describe('optim.LBFGS matches PyTorch', function()
  for _, case in ipairs(by_kind('lbfgs')) do
    local o = {}
    for k, v in pairs(case.opts) do o[#o + 1] = k .. '=' .. tostring(v) end
    table.sort(o)
    it(('%s (%s)'):format(case.name, table.concat(o, ' ')), function()
      local ps, loss = lbfgs_problem(case)
      lbfgs_run(case, ps, optim.LBFGS(ps, case.opts), loss, 1, case.steps)
    end)
  end

  for _, name in ipairs({'lbfgs_logistic.float64', 'lbfgs_logistic_wolfe.float64', 'lbfgs_rosenbrock.float64'}) do
    it('state_dict round trip resumes identically: ' .. name, function()
      local case = find(name)
      local ps, loss = lbfgs_problem(case)
      local opt = optim.LBFGS(ps, case.opts)
      lbfgs_run(case, ps, opt, loss, 1, 2)
      local sd = opt:state_dict()
      assert.is_true(lunet.is_tensor(sd.state[1].d))
      assert.is_true(#sd.state[1].old_dirs >= 1)
      assert.are.equal(1, #sd.param_groups)
      -- a fresh optimizer on the same params, after the first goes on
      local saved = {}
      for k, p in ipairs(ps) do saved[k] = p:detach():clone() end
      lbfgs_run(case, ps, opt, loss, 3, case.steps)
      local after = flat(ps)
      lunet.no_grad(function() for k, p in ipairs(ps) do p:copy_(saved[k]) end end)
      local opt2 = optim.LBFGS(ps)
      opt2:load_state_dict(sd)
      assert.are.equal(case.opts.history_size or 100, opt2.param_groups[1].history_size)
      lbfgs_run(case, ps, opt2, loss, 3, case.steps)
      assert.are.equal(0, fx.maxdiff(flat(ps), after))
    end)
  end

  it('takes a closure returning a number, stops at an optimum, names its errors', function()
    local w = lunet.tensor({3.0, -1.0}, {dtype = 'float64', requires_grad = true})
    local opt = optim.LBFGS({w}, {line_search_fn = 'strong_wolfe'})
    local calls = 0
    local function closure()
      calls = calls + 1
      opt:zero_grad()
      local l = ((w - 1) * (w - 1)):sum()
      l:backward()
      return l:item()
    end
    assert.are.equal(8, opt:step(closure))   -- (the loss at the start)
    assert.is_true(fx.maxdiff(w, lunet.tensor({1, 1}, {dtype = 'float64'})) < 1e-8)
    calls = 0
    opt:step(closure)
    assert.are.equal(1, calls)   -- already optimal: one evaluation
    assert.are.equal(25, opt.param_groups[1].max_eval)
    assert.has_error(function() opt:step() end,
      'LBFGS:step: expected a closure that re-evaluates the model and returns the loss, got nil')
    assert.has_error(function() opt:step(function() return 'x' end) end,
      'LBFGS:step: the closure must return the loss (a number or a one-element tensor), got string')
    assert.has_error(function() optim.LBFGS({w}, {line_search_fn = 'backtracking'}) end,
      "LBFGS: only 'strong_wolfe' is supported as line_search_fn, got backtracking")
    assert.has_error(function() optim.LBFGS({w}, {history = 3}) end,
      "LBFGS: unknown option 'history' (did you mean 'history_size'?)")
    assert.has_error(function() optim.LBFGS({w}, {max_iter = 0}) end,
      'LBFGS: invalid max_iter value: 0 (expected a positive integer)')
    assert.has_error(function() optim.LBFGS({{params = {w}}, {params = {lunet.zeros(2)}}}) end,
      "LBFGS: doesn't support per-parameter options (param groups): give one list of params")
    assert.has_error(function() optim.LBFGS({w, lunet.zeros(2)}) end,
      'LBFGS: param 2 is float32 on cpu:0, param 1 float64 on cpu:0: all params must share a dtype and device')
    assert.has_error(function() opt:add_param_group({params = {lunet.zeros(2)}}) end,
      "LBFGS:add_param_group: LBFGS doesn't support per-parameter options (param groups)")
    local o = optim.LBFGS({w}, 0.5, 7)   -- PyTorch's positional order
    assert.are.same({0.5, 7, 8}, {o.param_groups[1].lr, o.param_groups[1].max_iter, o.param_groups[1].max_eval})
  end)
end)

-- ---- swa_utils -----------------------------------------------------------------------------

describe('optim.swa_utils.AveragedModel', function()
  for _, case in ipairs(by_kind('avg')) do
    it(case.name .. ' matches PyTorch', function()
      local model = nn.Linear(3, 2):double()
      local avg_fn = case.ema and function(a, p) return a * 0.9 + p * 0.1 end or nil
      local am = swa.AveragedModel(model, {avg_fn = avg_fn})
      assert.are.equal(0, am.n_averaged:item())
      for i = 1, 3 do
        lunet.no_grad(function()
          model.weight:copy_(T[case.name .. '.w' .. i]); model.bias:copy_(T[case.name .. '.b' .. i])
        end)
        am:update_parameters(model)
        near(am.module.weight, T[case.name .. '.aw' .. i], 1e-14, 'weight ' .. i)
        near(am.module.bias, T[case.name .. '.ab' .. i], 1e-14, 'bias ' .. i)
      end
      assert.are.equal(case.n_averaged, am.n_averaged:item())
      assert.are.equal('int64', am.n_averaged.dtype)
      near(am(T[case.name .. '.x']), T[case.name .. '.out'], 1e-14, 'forward')
      -- the copy is its own: the model's params are untouched by the average
      assert.are.equal(0, fx.maxdiff(model.weight, T[case.name .. '.w3']))
      local sd = am:state_dict()
      assert.is_true(lunet.is_tensor(sd['module.weight']) and lunet.is_tensor(sd.n_averaged))
      assert.are.equal(2, #am:parameters())
    end)
  end

  it('averages buffers with use_buffers, and names its errors', function()
    local m = nn.BatchNorm1d(2):double()
    local am = swa.AveragedModel(m, {use_buffers = true})
    lunet.no_grad(function() m.running_mean:fill_(2) end)
    am:update_parameters(m)
    lunet.no_grad(function() m.running_mean:fill_(4) end)
    am:update_parameters(m)
    assert.are.same({3, 3}, am.module.running_mean:totable())
    assert.has_error(function() swa.AveragedModel(3) end, 'AveragedModel: model must be an nn.Module, got number')
    assert.has_error(function() swa.AveragedModel(m, {avgfn = 1}) end,
      "AveragedModel: unknown option 'avgfn' (did you mean 'avg_fn'?)")
    assert.has_error(function() am:update_parameters(nn.Linear(2, 2)) end,
      'AveragedModel:update_parameters: model has 2 params and buffers, the averaged model 5')
    local bad = swa.AveragedModel(m, {avg_fn = function() return 1 end})
    bad:update_parameters(m)
    assert.has_error(function() bad:update_parameters(m) end,
      'AveragedModel:update_parameters: avg_fn must return a tensor, got number')
  end)
end)

describe('optim.swa_utils.SWALR', function()
  for _, case in ipairs(by_kind('swalr')) do
    it(case.name .. ' lr sequence matches PyTorch', function()
      local groups = {}
      for i, lr in ipairs(case.lrs) do groups[i] = {params = {lunet.zeros(1)}, lr = lr} end
      local opt = optim.SGD(groups, {lr = case.lrs[1]})
      local sched = swa.SWALR(opt, case.opts)
      local seq = T[case.name .. '.lr']
      near(lunet.tensor(sched:get_last_lr(), {dtype = 'float64'}), seq[1], 1e-14, 'step 0')
      for s = 1, case.steps do
        opt:step(); sched:step()
        near(lunet.tensor(sched:get_last_lr(), {dtype = 'float64'}), seq[s + 1], 1e-14, 'step ' .. s)
        if s == 2 then   -- a round trip mid-anneal changes nothing
          local sd = sched:state_dict()
          sched = swa.SWALR(opt, case.opts)
          sched:load_state_dict(sd)
        end
      end
      for i, g in ipairs(opt.param_groups) do assert.are.equal(case.swa_lr[i], g.swa_lr) end
    end)
  end

  it('is optim.SWALR too, and names its errors', function()
    assert.are.equal(swa.SWALR, optim.SWALR)
    local opt = optim.SGD({lunet.zeros(1)}, {lr = 0.1})
    assert.has_error(function() swa.SWALR(opt, {}) end, 'SWALR: option swa_lr is required')
    assert.has_error(function() swa.SWALR(opt, {swa_lr = 0.1, anneal_strategy = 'exp'}) end,
      "SWALR: anneal_strategy must be 'cos' or 'linear', got exp")
    assert.has_error(function() swa.SWALR(opt, {swa_lr = 0.1, anneal_epochs = -1}) end,
      'SWALR: anneal_epochs must be an integer >= 0, got -1')
    assert.has_error(function() swa.SWALR(opt, {swa_lr = {0.1, 0.2}}) end,
      'SWALR: swa_lr must have one value per param group: swa_lr has 2, the optimizer 1 groups')
    assert.has_error(function() swa.SWALR(opt, {swa_lrr = 0.1}) end,
      "SWALR: unknown option 'swa_lrr' (did you mean 'swa_lr'?)")
    local s = swa.SWALR(opt, 0.01, 2, 'linear')   -- PyTorch's positional order
    assert.are.same({2, 'linear'}, {s.anneal_epochs, s.anneal_strategy})
  end)
end)

describe('optim.swa_utils.update_bn', function()
  for _, case in ipairs(by_kind('bn')) do
    it(case.name .. ' recomputes running stats as PyTorch', function()
      local model
      if case.conv then
        model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU()):double()
      else
        model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 5),
          nn.BatchNorm1d(5, {momentum = 0.3})):double()
      end
      local sd, prefix = {}, case.name .. '.sd.'
      for k, v in pairs(T) do if k:sub(1, #prefix) == prefix then sd[k:sub(#prefix + 1)] = v end end
      model:load_state_dict(sd)
      model:eval()
      local x1, x2, x3 = T[case.name .. '.x1'], T[case.name .. '.x2'], T[case.name .. '.x3']
      swa.update_bn({x1, {x2, lunet.zeros(1)}, x3}, model)
      local after = model:state_dict()
      prefix = case.name .. '.after.'
      local n = 0
      for k, v in pairs(T) do
        if k:sub(1, #prefix) == prefix then
          n = n + 1
          near(after[k:sub(#prefix + 1)], v, 1e-12, k)
        end
      end
      assert.is_true(n >= 5)
      assert.is_false(model.training)
      local momenta = {}
      for _, m in ipairs(model:modules()) do if m.num_features then momenta[#momenta + 1] = m.momentum end end
      assert.are.same(case.momenta, momenta)
    end)
  end

  it('takes a DataLoader or an iterator, leaves models without BatchNorm alone, names its errors', function()
    local model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2, {momentum = false}))
    local xs = lunet.randn(8, 2)
    local loader = lunet.data.DataLoader(lunet.data.TensorDataset(xs, lunet.zeros(8)), {batch_size = 8})
    swa.update_bn(loader, model)
    local bn = model:modules()[3]
    assert.is_nil(bn.momentum)   -- (a cumulative average before, and after)
    assert.are.equal(1, bn.num_batches_tracked:item())
    local mean = lunet.no_grad(function() return model:modules()[2](xs):mean(1) end)
    assert.is_true(fx.maxdiff(bn.running_mean, mean) < 1e-5)
    local i = 0
    swa.update_bn(function() i = i + 1; if i <= 2 then return xs end end, model)
    assert.are.equal(2, bn.num_batches_tracked:item())
    swa.update_bn({xs}, nn.Linear(2, 2))
    assert.has_error(function() swa.update_bn(3, model) end,
      'update_bn: loader must be a DataLoader, a list of batches or an iterator function, got number')
    assert.has_error(function() swa.update_bn({xs}, 3) end, 'update_bn: model must be an nn.Module, got number')
    -- a failing batch still restores the momenta
    local m2 = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    assert.has_error(function() swa.update_bn({lunet.randn(4, 3)}, m2) end)
    assert.are.equal(0.1, m2:modules()[3].momentum)
  end)
end)
