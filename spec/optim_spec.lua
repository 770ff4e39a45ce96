-- lunet.optim: optimizers, schedulers and clip_grad_norm against PyTorch 1.13
-- trajectories (spec/fixtures/optim_*.lua, from tools/gen_optim_fixtures.py).
local lunet = require 'lunet'
local optim = lunet.optim

local steps_fx = require 'fixtures.optim_steps'
local sched_fx = require 'fixtures.optim_sched'
local clip_fx = require 'fixtures.optim_clip'

local TOL = {float32 = 1e-5, float64 = 1e-11}
-- the optimizers added after these: held to 1e-6 (float32) and 1e-12 (float64)
local TIGHT = {Adagrad = true, Adamax = true, NAdam = true, RAdam = true, Adadelta = true}
local TOL_TIGHT = {float32 = 1e-6, float64 = 1e-12}

local function make_params(init, dtype)
  local ps = {}
  for k, vals in ipairs(init) do
    ps[k] = lunet.tensor(vals, {dtype = dtype}):view(steps_fx.shapes[k])
  end
  return ps
end

-- The generator's gradient: g = p * a + b (see tools/gen_optim_fixtures.py).
local coef_cache = {}
local function grad_of(p, k, s)
  local n, dt = p:numel(), p.dtype
  local key = dt .. k .. ':' .. n
  local a = coef_cache[key]
  if not a then
    local t = {}
    for i = 1, n do t[i] = 0.5 + 0.1 * ((i + k) % 5) end
    a = lunet.tensor(t, {dtype = dt})
    coef_cache[key] = a
  end
  local b = {}
  for i = 1, n do b[i] = 0.3 * math.sin(1.3 * s + 0.7 * i + k) end
  return (p:reshape(-1) * a + lunet.tensor(b, {dtype = dt})):view(p:size())
end

local function make_opt(case, ps)
  local cls = optim[case.optimizer]
  if #case.groups == 1 then return cls(ps, case.groups[1]) end
  local groups = {}
  for i, g in ipairs(case.groups) do
    local gg = {params = {ps[i]}}
    for k, v in pairs(g) do gg[k] = v end
    groups[i] = gg
  end
  return cls(groups, {lr = case.groups[1].lr})
end

local function set_grads(case, ps, s)
  local skip = false
  for _, x in ipairs(case.skips) do if x == s then skip = true end end
  for k, p in ipairs(ps) do
    if k == 2 and skip then p.grad = nil else p.grad = grad_of(p, k, s) end
  end
end

-- Runs steps from..to of a case on (ps, opt), checking each against PyTorch.
local function run(case, ps, opt, from, to)
  for s = from, to do
    set_grads(case, ps, s)
    opt:step()
    for k, p in ipairs(ps) do
      local tol = (TIGHT[case.optimizer] and TOL_TIGHT or TOL)[case.dtype]
      local ok, err = pcall(assert.tensor_near, p:reshape(-1), case.expected[s][k], tol)
      if not ok then
        error(('%s %s: step %d, param %d: %s'):format(case.name, case.dtype, s, k, tostring(err)), 0)
      end
    end
  end
end

