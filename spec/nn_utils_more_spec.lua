-- lunet.utils.checkpoint and checkpoint_sequential (against the same model
-- run plainly: equal outputs and gradients, dropout included; the peak
-- memory lower), nn.utils.weight_norm / remove_weight_norm,
-- spectral_norm / remove_spectral_norm and rnn.pad_sequence against PyTorch
-- 1.13 (spec/fixtures/nn_utils_more.safetensors, written by
-- tools/gen_nn_utils_more_fixtures.py), and the inputs they refuse.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local err_of, maxdiff = fixtures.err_of, fixtures.maxdiff

local fx, cases = fixtures.load_fixture('nn_utils_more')
local function get(case, k) return fx[case.name .. '.' .. k] end
local function of_op(op)
  local out = {}
  for _, c in ipairs(cases) do if c.op == op then out[#out + 1] = c end end
  return out
end
local function errs(pat, f, ...) assert.matches(pat, err_of(f, ...), 1, true) end
local F64 = { dtype = 'float64' }

-- the gradients of the parameters and of x, taken (and cleared)
local function take_grads(model, x)
  local out = {}
  for i, p in ipairs(model:parameters()) do out[i] = p.grad; p.grad = nil end
  out[#out + 1] = x.grad
  x.grad = nil
  return out
end

local function block()
  return nn.Sequential(nn.Conv2d(2, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.3),
    nn.Conv2d(4, 2, 3, { padding = 1 }), nn.Tanh()):double():eval()
end

describe('lunet.utils.checkpoint', function()
  it('gives the outputs and gradients of the plain run exactly, dropout drawing the same mask', function()
    lunet.manual_seed(7)
    local m = block()
    m[4]:train()   -- (dropout on, BatchNorm on its running stats)
    local x = lunet.randn(2, 2, 6, 6, { dtype = 'float64', requires_grad = true })
    local seed, offset = lunet.rng_state()
    local y1 = m(x)
    ;(y1 * y1):sum():backward()
    local g1 = take_grads(m, x)
    local s1, o1 = lunet.rng_state()
    lunet.set_rng_state(seed, offset)
    local y2 = lunet.utils.checkpoint(m, x)
    assert.equals('CheckpointFunction', y2.grad_fn.name)
    ;(y2 * y2):sum():backward()
    local g2 = take_grads(m, x)
    assert.equals(0, maxdiff(y1, y2))
    assert.equals(#g1, #g2)
    for i = 1, #g1 do assert.equals(0, maxdiff(g1[i], g2[i])) end
    -- the recomputation leaves the RNG where the forward left it
    local s2, o2 = lunet.rng_state()
    assert.same({ s1, o1 }, { s2, o2 })
  end)

  it('gives the parameters their gradients when no argument requires grad', function()
    local m = nn.Linear(3, 2):double()
    local x = lunet.randn(4, 3, F64)
    local y = lunet.utils.checkpoint(m, x)
    assert.is_true(y.requires_grad)
    y:sum():backward()
    assert.equals(0, maxdiff(m.weight.grad, lunet.ones(2, 4, F64):matmul(x)))
    assert.equals(0, maxdiff(m.bias.grad, lunet.full({ 2 }, 4, F64)))
  end)

  it('takes several arguments and results (lists of tensors too), other values passed on', function()
    local a = lunet.randn(3, { dtype = 'float64', requires_grad = true })
    local b = lunet.randn(3, { dtype = 'float64', requires_grad = true })
    local p, q, s = lunet.utils.checkpoint(function(u, k, v) return u:exp() * k, { v:sin(), 'tag' }, 'done' end, a, 2, b)
    assert.equals('tag', q[2])
    assert.equals('done', s)
    ;(p:sum() + q[1]:sum() * 3):backward()
    assert.is_true(maxdiff(a.grad, a:detach():exp() * 2) < 1e-15)
    assert.is_true(maxdiff(b.grad, b:detach():cos() * 3) < 1e-15)
    assert.is_true(gradcheck(function(u, v) return lunet.utils.checkpoint(function(x, y) return (x * y):tanh() end, u, v) end,
      { lunet.randn(4, F64):requires_grad_(), lunet.randn(4, F64):requires_grad_() }))
  end)

  it('runs fn plainly under no_grad; refuses an argument changed in place before backward', function()
    local x = lunet.randn(3, { dtype = 'float64', requires_grad = true })
    local y = lunet.no_grad(function() return lunet.utils.checkpoint(function(u) return u * 2 end, x) end)
    assert.is_false(y.requires_grad)
    local h = x * 1
    local z = lunet.utils.checkpoint(function(u) return u:sin() end, h)
    lunet.no_grad(function() h:add_(1) end)
    errs('checkpoint: argument 1 ({3} float64) was changed in place', function() z:sum():backward() end)
    errs('checkpoint: fn must be a function or a module, got number', lunet.utils.checkpoint, 3, x)
  end)

  it('checkpoint_sequential equals the plain run, and keeps less memory at the peak', function()
    local m = block()
    local x = lunet.randn(2, 2, 6, 6, { dtype = 'float64', requires_grad = true })
    m(x):sum():backward()
    local g1 = take_grads(m, x)
    local y = lunet.utils.checkpoint_sequential(m, 3, x)
    assert.equals(0, maxdiff(y, m(x)))
    y:sum():backward()
    local g2 = take_grads(m, x)
    for i = 1, #g1 do assert.equals(0, maxdiff(g1[i], g2[i])) end
    -- a deep stack: each activation 2 MB, 65 of them kept by the plain run
    local layers = { nn.Linear(64, 64) }
    for _ = 1, 32 do layers[#layers + 1] = nn.Tanh(); layers[#layers + 1] = nn.Sigmoid() end
    local deep = nn.Sequential(layers)
    local xx = lunet.randn(8192, 64, { requires_grad = true })
    local function peak(f)
      -- (the collector's triggers re-armed from what is live now: left armed
      -- from the run before, garbage could pile up to twice that run's peak)
      collectgarbage(); collectgarbage()
      require('lunet.tensor').collect_rearm()
      lunet.reset_peak_memory_stats()
      local base = lunet.memory_allocated()
      f():sum():backward()
      return lunet.max_memory_allocated() - base
    end
    local plain = peak(function() return deep(xx) end)
    local ck = peak(function() return lunet.utils.checkpoint_sequential(deep, 8, xx) end)
    assert.is_true(ck < plain, ('checkpointed peak %d, plain %d'):format(ck, plain))
  end)

  it('checkpoint_sequential takes a list of functions and refuses bad segments', function()
    local fs = { function(u) return u * 2 end, function(u) return u + 1 end, function(u) return u:exp() end }
    local x = lunet.randn(3, F64)
    assert.equals(0, maxdiff(lunet.utils.checkpoint_sequential(fs, 2, x), (x * 2 + 1):exp()))
    errs('checkpoint_sequential: segments must be an integer in 1..3', lunet.utils.checkpoint_sequential, fs, 4, x)
    errs('checkpoint_sequential: segments must be an integer in 1..3', lunet.utils.checkpoint_sequential, fs, 0, x)
    errs('checkpoint_sequential: functions[2] is a number', lunet.utils.checkpoint_sequential, { fs[1], 5 }, 1, x)
    errs('checkpoint_sequential: functions must be an nn.Sequential', lunet.utils.checkpoint_sequential, 'x', 1, x)
  end)
end)

-- a lunet module like the case's torch one, float64, with its weight and bias
local function module_of(c, kind)
  local w = get(c, 'w')
  local m = kind == 'Linear' and nn.Linear(w:size(2), w:size(1)) or kind == 'ConvTranspose2d' and nn.ConvTranspose2d(2, 3, 3)
    or nn.Conv2d(2, 3, 3)
  m = m:double()
  lunet.no_grad(function() m.weight:copy_(get(c, 'w')); m.bias:copy_(get(c, 'b')) end)
  return m
end

describe('nn.utils.weight_norm', function()
  it('matches torch 1.13: weight_g, weight_v, the output and the float64 gradients', function()
    local cs = of_op('weight_norm')
    assert.equals(5, #cs)
    for _, c in ipairs(cs) do
      local m = module_of(c, c.opts.kind)
      nn.utils.weight_norm(m, 'weight', c.opts.dim)
      local names = {}
      for i, e in ipairs(m:named_parameters()) do names[i] = e[1] end
      assert.same({ 'bias', 'weight_g', 'weight_v' }, names)   -- (torch's order)
      assert.same(get(c, 'g'):size(), m.weight_g:size(), c.name)
      assert.is_true(maxdiff(m.weight_g, get(c, 'g')) < 1e-14, c.name)
      assert.equals(0, maxdiff(m.weight_v, get(c, 'v')))
      local x = get(c, 'x'):clone():requires_grad_()
      local out = m(x)
      assert.is_true(maxdiff(out, get(c, 'out')) < 1e-12, c.name)
      ;(out * get(c, 'dout')):sum():backward()
      for k, t in pairs({ dg = m.weight_g, dv = m.weight_v, db = m.bias, dx = x }) do
        assert.is_true(maxdiff(t.grad, get(c, k)) < 1e-12, c.name .. ' ' .. k)
      end
    end
  end)

  it('recomputes the weight before each forward; loads a torch state_dict; remove_weight_norm gives a parameter back', function()
    local c = of_op('weight_norm')[1]
    local m = nn.utils.weight_norm(nn.Linear(3, 4):double())
    m:load_state_dict({ weight_g = get(c, 'g'), weight_v = get(c, 'v'), bias = get(c, 'b') })
    assert.is_true(maxdiff(m(get(c, 'x')), get(c, 'out')) < 1e-12)
    assert.is_true(maxdiff(m.weight, get(c, 'w')) < 1e-14)
    nn.utils.remove_weight_norm(m)
    local names = {}
    for i, e in ipairs(m:named_parameters()) do names[i] = e[1] end
    assert.same({ 'bias', 'weight' }, names)
    assert.is_true(m.weight:is_leaf() and m.weight.requires_grad)
    assert.is_true(maxdiff(m(get(c, 'x')), get(c, 'out')) < 1e-12)
    assert.is_nil(m.weight_g)
    -- the options as a table, dim negative
    local m2 = nn.utils.weight_norm(nn.Linear(3, 4), { dim = -1 })
    assert.same({ 1, 3 }, m2.weight_g:size())
  end)

  it('refuses what torch refuses, naming the function', function()
    local m = nn.utils.weight_norm(nn.Linear(3, 4))
    errs('weight_norm: cannot register two weight_norm hooks on the same parameter weight', nn.utils.weight_norm, m)
    errs("weight_norm: nn.Linear has no parameter 'w'", nn.utils.weight_norm, nn.Linear(3, 4), 'w')
    errs('weight_norm: dim must be an integer in 1..2', nn.utils.weight_norm, nn.Linear(3, 4), 'weight', 3)
    errs('weight_norm: module must be an nn.Module, got number', nn.utils.weight_norm, 5)
    errs("weight_norm: unknown option 'dims'", nn.utils.weight_norm, nn.Linear(3, 4), { dims = 1 })
    errs("remove_weight_norm: weight_norm of 'weight' not found in nn.Linear", nn.utils.remove_weight_norm, nn.Linear(3, 4))
  end)
end)

describe('nn.utils.spectral_norm', function()
  it('matches torch 1.13 from the same u, v: training and eval forwards, u and v, float64 gradients', function()
    local cs = of_op('spectral_norm')
    assert.equals(4, #cs)
    for _, c in ipairs(cs) do
      local m = module_of(c, c.kind)
      nn.utils.spectral_norm(m, c.opts)
      local names = {}
      for i, e in ipairs(m:named_parameters()) do names[i] = e[1] end
      assert.same({ 'bias', 'weight_orig' }, names)
      assert.same(get(c, 'u0'):size(), m.weight_u:size(), c.name)
      assert.same(get(c, 'v0'):size(), m.weight_v:size(), c.name)
      lunet.no_grad(function() m.weight_u:copy_(get(c, 'u0')); m.weight_v:copy_(get(c, 'v0')) end)
      for k, mode in ipairs(c.modes) do
        m:train(mode == 'train')
        local x = get(c, 'x' .. k):clone():requires_grad_()
        local out = m(x)
        local what = ('%s forward %d (%s)'):format(c.name, k, mode)
        assert.is_true(maxdiff(out, get(c, 'out' .. k)) < 1e-12, what)
        assert.is_true(maxdiff(m.weight_u, get(c, 'u' .. k)) < 1e-12, what)
        assert.is_true(maxdiff(m.weight_v, get(c, 'v' .. k)) < 1e-12, what)
        ;(out * get(c, 'dout' .. k)):sum():backward()
        assert.is_true(maxdiff(m.weight_orig.grad, get(c, 'dw' .. k)) < 1e-12, what)
        assert.is_true(maxdiff(x.grad, get(c, 'dx' .. k)) < 1e-12, what)
        m.weight_orig.grad = nil
      end
    end
  end)

  it('remove_spectral_norm keeps the normalized weight as a parameter; positional options', function()
    local m = nn.utils.spectral_norm(nn.Linear(5, 4):double(), 'weight', 3)
    m(lunet.randn(2, 5, F64))
    m:eval()
    local w = m(lunet.eye(5, F64)) - m.bias
    nn.utils.remove_spectral_norm(m)
    assert.is_true(m.weight:is_leaf() and m.weight.requires_grad)
    assert.is_true(maxdiff(m.weight:t(), w) < 1e-14)
    assert.is_nil(m.weight_u)
    assert.same({}, m:named_buffers())
  end)

  it('refuses what torch refuses, naming the function', function()
    local m = nn.utils.spectral_norm(nn.Linear(3, 4))
    errs('spectral_norm: cannot register two spectral_norm hooks on the same parameter weight', nn.utils.spectral_norm, m)
    errs('spectral_norm: n_power_iterations must be a positive integer, got 0', nn.utils.spectral_norm, nn.Linear(3, 4), { n_power_iterations = 0 })
    errs("spectral_norm: unknown option 'iterations'", nn.utils.spectral_norm, nn.Linear(3, 4), { iterations = 2 })
    errs('spectral_norm: dim must be an integer in 1..2', nn.utils.spectral_norm, nn.Linear(3, 4), { dim = 3 })
    errs("spectral_norm: nn.Linear has no parameter 'weight'", nn.utils.spectral_norm, nn.utils.weight_norm(nn.Linear(3, 4)))
    errs("remove_spectral_norm: spectral_norm of 'weight' not found in nn.Linear", nn.utils.remove_spectral_norm, nn.Linear(3, 4))
  end)
end)

describe('nn.utils.rnn.pad_sequence', function()
  it('matches torch 1.13: values and float64 gradients', function()
    local cs = of_op('pad_sequence')
    assert.equals(3, #cs)
    for _, c in ipairs(cs) do
      local seqs = {}
      for k = 1, c.n do seqs[k] = get(c, 's' .. k):clone():requires_grad_() end
      local out = nn.utils.rnn.pad_sequence(seqs, c.opts)
      assert.same(get(c, 'out'):size(), out:size(), c.name)
      assert.equals(0, maxdiff(out, get(c, 'out')))
      ;(out * get(c, 'dout')):sum():backward()
      for k = 1, c.n do assert.equals(0, maxdiff(seqs[k].grad, get(c, 'ds' .. k))) end
    end
    assert.same({ 2, 3 }, nn.utils.rnn.pad_sequence({ lunet.ones(3), lunet.ones(1) }, true, 0):size())
  end)

  it('refuses what it cannot pad, naming the function', function()
    local pad = nn.utils.rnn.pad_sequence
    errs('pad_sequence: received an empty list of sequences', pad, {})
    errs('pad_sequence: sequences[2] is {2,4} float32 on cpu:0, sequences[1] {2,3}', pad, { lunet.ones(2, 3), lunet.ones(2, 4) })
    errs('pad_sequence: sequences[1] is 0-d', pad, { lunet.tensor(1) })
    errs("pad_sequence: unknown option 'batchfirst'", pad, { lunet.ones(2) }, { batchfirst = true })
    errs('pad_sequence: sequences must be a list of tensors, got number', pad, 3)
  end)
end)
