-- nn.CTCLoss, HingeEmbeddingLoss, MultiLabelMarginLoss, TripletMarginWithDistanceLoss
-- (and their functional forms) against PyTorch 1.13: outputs and float64
-- gradients from spec/fixtures/nn_losses_more.safetensors
-- (tools/gen_nn_losses_more_fixtures.py), in float32 and float64, module and
-- functional; float64 finite differences; printing; the errors.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local fx = require 'support.fixtures'
local nn = lunet.nn
local F = nn.functional

local data, cases = fx.load_fixture('nn_losses_more')
local function get(case, k) return data[case.name .. '.' .. k] end
local err_of = fx.err_of
local function gc(f, inputs)
  for _, t in ipairs(inputs) do t:requires_grad_() end
  local ok, msg = gradcheck(f, inputs)
  assert(ok, msg)
  return ok
end
local function head(m) return tostring(m):match('^[^\n]*') end
local I = function(t) return lunet.tensor(t, { dtype = 'int64' }) end

local DIST = {
  cosine = function(a, b) return 1 - F.cosine_similarity(a, b) end,
  l1 = function(a, b) return (a - b):abs():sum(-1) end,
}

-- the case's loss (module or functional) on its inputs, cast to dtype; the
-- float inputs that take gradients
local function run(case, dtype, functional)
  local o, op = case.opts, case.op
  local function f(k) return get(case, k) and get(case, k):to(dtype):clone():requires_grad_() end
  if op == 'ctc_loss' then
    local x = f('x')
    local args = { x:log_softmax(-1), get(case, 'targets'), get(case, 'input_lengths'), get(case, 'target_lengths') }
    local out = functional and F.ctc_loss(args[1], args[2], args[3], args[4], o) or nn.CTCLoss(o)(unpack(args))
    return out, { x = x }
  elseif op == 'hinge_embedding_loss' then
    local x = f('x')
    local y = get(case, 'y'):to(dtype)
    return functional and F.hinge_embedding_loss(x, y, o) or nn.HingeEmbeddingLoss(o)(x, y), { x = x }
  elseif op == 'multilabel_margin_loss' then
    local x = f('x')
    local y = get(case, 'y')
    return functional and F.multilabel_margin_loss(x, y, o) or nn.MultiLabelMarginLoss(o)(x, y), { x = x }
  elseif op == 'triplet_margin_with_distance_loss' then
    local a, p, n = f('a'), f('p'), f('n')
    local oo = { margin = o.margin, swap = o.swap, reduction = o.reduction, distance_function = DIST[o.distance] }
    local out = functional and F.triplet_margin_with_distance_loss(a, p, n, oo)
      or nn.TripletMarginWithDistanceLoss(oo)(a, p, n)
    return out, { a = a, p = p, n = n }
  end
end

local function check(case, dtype, functional)
  local what = ('%s %s%s'):format(case.name, dtype, functional and ' (F)' or '')
  local tol = dtype == 'float32' and 2e-5 or 1e-11
  local out, ins = run(case, dtype, functional)
  assert.equal(dtype, out.dtype, what)
  local want = get(case, 'out')
  assert.same(want:size(), out:size(), what)
  -- inf where torch's is inf (an impossible alignment), the rest within tol
  local fin = want:isfinite()
  assert.same(fin:totable(), out:isfinite():totable(), what .. ' finite')
  assert.is_true(fx.maxdiff(out:where(fin, 0), want:where(fin, 0)) <= tol * math.max(1, want:where(fin, 0):abs():max():item()), what)
  if not get(case, 'dout') or not fin:all():item() then return end
  for k, t in pairs(ins) do
    if get(case, 'd' .. k) then
      if t.grad then t.grad = nil end
    end
  end
  ;(out * get(case, 'dout'):to(dtype)):sum():backward()
  for k, t in pairs(ins) do
    local g = get(case, 'd' .. k)
    if g then assert.is_true(fx.maxdiff(t.grad, g) <= tol * math.max(1, g:abs():max():item()), what .. ' d' .. k) end
  end
end

describe('losses against PyTorch 1.13', function()
  for _, op in ipairs({ 'ctc_loss', 'hinge_embedding_loss', 'multilabel_margin_loss', 'triplet_margin_with_distance_loss' }) do
    it(op .. ': outputs and gradients, float32 and float64, module and functional', function()
      local n = 0
      for _, case in ipairs(cases) do
        if case.op == op then
          n = n + 1
          for _, dtype in ipairs({ 'float32', 'float64' }) do
            check(case, dtype, false)
            check(case, dtype, true)
          end
        end
      end
      assert.is_true(n >= 4, op)
    end)
  end
end)