describe('optim optimizers match PyTorch over 20 steps', function()
  local by_name, order = {}, {}
  for _, case in ipairs(steps_fx.cases) do
    if not by_name[case.name] then by_name[case.name] = {}; order[#order + 1] = case.name end
    table.insert(by_name[case.name], case)
  end
  for _, name in ipairs(order) do
    local c = by_name[name][1]
    local desc = {}
    for k, v in pairs(c.groups[1]) do desc[#desc + 1] = k .. '=' .. tostring(type(v) == 'table' and '{..}' or v) end
    table.sort(desc)
    it(('%s %s(%s)%s, float32 and float64'):format(name, c.optimizer, table.concat(desc, ' '),
      #c.groups > 1 and ' +group' or ''), function()
      for _, case in ipairs(by_name[name]) do
        local ps = make_params(case.init, case.dtype)
        run(case, ps, make_opt(case, ps), 1, steps_fx.steps)
      end
    end)
  end
end)

local function find_case(name, dtype)
  for _, c in ipairs(steps_fx.cases) do if c.name == name and c.dtype == dtype then return c end end
end

describe('optim state_dict', function()
  for _, name in ipairs({'sgd_nesterov', 'adam_amsgrad_wd', 'rmsprop_centered_momentum_wd', 'adam_skip',
                         'adagrad_lr_decay_init_wd', 'adagrad_eps_maximize_skip', 'adamax_groups_skip',
                         'nadam_skip', 'nadam_momentum_decay_wd', 'radam_groups_skip', 'adadelta_rho_wd_maximize'}) do
    it('round trip resumes identically: ' .. name, function()
      local case = find_case(name, 'float64')
      local ps = make_params(case.init, case.dtype)
      local opt = make_opt(case, ps)
      run(case, ps, opt, 1, 10)
      local sd = opt:state_dict()
      -- a fresh optimizer on copies of the params, resumed from the saved state
      local ps2 = {}
      for k, p in ipairs(ps) do ps2[k] = p:clone() end
      local opt2 = make_opt(case, ps2)
      opt2:load_state_dict(sd)
      run(case, ps, opt, 11, 20)        -- the saved copies stay untouched meanwhile
      run(case, ps2, opt2, 11, 20)
      for k = 1, #ps do assert.tensor_near(ps2[k], ps[k], 0) end
    end)
  end

  it('is plain tables of tensors and numbers, params numbered across groups', function()
    local case = find_case('sgd_groups_skip', 'float32')
    local ps = make_params(case.init, case.dtype)
    local opt = make_opt(case, ps)
    run(case, ps, opt, 1, 2)
    local sd = opt:state_dict()
    assert.are.same({1}, sd.param_groups[1].params)
    assert.are.same({2}, sd.param_groups[2].params)
    assert.are.equal(0.03, sd.param_groups[2].lr)
    assert.is_true(lunet.is_tensor(sd.state[1].momentum_buffer))
    assert.is_nil(sd.state[2].momentum_buffer)   -- group 2 has no momentum
    -- the saved tensors are copies
    run(case, ps, opt, 3, 3)
    assert.are_not.same(sd.state[1].momentum_buffer:totable(), opt.state[ps[1]].momentum_buffer:totable())
    local adam = optim.Adam({lunet.zeros(3)})
    assert.has_error(function() adam:load_state_dict(sd) end,
      'Adam:load_state_dict: the saved state has 2 param groups, this optimizer 1')
  end)
end)

describe('optim behaviour', function()
  it('zero_grad zeroes grads in place by default, drops them with set_to_none', function()
    local p, q = lunet.ones(3), lunet.ones(2)
    local g = lunet.tensor{1, 2, 3}
    p.grad = g
    local opt = optim.SGD({p, q}, {lr = 0.1})
    opt:zero_grad()
    assert.are.equal(g, p.grad)
    assert.are.same({0, 0, 0}, g:totable())
    assert.is_nil(q.grad)
    opt:zero_grad(true)
    assert.is_nil(p.grad)
    opt:step()                      -- no grads: nothing moves
    assert.are.same({1, 1, 1}, p:totable())
  end)

  it('updates a non-contiguous param and a grad of another dtype', function()
    local base = lunet.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = 'float64'})
    local col = base:narrow(2, 2, 1)               -- {2, 5}, stride 3
    col.grad = lunet.tensor({{1}, {-2}})            -- float32 grad
    local opt = optim.SGD({col}, {lr = 0.5, momentum = 0.9})
    opt:step(); opt:step()
    -- step 1: p -= 0.5*g; step 2: buf = 0.9g + g = 1.9g, p -= 0.95g
    assert.tensor_near(base, {{1, 2 - 1.45, 3}, {4, 5 + 2.9, 6}}, 1e-12)
  end)

  it('prints its param groups', function()
    local opt = optim.Adam({lunet.zeros(2)}, {lr = 0.01})
    local s = tostring(opt)
    assert.truthy(s:find('^Adam %(\nParameter Group 1\n'))
    assert.truthy(s:find('    betas: %(0.9, 0.999%)'))
    assert.truthy(s:find('    lr: 0.01\n'))
    assert.truthy(tostring(optim.StepLR(opt, 5)):find('StepLR', 1, true))
  end)

  it('errors for bad hyper-parameters name the function', function()
    local p = {lunet.zeros(2)}
    local cases = {
      {function() optim.SGD(p, {lr = -0.1}) end, 'SGD: invalid learning rate: -0.1 (expected >= 0)'},
      {function() optim.SGD(p) end, 'SGD: option lr is required'},
      {function() optim.SGD(p, {lr = 0.1, nesterov = true}) end, 'SGD: nesterov momentum requires a momentum and zero dampening'},
      {function() optim.SGD(p, {lr = 0.1, momentun = 0.9}) end, "SGD: unknown option 'momentun' (did you mean 'momentum'?)"},
      {function() optim.Adam(p, {betas = {1.0, 0.9}}) end, 'Adam: invalid beta parameter at index 1: 1 (expected in [0, 1))'},
      {function() optim.AdamW(p, {eps = -1}) end, 'AdamW: invalid epsilon value: -1 (expected >= 0)'},
      {function() optim.RMSprop(p, {momentum = -1}) end, 'RMSprop: invalid momentum value: -1 (expected >= 0)'},
      {function() optim.RMSprop(p, {weight_decay = 0 / 0}) end, 'RMSprop: invalid weight_decay value: nan (expected >= 0)'},
      {function() optim.Adam({}) end, 'Adam: expected a non-empty list of tensors or param groups, got an empty list'},
      {function() optim.Adam({lunet.zeros(2, {dtype = 'int32'})}) end, 'Adam: param 1 is int32, expected float32 or float64'},
      {function() optim.StepLR(optim.SGD(p, {lr = 1}), {}) end, 'StepLR: option step_size is required'},
      {function() optim.OneCycleLR(optim.SGD(p, {lr = 1}), {max_lr = 1}) end,
        'OneCycleLR: you must define either total_steps or (epochs and steps_per_epoch)'},
      {function() optim.clip_grad_norm(p, 1, -2) end, 'clip_grad_norm: invalid norm_type -2 (expected > 0 or math.huge)'},
      -- (a negative max_norm scaled the gradients by a negative factor, silently)
      {function() optim.clip_grad_norm(p, -1) end, 'clip_grad_norm: max_norm must be a number >= 0, got -1'},
      {function() optim.clip_grad_norm(p, 0 / 0) end, 'clip_grad_norm: max_norm must be a number >= 0, got nan'},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok)
      assert.are.equal(c[2], tostring(err):gsub('^[^:]*:%d+: ', ''))
    end
    -- a grad of another shape is refused where it is set (the step's C check stays behind it)
    local q = lunet.zeros(2)
    local ok, err = pcall(function() q.grad = lunet.zeros(3) end)
    assert.is_false(ok)
    assert.matches('grad: a {3} tensor on cpu:0 cannot be the gradient of a {2} tensor on cpu:0', err, 1, true)
    -- and the error points at the caller's line
    local ok, err = pcall(function() optim.SGD(p, {lr = -1}) end)
    assert.truthy(tostring(err):find('optim_spec.lua:%d+: SGD'))
  end)
end)

describe('optim Adagrad, Adamax, NAdam, RAdam, Adadelta', function()
  local function err_of(f)
    local ok, err = pcall(f)
    assert.is_false(ok, 'no error')
    return (tostring(err):gsub('^[^:]*:%d+: ', ''))
  end
  local function p() return {lunet.zeros(2)} end

  it("take PyTorch 1.13's defaults, positional forms and option names", function()
    local cases = {
      {'Adagrad', {lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10, maximize = false},
        {0.1, 0.05, 0.01, 0.5, 1e-9}, {lr = 0.1, lr_decay = 0.05, weight_decay = 0.01, initial_accumulator_value = 0.5, eps = 1e-9}},
      {'Adamax', {lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, maximize = false},
        {0.1, {0.8, 0.9}, 1e-6, 0.01}, {lr = 0.1, betas = {0.8, 0.9}, eps = 1e-6, weight_decay = 0.01}},
      {'NAdam', {lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3},
        {0.1, {0.8, 0.9}, 1e-6, 0.01, 0.02}, {lr = 0.1, betas = {0.8, 0.9}, eps = 1e-6, weight_decay = 0.01, momentum_decay = 0.02}},
      {'RAdam', {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0},
        {0.1, {0.8, 0.9}, 1e-6, 0.01}, {lr = 0.1, betas = {0.8, 0.9}, eps = 1e-6, weight_decay = 0.01}},
      {'Adadelta', {lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false},
        {0.5, 0.8, 1e-5, 0.01}, {lr = 0.5, rho = 0.8, eps = 1e-5, weight_decay = 0.01}},
    }
    for _, c in ipairs(cases) do
      local name, defaults, pos, named = c[1], c[2], c[3], c[4]
      local function group_of(opt)
        local g = {}
        for k, v in pairs(opt.param_groups[1]) do if k ~= 'params' then g[k] = v end end
        return g
      end
      assert.are.same(defaults, group_of(optim[name](p())), name .. ' defaults')
      local want = {}
      for k, v in pairs(defaults) do want[k] = v end
      for k, v in pairs(named) do want[k] = v end
      assert.are.same(want, group_of(optim[name](p(), unpack(pos))), name .. ' positional')
      assert.are.same(want, group_of(optim[name](p(), named)), name .. ' options')
      -- positional, then an options table (PyTorch's keyword-only maximize)
      if defaults.maximize ~= nil then
        assert.is_true(optim[name](p(), pos[1], {maximize = true}).param_groups[1].maximize)
      end
      local extra = {unpack(pos)}
      extra[#extra + 1] = 0
      assert.matches(name .. ': too many arguments', err_of(function() optim[name](p(), unpack(extra)) end), 1, true)
    end
  end)

  it("errors name the optimizer with torch's wording; unknown options (NAdam and RAdam have no maximize in 1.13)", function()
    local cases = {
      {function() optim.Adagrad(p(), {lr = -1}) end, 'Adagrad: invalid learning rate: -1 (expected >= 0)'},
      {function() optim.Adagrad(p(), {lr_decay = -0.5}) end, 'Adagrad: invalid lr_decay value: -0.5 (expected >= 0)'},
      {function() optim.Adagrad(p(), {weight_decay = -1}) end, 'Adagrad: invalid weight_decay value: -1 (expected >= 0)'},
      {function() optim.Adagrad(p(), {initial_accumulator_value = -1}) end,
        'Adagrad: invalid initial_accumulator_value value: -1 (expected >= 0)'},
      {function() optim.Adagrad(p(), {eps = 0 / 0}) end, 'Adagrad: invalid epsilon value: nan (expected >= 0)'},
      {function() optim.Adagrad(p(), {lr_decy = 0.1}) end, "Adagrad: unknown option 'lr_decy' (did you mean 'lr_decay'?)"},
      {function() optim.Adamax(p(), {lr = -1}) end, 'Adamax: invalid learning rate: -1 (expected >= 0)'},
      {function() optim.Adamax(p(), {betas = {0.9, 1}}) end, 'Adamax: invalid beta parameter at index 2: 1 (expected in [0, 1))'},
      {function() optim.Adamax(p(), {betas = {0.9}}) end, 'Adamax: betas must be a table of two numbers {beta1, beta2}'},
      {function() optim.Adamax(p(), {betas = 0.9}) end, "Adamax: option 'betas' must be a table, got number"},
      {function() optim.Adamax(p(), {eps = -1}) end, 'Adamax: invalid epsilon value: -1 (expected >= 0)'},
      {function() optim.NAdam(p(), {betas = {-0.1, 0.9}}) end, 'NAdam: invalid beta parameter at index 1: -0.1 (expected in [0, 1))'},
      {function() optim.NAdam(p(), {momentum_decay = -1}) end, 'NAdam: invalid momentum_decay value: -1 (expected >= 0)'},
      {function() optim.NAdam(p(), {weight_decay = -1}) end, 'NAdam: invalid weight_decay value: -1 (expected >= 0)'},
      {function() optim.NAdam(p(), {maximize = true}) end,
        "NAdam: unknown option 'maximize' (known: betas, eps, lr, momentum_decay, weight_decay)"},
      {function() optim.RAdam(p(), {maximize = true}) end, "RAdam: unknown option 'maximize' (known: betas, eps, lr, weight_decay)"},
      {function() optim.RAdam(p(), {eps = -1}) end, 'RAdam: invalid epsilon value: -1 (expected >= 0)'},
      {function() optim.RAdam(p(), {betas = {0.9, 0 / 0}}) end, 'RAdam: invalid beta parameter at index 2: nan (expected in [0, 1))'},
      {function() optim.Adadelta(p(), {rho = 1.5}) end, 'Adadelta: invalid rho value: 1.5 (expected in [0, 1])'},
      {function() optim.Adadelta(p(), {lr = -1}) end, 'Adadelta: invalid learning rate: -1 (expected >= 0)'},
      {function() optim.Adadelta(p(), {eps = -1}) end, 'Adadelta: invalid epsilon value: -1 (expected >= 0)'},
      {function() optim.Adadelta(p(), {weight_decay = -1}) end, 'Adadelta: invalid weight_decay value: -1 (expected >= 0)'},
      {function() optim.Adadelta(p(), 'x') end, "Adadelta: option 'lr' must be a number, got string"},
      -- a param group's own bad value, and one set later then loaded
      {function() optim.RAdam({{params = p(), betas = {1, 0.9}}}) end, 'RAdam: invalid beta parameter at index 1: 1 (expected in [0, 1))'},
    }
    for _, c in ipairs(cases) do assert.are.equal(c[2], err_of(c[1])) end
    -- a hyper-parameter broken after construction is refused by the C kernel's check, named
    local q = lunet.zeros(2)
    local opt = optim.Adadelta({q})
    opt.param_groups[1].rho = 2
    q.grad = lunet.ones(2)
    assert.are.equal('Adadelta:step: adadelta_step_: invalid rho 2, expected in [0, 1]', err_of(function() opt:step() end))
    opt = optim.NAdam({q})
    opt.param_groups[1].momentum_decay = -1
    assert.are.equal('NAdam:step: nadam_step_: invalid momentum_decay -1, expected >= 0', err_of(function() opt:step() end))
  end)

  it('keep state under PyTorch\'s names; Adagrad makes it at construction, as PyTorch', function()
    local a, b = lunet.tensor{1, 2}, lunet.tensor{3}
    local ada = optim.Adagrad({{params = {a}}, {params = {b}, initial_accumulator_value = 2}}, {initial_accumulator_value = 0.5})
    local sd = ada:state_dict()
    assert.are.equal(0, sd.state[1].step)
    assert.are.same({0.5, 0.5}, sd.state[1].sum:totable())
    assert.are.same({0.5}, sd.state[2].sum:totable())   -- (PyTorch fills every sum with the constructor's value)
    local c = lunet.tensor{5}
    ada:add_param_group({params = {c}, initial_accumulator_value = 2})
    c.grad = lunet.tensor{1}
    ada:step()                                           -- a later group's param: its own value
    assert.are.same({3}, ada.state[c].sum:totable())
    assert.are.same({0.5, 0.5}, ada.state[a].sum:totable()) -- no grad: untouched
    local names = {Adamax = {'exp_avg', 'exp_inf', 'step'}, NAdam = {'exp_avg', 'exp_avg_sq', 'mu_product', 'step'},
                   RAdam = {'exp_avg', 'exp_avg_sq', 'step'}, Adadelta = {'acc_delta', 'square_avg', 'step'}}
    for name, keys in pairs(names) do
      local x = lunet.tensor{1, 2}
      local opt = optim[name]({x})
      x.grad = lunet.tensor{0.5, -1}
      opt:step()
      local got = {}
      for k in pairs(opt:state_dict().state[1]) do got[#got + 1] = k end
      table.sort(got)
      assert.are.same(keys, got, name)
    end
  end)

  it('load a state_dict saved to a file and resume identically (Adagrad, NAdam)', function()
    for _, name in ipairs({'adagrad_lr_decay_init_wd', 'nadam_momentum_decay_wd'}) do
      local case = find_case(name, 'float32')
      local ps = make_params(case.init, case.dtype)
      local opt = make_opt(case, ps)
      run(case, ps, opt, 1, 7)
      local path = os.tmpname()
      lunet.checkpoint.save(path, {params = ps, optimizer = opt:state_dict()})
      local saved = lunet.checkpoint.load(path)
      os.remove(path)
      local ps2 = make_params(case.init, case.dtype)
      for k = 1, #ps2 do ps2[k]:copy_(saved.params[k]) end
      local opt2 = make_opt(case, ps2)
      opt2:load_state_dict(saved.optimizer)
      run(case, ps2, opt2, 8, 20)
      run(case, ps, opt, 8, 20)
      for k = 1, #ps do assert.tensor_near(ps2[k], ps[k], 0) end
    end
  end)

  it('update large params in parallel blocks the same as in one block, and strided params', function()
    for _, name in ipairs({'Adagrad', 'Adamax', 'NAdam', 'RAdam', 'Adadelta'}) do
      lunet.manual_seed(5)
      local big = lunet.randn(100003, {dtype = 'float64'})
      local small = big:narrow(1, 99990, 14):clone()
      local base = lunet.zeros(14, 2, {dtype = 'float64'})
      local col = base:select(2, 2)
      col:copy_(small)                                  -- a strided param (stride 2)
      local o1, o2, o3 = optim[name]({big}, {lr = 0.01}), optim[name]({small}, {lr = 0.01}), optim[name]({col}, {lr = 0.01})
      for s = 1, 8 do
        big.grad = (big * 0.5 + s):sin()
        small.grad = (small * 0.5 + s):sin()
        col.grad = (col * 0.5 + s):sin()
        o1:step(); o2:step(); o3:step()
      end
      assert.tensor_near(big:narrow(1, 99990, 14), small, 0)
      assert.tensor_near(col, small, 0)
      assert.tensor_near(base:select(2, 1), lunet.zeros(14, {dtype = 'float64'}), 0)
    end
  end)

  it('on a device without their kernel (cuda) the step is a named error', function()
    if not lunet.cuda.is_available() then pending('no GPU: ' .. tostring(lunet.cuda.reason())) return end
    for _, name in ipairs({'Adagrad', 'Adamax', 'NAdam', 'RAdam', 'Adadelta'}) do
      local x = lunet.ones(3, {device = 'cuda:0'})
      local opt = optim[name]({x})
      x.grad = lunet.ones(3, {device = 'cuda:0'})
      local slot = name:lower() .. '_step_'
      assert.are.equal(('%s:step: %s: cuda:0 has no kernel for %s'):format(name, slot, slot), err_of(function() opt:step() end))
    end
  end)
end)

describe('optim schedulers match PyTorch', function()
  for _, case in ipairs(sched_fx) do
    it(case.name .. ' (' .. case.scheduler .. ')', function()
      local groups = {}
      for i, lr in ipairs(case.lrs) do groups[i] = {params = {lunet.zeros(1)}, lr = lr} end
      local opts = {}
      for k, v in pairs(case.extra) do opts[k] = v end
      opts.lr = case.lrs[1]
      local opt = optim[case.optimizer](groups, opts)
      local sched = optim[case.scheduler](opt, case.opts)
      local function momentum(g) return g.betas and g.betas[1] or g.momentum end
      local function check(i)
        local lr = sched:get_last_lr()
        for gi = 1, #case.lrs do
          local want = case.lr[i][gi]
          assert(math.abs(lr[gi] - want) <= 1e-13 * math.abs(want),
            ('step %d group %d: lr %.17g, PyTorch %.17g'):format(i - 1, gi, lr[gi], want))
          assert(opt.param_groups[gi].lr == lr[gi])
          local m, wm = momentum(opt.param_groups[gi]), case.momentum[i][gi]
          assert(math.abs(m - wm) <= 1e-13, ('step %d: momentum %.17g, PyTorch %.17g'):format(i - 1, m, wm))
        end
      end
      check(1)
      for i = 2, #case.lr do
        opt:step()
        sched:step()
        check(i)
        if i == 6 then
          -- resuming as in PyTorch: fresh optimizer and scheduler, then both
          -- state_dicts loaded; the sequence continues identically
          local osd, sd = opt:state_dict(), sched:state_dict()
          local groups2 = {}
          for gi, lr in ipairs(case.lrs) do groups2[gi] = {params = {lunet.zeros(1)}, lr = lr} end
          local opt2 = optim[case.optimizer](groups2, opts)
          local s2 = optim[case.scheduler](opt2, case.opts)
          opt2:load_state_dict(osd)
          s2:load_state_dict(sd)
          for _ = i + 1, math.min(#case.lr, i + 4) do sched:step(); s2:step() end
          assert.are.same(sched:get_last_lr(), s2:get_last_lr())
          return
        end
      end
    end)
  end
end)

describe('optim LambdaLR and step(closure)', function()
  it('LambdaLR multiplies the initial lr by each group\'s function of the step', function()
    local opt = optim.SGD({{params = {lunet.zeros(1)}}, {params = {lunet.zeros(1)}, lr = 1}}, {lr = 0.1})
    local sched = optim.LambdaLR(opt, {lr_lambda = {function(e) return 0.5 ^ e end, function(e) return 1 / (e + 1) end}})
    for e = 0, 5 do
      if e > 0 then sched:step() end
      assert.are.same({0.1 * 0.5 ^ e, 1 / (e + 1)}, sched:get_last_lr())
    end
    assert.is_nil(sched:state_dict().lr_lambdas)
  end)

  it('step(closure) evaluates the closure first and returns its loss', function()
    local p = lunet.tensor{1, 2}
    local opt = optim.SGD({p}, {lr = 0.5})
    local calls = 0
    local loss = opt:step(function()
      calls = calls + 1
      p.grad = lunet.tensor{2, -2}
      return 42
    end)
    assert.are.equal(1, calls)
    assert.are.equal(42, loss)
    assert.are.same({0, 3}, p:totable())
  end)
end)

describe('optim.clip_grad_norm', function()
  it('matches torch.nn.utils.clip_grad_norm_ (norms 1, 2, 3, inf; clipped and not)', function()
    for _, c in ipairs(clip_fx) do
      local ps = {}
      for k, vals in ipairs(c.grads) do
        ps[k] = lunet.zeros(#vals, {dtype = c.dtype})
        ps[k].grad = lunet.tensor(vals, {dtype = c.dtype})
      end
      local total = optim.clip_grad_norm(ps, c.max_norm, c.norm_type)
      local tol = c.dtype == 'float32' and 1e-6 or 1e-12
      assert(math.abs(total - c.total) <= tol * c.total,
        ('%s norm %s: total %.17g, PyTorch %.17g'):format(c.dtype, c.norm_type, total, c.total))
      for k, p in ipairs(ps) do assert.tensor_near(p.grad, c.clipped[k], c.dtype == 'float32' and 1e-6 or 1e-12) end
    end
  end)

  it('returns 0 without grads and handles a large tensor in parallel blocks', function()
    assert.are.equal(0, optim.clip_grad_norm({lunet.zeros(3)}, 1))
    local p = lunet.zeros(100000, {dtype = 'float64'})
    p.grad = lunet.full({100000}, 0.5, {dtype = 'float64'})
    local total = optim.clip_grad_norm(p, 1e9)
    assert.are.equal(math.sqrt(100000 * 0.25), total)
    assert.are.equal(0.5, optim.clip_grad_norm(p, 1e9, math.huge))
  end)
end)

describe('optim in training', function()
  it('fits a linear regression through autograd with every optimizer, scheduler and clipping', function()
    lunet.manual_seed(7)
    local x = lunet.randn(64, 5)
    local y = x:matmul(lunet.randn(5, 1)) + 0.5
    local setups = {
      {'SGD', {lr = 0.1, momentum = 0.9}}, {'Adam', {lr = 0.05}}, {'AdamW', {lr = 0.05}},
      {'RMSprop', {lr = 0.03, centered = true}},   -- (0.01 moved the weights too little for some seeds)
    }
    for _, s in ipairs(setups) do
      local w = lunet.zeros(5, 1, {requires_grad = true})
      local b = lunet.zeros(1, {requires_grad = true})
      local opt = optim[s[1]]({w, b}, s[2])
      local sched = optim.CosineAnnealingLR(opt, {T_max = 150})
      local first, last
      for i = 1, 150 do
        opt:zero_grad()
        local loss = ((x:matmul(w) + b - y) ^ 2):mean()
        loss:backward()
        optim.clip_grad_norm({w, b}, 10)
        opt:step()
        sched:step()
        last = loss:item()
        first = first or last
      end
      assert(first > 1 and last < 1e-3, ('%s: loss %g -> %g'):format(s[1], first, last))
    end
  end)

  it('resumes exactly from a checkpoint file (optimizer and scheduler state)', function()
    local function setup()
      local ps = {lunet.tensor({1, -2, 3}, {dtype = 'float64'}), lunet.tensor({0.5, 0.25}, {dtype = 'float64'})}
      local opt = optim.Adam({{params = {ps[1]}}, {params = {ps[2]}, lr = 0.02, amsgrad = true}}, {lr = 0.05})
      return ps, opt, optim.MultiStepLR(opt, {milestones = {3, 6}, gamma = 0.5})
    end
    local function train(ps, opt, sched, from, to)
      for s = from, to do
        for k, p in ipairs(ps) do p.grad = grad_of(p, k, s) end
        opt:step()
        sched:step()
      end
    end
    local ps, opt, sched = setup()
    train(ps, opt, sched, 1, 4)
    local path = os.tmpname()
    lunet.checkpoint.save(path, {params = ps, optimizer = opt:state_dict(), scheduler = sched:state_dict()})
    train(ps, opt, sched, 5, 10)
    local saved = lunet.checkpoint.load(path)
    os.remove(path)
    local ps2, opt2, sched2 = setup()
    for k = 1, 2 do ps2[k]:copy_(saved.params[k]) end
    opt2:load_state_dict(saved.optimizer)
    sched2:load_state_dict(saved.scheduler)
    train(ps2, opt2, sched2, 5, 10)
    for k = 1, 2 do assert.tensor_near(ps2[k], ps[k], 0) end
    assert.are.same(sched:get_last_lr(), sched2:get_last_lr())
  end)

  it('runs queued on virtual CPU devices with the same results (LUNET_CPU_DEVICES=2)', function()
    local script = os.tmpname()
    local f = assert(io.open(script, 'w'))
    f:write([[
      local lunet = require 'lunet'
      local optim = lunet.optim
      local function run(dev, n)
        lunet.manual_seed(3)
        local p = lunet.randn(n, {dtype = 'float32'}):to(dev)
        local q = lunet.randn(n, {dtype = 'float64'}):to(dev)
        local o1 = optim.Adam({p}, {lr = 0.01, amsgrad = true})
        local o2 = optim.RMSprop({q}, {lr = 0.01, centered = true, momentum = 0.5})
        local o3 = optim.SGD({q}, {lr = 0.01, momentum = 0.9, nesterov = true})
        for s = 1, 5 do
          p.grad = (p * 0.5 + s):sin()
          q.grad = (q * 0.25 - s):cos()
          o1:step(); o2:step(); o3:step()
          optim.clip_grad_norm({p, q}, 1.0)
        end
        return p:to('cpu:0'), q:to('cpu:0')
      end
      for _, n in ipairs({7, 100000}) do
        local p0, q0 = run('cpu:0', n)
        local p1, q1 = run('cpu:1', n)
        assert(p0.device == 'cpu:0' and p1.device == 'cpu:0')
        local a, m = p0:read()
        local b = p1:read()
        for i = 0, m - 1 do assert(a[i] == b[i], 'float32 differs at ' .. i) end
        a, m = q0:read()
        b = q1:read()
        for i = 0, m - 1 do assert(a[i] == b[i], 'float64 differs at ' .. i) end
      end
      print('ok')
    ]])
    f:close()
    local pipe = io.popen(('LUNET_CPU_DEVICES=2 luajit %s 2>&1'):format(script))
    local out = pipe:read('*a')
    pipe:close()
    os.remove(script)
    assert(out:match('ok\n$'), out)   -- (sanitizer builds may print above it)
  end)
end)
