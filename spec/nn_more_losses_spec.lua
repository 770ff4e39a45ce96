-- nn.CosineSimilarity, PairwiseDistance and the losses TripletMarginLoss,
-- CosineEmbeddingLoss, MarginRankingLoss, SoftMarginLoss,
-- MultiLabelSoftMarginLoss, MultiMarginLoss, PoissonNLLLoss, GaussianNLLLoss
-- against PyTorch 1.13 (spec/fixtures/nn_more_losses.safetensors, written by
-- tools/gen_nn_more_losses_fixtures.py): outputs and gradients, float32 to
-- 1e-5 and float64 to 1e-9, the edge cases included (zero vectors, equal
-- inputs, hinges at 0, broadcasting, weights, swap, var below eps), through
-- nn.functional and through the modules; float64 gradchecks; then the
-- options and inputs they refuse.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local fx, cases = fixtures.load_fixture('nn_more_losses')

-- each op's tensor arguments, in order, and its module
local ARGS = {
  cosine_similarity = { 'x1', 'x2' }, pairwise_distance = { 'x1', 'x2' }, triplet_margin_loss = { 'a', 'p', 'n' },
  cosine_embedding_loss = { 'x1', 'x2', 'y' }, margin_ranking_loss = { 'x1', 'x2', 'y' },
  soft_margin_loss = { 'x', 'y' }, multilabel_soft_margin_loss = { 'x', 'y' }, multi_margin_loss = { 'x', 'y' },
  poisson_nll_loss = { 'x', 'y' }, gaussian_nll_loss = { 'x', 'y', 'v' },
}
local MODULES = {
  cosine_similarity = 'CosineSimilarity', pairwise_distance = 'PairwiseDistance',
  triplet_margin_loss = 'TripletMarginLoss', cosine_embedding_loss = 'CosineEmbeddingLoss',
  margin_ranking_loss = 'MarginRankingLoss', soft_margin_loss = 'SoftMarginLoss',
  multilabel_soft_margin_loss = 'MultiLabelSoftMarginLoss', multi_margin_loss = 'MultiMarginLoss',
  poisson_nll_loss = 'PoissonNLLLoss', gaussian_nll_loss = 'GaussianNLLLoss',
}

local function get(case, k) return fx[case.name .. '.' .. k] end

local function opts_of(case, t)
  local o = {}
  for k, v in pairs(case.opts) do o[k] = v end
  if o.p == 'inf' then o.p = math.huge end
  if t.w then o.weight = t.w end
  return o
end

-- (the zero vector of these cases: its 1e-12 makes gradients of 1e4 and more,
-- whose 10th digit depends on the order of the operations)
local LOOSE = { cosemb_mean = 10, cosemb_sum = 10, cosemb_none = 10 }

