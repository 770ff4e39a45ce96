-- nn.utils.prune against PyTorch 1.13 (spec/fixtures/nn_prune.safetensors,
-- tools/gen_nnsmall_fixtures.py): the masks of l1_unstructured (a count, a
-- fraction composed on top, rounding half to even, a tie), ln_structured
-- (n = 2, inf, 1; dims 1, 2, -1; composed) and global_unstructured, the
-- forward output after pruning, the state_dict keys, the weight after
-- remove(); the mechanism (the hook, gradients, is_pruned); the random
-- methods' counts and structure; identity, custom_from_mask; the errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local nn = lunet.nn
local prune = nn.utils.prune
local err = fixtures.err_of

local fx, cases = fixtures.load_fixture('nn_prune')
local function get(case, k) return fx[case.name .. '.' .. k] end
local function case_of(name)
  for _, c in ipairs(cases) do if c.name == name then return c end end
end
local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- a float64 module of the case's class holding the fixture's weight and bias
local function module_of(case, m)
  m:double()
  lunet.no_grad(function() m.weight:copy_(get(case, 'weight')); m.bias:copy_(get(case, 'bias')) end)
  return m
end

-- the case's output, state_dict keys and weight after remove
local function check_after(case, m)
  assert.is_true(fixtures.maxdiff(m(get(case, 'x'):double()), get(case, 'out')) < 1e-5, case.name)
  assert.same(case.keys, sorted_keys(m:state_dict()))
  assert.is_true(prune.is_pruned(m))
  local orig = m.weight_orig
  prune.remove(m, 'weight')
  assert.equal(orig, m.weight)   -- (the same tensor, as torch's: optimizers keep it)
  assert.is_true(fixtures.maxdiff(m.weight, get(case, 'removed')) < 1e-6)
  assert.same({ 'bias', 'weight' }, sorted_keys(m:state_dict()))
  assert.is_false(prune.is_pruned(m))
end

describe('nn.utils.prune', function()
  it('l1_unstructured matches torch: a count, then a fraction of what is left; half to even', function()
    for _, name in ipairs({ 'l1', 'l1_half_even5', 'l1_half_even7' }) do
      local case = case_of(name)
      local w = get(case, 'weight')
      local m = module_of(case, nn.Linear(w:size(2), w:size(1)))
      for i, amount in ipairs(case.amounts) do
        prune.l1_unstructured(m, 'weight', amount)
        assert.equal(0, fixtures.maxdiff(m.weight_mask, get(case, 'mask' .. i)), name .. ' step ' .. i)
      end
      check_after(case, m)
    end
  end)

  it('l1_unstructured on ties prunes as many, among the smallest; the lowest positions (torch: unspecified ones)', function()
    local case = case_of('l1_ties')
    local m = module_of(case, nn.Linear(4, 3))
    prune.l1_unstructured(m, 'weight', 4)
    local tmask = get(case, 'mask1')
    assert.equal(tmask:sum():item(), m.weight_mask:sum():item())
    -- (both prune 0.5 and three of the 1s; lunet's stable topk takes the first three)
    assert.same({ { 0, 1, 0, 0 }, { 1, 1, 0, 1 }, { 1, 1, 1, 1 } }, m.weight_mask:totable())
    local w = m.weight_orig:abs()
    assert.equal(1, w:masked_select(m.weight_mask:eq(0)):max():item())
    assert.equal(1, w:masked_select(tmask:eq(0)):max():item())
  end)

  it('ln_structured matches torch: L2 over dim 1, then L-inf over dim 2 on top; L1 over dim -1', function()
    for _, name in ipairs({ 'ln', 'ln_last' }) do
      local case = case_of(name)
      local w = get(case, 'weight')
      local m = module_of(case, name == 'ln' and nn.Conv2d(3, 6, 3) or nn.Linear(3, 4))
      for i, s in ipairs(case.steps) do
        prune.ln_structured(m, 'weight', s[1], s[2] == 'inf' and math.huge or s[2], s[3])
        assert.equal(0, fixtures.maxdiff(m.weight_mask, get(case, 'mask' .. i)), name .. ' step ' .. i)
      end
      assert.same(w:size(), m.weight:size())
      check_after(case, m)
    end
  end)

  it('global_unstructured matches torch over two modules', function()
    local case = case_of('global')
    local a, b = nn.Linear(4, 3):double(), nn.Linear(3, 2):double()
    lunet.no_grad(function()
      a.weight:copy_(get(case, 'a_weight')); a.bias:copy_(get(case, 'a_bias'))
      b.weight:copy_(get(case, 'b_weight')); b.bias:copy_(get(case, 'b_bias'))
    end)
    prune.global_unstructured({ { a, 'weight' }, { b, 'weight' } }, prune.L1Unstructured, { amount = case.amount })
    assert.equal(0, fixtures.maxdiff(a.weight_mask, get(case, 'a_mask')))
    assert.equal(0, fixtures.maxdiff(b.weight_mask, get(case, 'b_mask')))
    assert.is_true(fixtures.maxdiff(b(a(get(case, 'x'):double())), get(case, 'out')) < 1e-5)
    -- (again: among what is left, 1 more of the 11)
    prune.global_unstructured({ { a, 'weight' }, { b, 'weight' } }, prune.L1Unstructured, 1)
    assert.equal(10, a.weight_mask:sum():item() + b.weight_mask:sum():item())
  end)

  it('recomputes weight = orig * mask before each forward; gradients reach only the kept entries', function()
    local m = nn.Linear(3, 2)
    prune.custom_from_mask(m, 'weight', lunet.tensor({ { 1, 0, 1 }, { 0, 1, 1 } }))
    assert.same({ 'bias', 'weight_orig' }, (function()
      local t = {}
      for i, e in ipairs(m:named_parameters()) do t[i] = e[1] end
      return t
    end)())
    assert.same({ 'weight_mask' }, { m:named_buffers()[1][1] })
    lunet.no_grad(function() m.weight_orig:fill_(2) end)
    local x = lunet.ones(1, 3)
    local y = m(x)
    assert.same({ { 4, 4 } }, (y - m.bias):totable())
    y:sum():backward()
    assert.same({ { 1, 0, 1 }, { 0, 1, 1 } }, m.weight_orig.grad:totable())
    -- (a torch state_dict of a pruned module loads)
    local sd = m:state_dict()
    local m2 = nn.Linear(3, 2)
    prune.identity(m2, 'weight')
    m2:load_state_dict(sd)
    assert.same(m(x):totable(), m2(x):totable())
  end)

  it('random methods prune the right counts and structure (lunet RNG)', function()
    local m = nn.Conv2d(4, 6, 3)
    prune.random_unstructured(m, 'weight', 0.25)   -- 216 * 0.25 = 54
    assert.equal(216 - 54, m.weight_mask:sum():item())
    prune.random_unstructured(m, 'weight', 10)
    assert.equal(216 - 64, m.weight_mask:sum():item())
    local c = nn.Conv2d(4, 6, 3)
    prune.random_structured(c, 'weight', 2, 1)
    local per = c.weight_mask:sum({ 2, 3, 4 })
    assert.equal(4, per:gt(0):sum():item())
    assert.equal(4 * 36, per:sum():item())   -- (whole channels)
    prune.random_structured(c, 'weight', 0.5, 1)   -- (half of the 4 left)
    assert.equal(2, c.weight_mask:sum({ 2, 3, 4 }):gt(0):sum():item())
    prune.random_structured(c, 'weight', 1, -3)    -- (dim 2 from the end)
    assert.equal(3, c.weight_mask:sum({ 1, 3, 4 }):gt(0):sum():item())
  end)

  it('identity and amount 0 keep everything; pruning the bias too; remove keeps the values', function()
    local m = nn.Linear(3, 2)
    local w = m.weight:clone()
    prune.identity(m, 'weight')
    prune.l1_unstructured(m, 'weight', 0)
    assert.equal(6, m.weight_mask:sum():item())
    prune.l1_unstructured(m, 'bias', 1)
    assert.equal(1, m.bias_mask:sum():item())
    prune.remove(m, 'weight')
    prune.remove(m, 'bias')
    assert.equal(0, fixtures.maxdiff(m.weight, w))
    assert.equal(1, m.bias:ne(0):sum():item())
  end)

  it('refuses bad arguments', function()
    local m = nn.Linear(3, 2)
    assert.matches('l1_unstructured: amount=1.5 should either be a float in the range %[0, 1%) or a non%-negative integer',
      err(prune.l1_unstructured, m, 'weight', 1.5))
    assert.matches('amount=%-1 should', err(prune.l1_unstructured, m, 'weight', -1))
    assert.matches('amount=7 should be smaller than the number of parameters to prune=6',
      err(prune.l1_unstructured, m, 'weight', 7))
    assert.matches("l1_unstructured: nn.Linear has no parameter 'nope'", err(prune.l1_unstructured, m, 'nope', 1))
    assert.matches('ln_structured: structured pruning needs a tensor of 2 or more dims',
      err(prune.ln_structured, m, 'bias', 1, 2, 1))
    assert.matches('ln_structured: dim must be an integer in 1..2', err(prune.ln_structured, m, 'weight', 1, 2, 3))
    assert.matches('ln_structured: n must be a number', err(prune.ln_structured, m, 'weight', 1, 'nuc', 1))
    assert.matches('importance_scores must be a tensor of the shape of weight',
      err(prune.l1_unstructured, m, 'weight', 1, lunet.ones(2)))
    assert.matches('custom_from_mask: mask must have the shape', err(prune.custom_from_mask, m, 'weight', lunet.ones(3)))
    assert.matches("remove: parameter 'weight' of module nn.Linear has to be pruned before pruning can be removed",
      err(prune.remove, m, 'weight'))
    assert.matches('global_unstructured: only "unstructured" pruning methods',
      err(prune.global_unstructured, { { m, 'weight' } }, prune.LnStructured, 1))
    assert.matches('global_unstructured: parameters must be a non%-empty list', err(prune.global_unstructured, {}, prune.L1Unstructured, 1))
    assert.matches('global_unstructured', err(prune.global_unstructured, { { m, 'weight' } }, prune.L1Unstructured, { bogus = 1 }))
    assert.matches('is_pruned: module must be an nn.Module', err(prune.is_pruned, 3))
    -- (a failed pruning leaves the module as it was)
    assert.same({ 'bias', 'weight' }, sorted_keys(m:state_dict()))
  end)
end)