describe('nn.CTCLoss', function()
  local function ctc_inputs(T, N, C, S)
    local x = lunet.randn(T, N, C):double()
    return x, I({ { 2, 3, 3 }, { 4, 2, 0 } }):narrow(2, 1, S), I({ T, T - 1 }), I({ S, S - 1 })
  end

  it('gradcheck in float64, through log_softmax and of log_probs itself', function()
    lunet.manual_seed(1)
    local x, tg, il, tl = ctc_inputs(6, 2, 4, 3)
    assert.is_true(gc(function(v) return F.ctc_loss(v:log_softmax(3), tg, il, tl) end, { x }))
    -- (the derivative itself: torch's gradient of log_probs adds exp(log_probs))
    local lp = x:log_softmax(3):detach()
    assert.is_true(gc(function(v) return F.ctc_loss(v, tg, il, tl, { reduction = 'sum' }) end, { lp }))
  end)

  it('takes tables of lengths, a non-contiguous input, and no samples', function()
    lunet.manual_seed(2)
    local x, tg = ctc_inputs(5, 2, 4, 2)
    local lp = x:log_softmax(3)
    local want = F.ctc_loss(lp, tg, I({ 5, 4 }), I({ 2, 1 }), { reduction = 'none' })
    local got = F.ctc_loss(lp, tg, { 5, 4 }, { 2, 1 }, { reduction = 'none' })
    assert.is_true(fx.maxdiff(want, got) == 0)
    local lpt = lp:transpose(1, 2):contiguous():transpose(1, 2)
    assert.is_false(lpt:is_contiguous())
    assert.is_true(fx.maxdiff(want, F.ctc_loss(lpt, tg, { 5, 4 }, { 2, 1 }, { reduction = 'none' })) < 1e-12)
    local none = F.ctc_loss(lunet.zeros(4, 0, 3), lunet.zeros({ 0, 2 }, { dtype = 'int64' }), {}, {}, { reduction = 'none' })
    assert.same({ 0 }, none:size())
    assert.equal(0, F.ctc_loss(lunet.zeros(4, 0, 3), lunet.zeros({ 0, 2 }, { dtype = 'int64' }), {}, {}, { reduction = 'sum' }):item())
  end)

  it('prints and checks its options', function()
    assert.equal('nn.CTCLoss(blank 1)', head(nn.CTCLoss()))
    assert.equal("nn.CTCLoss(blank 3, reduction 'sum', zero_infinity)",
      head(nn.CTCLoss({ blank = 3, reduction = 'sum', zero_infinity = true })))
    assert.matches("nn.CTCLoss: unknown option 'blank_index'", err_of(nn.CTCLoss, { blank_index = 0 }))
    assert.matches('reduction', err_of(nn.CTCLoss, { reduction = 'avg' }))
    assert.matches('blank must be an integer', err_of(nn.CTCLoss, { blank = 1.5 }))
  end)

  it('errors name the function and the problem', function()
    local lp = lunet.randn(5, 2, 4):log_softmax(3)
    local tg, il, tl = I({ { 2, 3 }, { 4, 2 } }), I({ 5, 5 }), I({ 2, 2 })
    assert.matches('ctc_loss: log_probs must be %(T, N, C%) or %(T, C%)', err_of(F.ctc_loss, lunet.randn(2, 2, 2, 2), tg, il, tl))
    assert.matches('ctc_loss: log_probs must be a floating', err_of(F.ctc_loss, I({ { 1 } }), tg, il, tl))
    assert.matches('ctc_loss: targets must be an integer tensor', err_of(F.ctc_loss, lp, tg:double(), il, tl))
    assert.matches('ctc_loss: targets must be %(N, S%)', err_of(F.ctc_loss, lp, I({ { 2, 3 } }), il, tl))
    assert.matches('ctc_loss: input_lengths must hold 2 lengths, got 1', err_of(F.ctc_loss, lp, tg, I({ 5 }), tl))
    assert.matches('ctc_loss: input_lengths%[2%] must be an integer in 0..5, got 6', err_of(F.ctc_loss, lp, tg, { 5, 6 }, tl))
    assert.matches('ctc_loss: target_lengths%[1%] must be an integer in 0..2', err_of(F.ctc_loss, lp, tg, il, { 3, 1 }))
    assert.matches('ctc_loss: target_lengths must be an integer tensor', err_of(F.ctc_loss, lp, tg, il, tl:double()))
    assert.matches('ctc_loss: input_lengths must be an integer tensor or a table', err_of(F.ctc_loss, lp, tg, 'x', tl))
    assert.matches('ctc_loss: targets hold a label 5 out of range 1..4', err_of(F.ctc_loss, lp, I({ { 2, 5 }, { 4, 2 } }), il, tl))
    assert.matches('ctc_loss: targets hold the blank label 1', err_of(F.ctc_loss, lp, I({ { 2, 1 }, { 4, 2 } }), il, tl))
    assert.matches('ctc_loss: blank 5 is not a class in 1..4', err_of(F.ctc_loss, lp, tg, il, tl, { blank = 5 }))
    assert.matches('ctc_loss: targets holds 3 labels, target_lengths sum to 4', err_of(F.ctc_loss, lp, I({ 2, 3, 4 }), il, tl))
    assert.matches("nn.CTCLoss: targets hold the blank", err_of(nn.CTCLoss(), lp, I({ { 2, 1 }, { 4, 2 } }), il, tl))
  end)
end)

describe('HingeEmbeddingLoss, MultiLabelMarginLoss, TripletMarginWithDistanceLoss', function()
  it('gradcheck in float64', function()
    lunet.manual_seed(3)
    local x = lunet.randn(3, 4):double()
    local y = I({ { 2, 1, 0, 3 }, { 4, 0, 1, 1 }, { 1, 2, 3, 4 } })
    assert.is_true(gc(function(v) return F.multilabel_margin_loss(v, y) end, { x }))
    local s = lunet.tensor({ { 1, -1, 1, -1 } }):double()
    assert.is_true(gc(function(v) return F.hinge_embedding_loss(v, s, { margin = 3 }) end, { x }))
    local a, p, n = lunet.randn(3, 4):double(), lunet.randn(3, 4):double(), lunet.randn(3, 4):double()
    assert.is_true(gc(function(u, v, w)
      return F.triplet_margin_with_distance_loss(u, v, w, { margin = 5, swap = true, distance_function = DIST.l1 })
    end, { a, p, n }))
  end)

  it('empty, non-contiguous inputs, and nn modules as the distance', function()
    local x = lunet.randn(4, 3):t()
    assert.is_false(x:is_contiguous())
    local y = I({ { 1, 2, 0, 0 }, { 3, 0, 0, 0 }, { 4, 3, 2, 1 } })
    assert.is_true(fx.maxdiff(F.multilabel_margin_loss(x, y), F.multilabel_margin_loss(x:contiguous(), y)) == 0)
    assert.same({ 0 }, F.hinge_embedding_loss(lunet.zeros(0), lunet.zeros(0), { reduction = 'none' }):size())
    local a, p, n = lunet.randn(3, 4), lunet.randn(3, 4), lunet.randn(3, 4)
    local want = F.triplet_margin_loss(a, p, n, { p = 1 })
    local got = nn.TripletMarginWithDistanceLoss({ distance_function = nn.PairwiseDistance(1) })(a, p, n)
    assert.is_true(fx.maxdiff(want, got) < 1e-6)
    assert.is_true(fx.maxdiff(F.triplet_margin_loss(a, p, n), F.triplet_margin_with_distance_loss(a, p, n)) < 1e-6)
  end)

  it('prints', function()
    assert.equal('nn.HingeEmbeddingLoss(margin 1)', head(nn.HingeEmbeddingLoss()))
    assert.equal("nn.MultiLabelMarginLoss(reduction 'sum')", head(nn.MultiLabelMarginLoss({ reduction = 'sum' })))
    assert.equal('nn.TripletMarginWithDistanceLoss(margin 1, custom distance, swap)',
      head(nn.TripletMarginWithDistanceLoss({ distance_function = DIST.l1, swap = true })))
  end)

  it('errors name the function and the problem', function()
    local x = lunet.randn(2, 3)
    assert.matches('hinge_embedding_loss: input must be a floating', err_of(F.hinge_embedding_loss, I({ 1 }), x))
    assert.matches('hinge_embedding_loss: input {2,3} and target {4}', err_of(F.hinge_embedding_loss, x, lunet.ones(4)))
    assert.matches("nn.HingeEmbeddingLoss: unknown option 'margn'", err_of(nn.HingeEmbeddingLoss, { margn = 1 }))
    assert.matches('multilabel_margin_loss: target {2,2} must have the input', err_of(F.multilabel_margin_loss, x, I({ { 1, 0 }, { 1, 0 } })))
    assert.matches('multilabel_margin_loss: target holds a label 4 out of range 1..3',
      err_of(F.multilabel_margin_loss, x, I({ { 1, 4, 0 }, { 1, 0, 0 } })))
    assert.matches('multilabel_margin_loss: target holds a label %-1', err_of(F.multilabel_margin_loss, x, I({ { 1, -1, 0 }, { 1, 0, 0 } })))
    assert.matches('multilabel_margin_loss: target must hold class labels', err_of(F.multilabel_margin_loss, x, x))
    assert.matches('multilabel_margin_loss: input must be a non%-empty', err_of(F.multilabel_margin_loss, lunet.randn(2, 2, 2), I({ 1 })))
    assert.matches('nn.TripletMarginWithDistanceLoss: distance_function must be a function, got number',
      err_of(nn.TripletMarginWithDistanceLoss, { distance_function = 3 }))
    assert.matches('triplet_margin_with_distance_loss: distance_function must return a tensor',
      err_of(F.triplet_margin_with_distance_loss, x, x, x, { distance_function = function() return 1 end }))
    assert.matches('triplet_margin_with_distance_loss: anchor, positive and negative must have the same number of dims',
      err_of(F.triplet_margin_with_distance_loss, x, x, lunet.randn(3)))
  end)
end)