local function check_case(case, dtype, tol, how)
  tol = tol * (LOOSE[case.name] or 1)
  local t, grads = {}, {}
  for _, k in ipairs({ 'x1', 'x2', 'a', 'p', 'n', 'x', 'y', 'v', 'w' }) do
    local v = get(case, k)
    if v then
      t[k] = v:is_floating_point() and v:detach():to(dtype) or v
      if how == 'noncontig' and t[k]:dim() >= 2 and t[k]:is_floating_point() then
        local d = t[k]:dim()
        t[k] = t[k]:transpose(d - 1, d):contiguous():transpose(d - 1, d)
      end
      if get(case, 'd' .. k) then t[k].requires_grad = true; grads[k] = t[k] end
    end
  end
  local args = {}
  for i, k in ipairs(ARGS[case.op]) do args[i] = t[k] end
  local o = opts_of(case, t)
  local out
  if how == 'module' then
    local n = #args
    out = nn[MODULES[case.op]](o)(unpack(args, 1, n))
  else
    args[#args + 1] = o
    out = F[case.op](unpack(args))
  end
  assert.tensor_near(out, get(case, 'out'), tol)
  out:backward(get(case, 'dout'):to(dtype))
  for k, v in pairs(grads) do
    assert.is_not_nil(v.grad, case.name .. ': no gradient for ' .. k)
    assert.tensor_near(v.grad, get(case, 'd' .. k), tol)
  end
end

describe('distances and losses vs PyTorch 1.13 fixtures', function()
  it('has the fixture cases', function() assert.is_true(#cases >= 60, tostring(#cases)) end)
  for _, case in ipairs(cases) do
    it(case.name .. ' float32', function() check_case(case, 'float32', 1e-5) end)
    it(case.name .. ' float64', function() check_case(case, 'float64', 1e-9) end)
    it(case.name .. ' non-contiguous', function() check_case(case, 'float32', 1e-5, 'noncontig') end)
    it(case.name .. ' as nn.' .. MODULES[case.op], function() check_case(case, 'float64', 1e-9, 'module') end)
  end
end)

describe('distances and losses: gradcheck (float64)', function()
  local function r(...) return lunet.randn(...):double() end
  local function leaf(t) t.requires_grad = true; return t end
  local function check(f, inputs)
    local ok, msg = gradcheck(f, inputs)
    assert(ok, msg)
  end
  lunet.manual_seed(3)
  local labels = lunet.tensor({ 2, 1, 3, 3 }, { dtype = 'int64' })
  local signs = lunet.tensor({ 1, -1, 1, -1 }):double()
  local ones = {
    { 'cosine_similarity', function(a, b) return F.cosine_similarity(a, b) end, { r(4, 5), r(4, 5) } },
    { 'cosine_similarity broadcast', function(a, b) return F.cosine_similarity(a, b, 2) end, { r(4, 1), r(4, 3) } },
    { 'pairwise_distance', function(a, b) return F.pairwise_distance(a, b) end, { r(4, 5), r(4, 5) } },
    { 'pairwise_distance p 3', function(a, b) return F.pairwise_distance(a, b, 3) end, { r(4, 5), r(1, 5) } },
    { 'triplet swap', function(a, p, n) return F.triplet_margin_loss(a, p, n, { swap = true, margin = 5 }) end,
      { r(4, 3), r(4, 3), r(4, 3) } },
    { 'cosine_embedding', function(a, b) return F.cosine_embedding_loss(a, b, signs, { margin = -1 }) end,
      { r(4, 3), r(4, 3) } },
    { 'margin_ranking', function(a, b, y) return F.margin_ranking_loss(a, b, y, { margin = 10 }) end,
      { r(5), r(5), r(5) } },
    { 'soft_margin', function(x, y) return F.soft_margin_loss(x, y, { reduction = 'none' }) end, { r(3, 4), r(3, 4) } },
    { 'multilabel_soft_margin', function(x, y) return F.multilabel_soft_margin_loss(x, y) end, { r(3, 4), r(3, 4) } },
    { 'multi_margin p 2', function(x) return F.multi_margin_loss(x, labels, { p = 2, margin = 10 }) end, { r(4, 3) } },
    { 'poisson full', function(x) return F.poisson_nll_loss(x, lunet.tensor({ 0, 1, 3, 7 }):double(), { full = true }) end,
      { r(4) } },
    { 'poisson rate', function(x, y) return F.poisson_nll_loss(x:abs() + 0.5, y, { log_input = false }) end, { r(4), r(4) } },
    { 'gaussian', function(x, y, v) return F.gaussian_nll_loss(x, y, v:abs() + 0.1, { full = true }) end,
      { r(4, 3), r(4, 3), r(4) } },
  }
  for _, c in ipairs(ones) do
    it(c[1], function()
      for _, x in ipairs(c[3]) do leaf(x) end
      check(c[2], c[3])
    end)
  end
end)

describe('distances and losses: the rest', function()
  local function errs(pat, f, ...)
    local ok, e = pcall(f, ...)
    assert.is_false(ok, 'no error, wanted ' .. pat)
    assert.matches(pat, tostring(e), 1, true)
  end
  local x, y = lunet.randn(4, 3), lunet.randn(4, 3)

  it('take reduction as the other losses do, and refuse unknown options', function()
    for _, L in ipairs({ 'TripletMarginLoss', 'CosineEmbeddingLoss', 'MarginRankingLoss', 'SoftMarginLoss',
      'MultiLabelSoftMarginLoss', 'MultiMarginLoss', 'PoissonNLLLoss', 'GaussianNLLLoss' }) do
      errs("nn." .. L .. ": reduction must be 'none', 'mean' or 'sum', got 'avg'", nn[L], { reduction = 'avg' })
      errs("nn." .. L .. ": unknown option 'reductoin' (did you mean 'reduction'?)", nn[L], { reductoin = 'sum' })
      errs('options must be a table', nn[L], 5)
    end
    errs("unknown option 'dims'", nn.CosineSimilarity, { dims = 1 })
    errs("unknown option 'keep_dim'", nn.PairwiseDistance, { keep_dim = true })
    errs("option 'swap' must be a boolean", nn.TripletMarginLoss, { swap = 1 })
    errs("reduction must be", F.soft_margin_loss, x, y, { reduction = 'batchmean' })
    errs("unknown option 'margn'", F.margin_ranking_loss, x, y, y, { margn = 1 })
    errs("p must be 1 or 2, got 3", nn.MultiMarginLoss, { p = 3 })
    errs("p must be a number, got nan", nn.PairwiseDistance, 0 / 0)
    errs('eps must be a number, got nan', F.cosine_similarity, x, y, 2, 0 / 0)
  end)

  it('refuse shapes that differ and do not broadcast, naming the module', function()
    errs('nn.TripletMarginLoss: anchor {4,3} and positive {4,2} differ', nn.TripletMarginLoss(), x, lunet.randn(4, 2), x)
    errs('triplet_margin_loss: anchor {4,3} and negative {5,3} differ', F.triplet_margin_loss, x, x, lunet.randn(5, 3))
    errs('same number of dims, got {4,3}, {4,3} and {3}', F.triplet_margin_loss, x, x, lunet.randn(3))
    errs('nn.CosineSimilarity: x1 {4,3} and x2 {2,3} differ', nn.CosineSimilarity(), x, lunet.randn(2, 3))
    errs('pairwise_distance: x1 {4,3} and x2 {4,2} differ', F.pairwise_distance, x, lunet.randn(4, 2))
    errs('cosine_similarity: dim 3 out of range for a 2-d tensor', F.cosine_similarity, x, y, 3)
    errs('a 1-d target needs 2-d inputs, got {4} and {4}', F.cosine_embedding_loss, lunet.randn(4), lunet.randn(4),
      lunet.ones(4))
    errs('target must be 0-d or 1-d', nn.CosineEmbeddingLoss(), x, y, lunet.ones(4, 1))
    errs('target {3} and the inputs {4,3} differ in the batch size', F.cosine_embedding_loss, x, y, lunet.ones(3))
    errs('nn.MarginRankingLoss: input1, input2 and target must have the same number of dims', nn.MarginRankingLoss(),
      x, y, lunet.ones(4))
    errs('input {4,3} and target {4,2} differ', F.soft_margin_loss, x, lunet.randn(4, 2))
    errs('nn.MultiLabelSoftMarginLoss: input {4,3} and weight {2} differ', nn.MultiLabelSoftMarginLoss{ weight = lunet.ones(2) }, x, y)
    errs('input {4,3} and target {3,3} differ', F.poisson_nll_loss, x, lunet.randn(3, 3))
    errs('nn.GaussianNLLLoss: var {3} is of incorrect size', nn.GaussianNLLLoss(), x, y, lunet.ones(3))
    errs('var {4,2} is of incorrect size', F.gaussian_nll_loss, x, y, lunet.ones(4, 2))
    errs('var has negative entries', F.gaussian_nll_loss, x, y, -lunet.ones(4))
    errs('must be a floating-point tensor, got int64', F.pairwise_distance, x, lunet.ones(4, 3, { dtype = 'int64' }))
    errs('x2 must be a tensor, got nil', F.cosine_similarity, x)
    errs('var must be a tensor, got nil', F.gaussian_nll_loss, x, y)
  end)

  it('MultiMarginLoss takes 1-based int64 labels in 1..C, one per sample', function()
    local t = lunet.tensor({ 1, 3, 2, 3 }, { dtype = 'int64' })
    errs('nn.MultiMarginLoss: target holds a label 0 out of range 1..3', nn.MultiMarginLoss(), x,
      lunet.tensor({ 0, 1, 2, 3 }, { dtype = 'int64' }))
    errs('target holds a label 4 out of range 1..3', F.multi_margin_loss, x, lunet.tensor({ 1, 4, 2, 3 }, { dtype = 'int64' }))
    errs('target must hold class labels (an integer tensor), got float32', F.multi_margin_loss, x, t:to('float32'))
    errs('target must hold 4 labels', F.multi_margin_loss, x, t:narrow(1, 1, 3))
    errs('input must be a non-empty (C) or (N, C) tensor, got {2,3,4}', F.multi_margin_loss, lunet.randn(2, 3, 4), t)
    errs('weight {2} must have one value per class (3)', nn.MultiMarginLoss{ weight = lunet.ones(2) }, x, t)
    -- int32 labels are taken as int64; the weight moves with the module
    assert.near(F.multi_margin_loss(x, t):item(), F.multi_margin_loss(x, t:to('int32')):item(), 1e-7)
    local m = nn.MultiMarginLoss{ weight = lunet.ones(3) * 2 }
    assert.near(2 * F.multi_margin_loss(x, t):item(), m(x, t):item(), 1e-6)
    assert.is_not_nil(m:state_dict().weight)
  end)

  it('CosineSimilarity and PairwiseDistance take their options by position or in a table, and say them', function()
    local c = nn.CosineSimilarity(1, 1e-3)
    assert.equals(1, c.dim); assert.equals(1e-3, c.eps)
    assert.equals('dim 2, eps 1e-08', nn.CosineSimilarity():extra_repr())
    assert.equals('p 1, eps 1e-06, keepdim', nn.PairwiseDistance{ p = 1, keepdim = true }:extra_repr())
    assert.tensor_near(nn.CosineSimilarity(1)(x, y), F.cosine_similarity(x, y, { dim = 1 }), 1e-6)
    assert.same({ 4, 1 }, nn.PairwiseDistance(2, 1e-6, true)(x, y):size())
    assert.equals("margin 1, p 2, swap, reduction 'sum'",
      nn.TripletMarginLoss{ swap = true, reduction = 'sum' }:extra_repr())
    assert.equals("p 2, margin 1", nn.MultiMarginLoss{ p = 2 }:extra_repr())
    assert.equals("log_input false, full", nn.PoissonNLLLoss{ log_input = false, full = true }:extra_repr())
    assert.matches('nn.GaussianNLLLoss', tostring(nn.GaussianNLLLoss()), 1, true)
  end)

  it('edge values as PyTorch: zero vectors, equal inputs, big logits', function()
    -- cosine of a zero vector is 0 (not NaN); its gradient finite
    local z, v = lunet.zeros(1, 3), lunet.tensor({ { 1, 2, 2 } })
    z.requires_grad = true
    local c = F.cosine_similarity(z, v)
    assert.equals(0, c:item())
    c:backward()
    assert.tensor_near(z.grad, { { 1 / 3 * 1e8, 2 / 3 * 1e8, 2 / 3 * 1e8 } }, 1e-5)
    -- the distance of equal inputs is eps * sqrt(D)
    assert.near(1e-6 * math.sqrt(3), F.pairwise_distance(v, v):item(), 1e-12)
    assert.near(0, F.pairwise_distance(v, v, { eps = 0 }):item(), 0)
    -- multilabel soft margin stays finite at big logits
    local big = lunet.tensor({ { 100, -100 } })
    assert.near(50, F.multilabel_soft_margin_loss(big, lunet.tensor({ { 0, 0 } })):item(), 1e-4)
    -- a Sequential trains through a triplet loss
    lunet.manual_seed(1)
    local net = nn.Sequential(nn.Linear(3, 4))
    local opt = lunet.optim.SGD(net:parameters(), { lr = 0.1 })
    local a, p, n = lunet.randn(8, 3), lunet.randn(8, 3), lunet.randn(8, 3)
    local first, last
    for i = 1, 20 do
      opt:zero_grad()
      local l = nn.TripletMarginLoss()(net(a), net(p), net(n))
      l:backward()
      opt:step()
      if i == 1 then first = l:item() end
      last = l:item()
    end
    assert.is_true(last < first, ('%g !< %g'):format(last, first))
  end)
end)
